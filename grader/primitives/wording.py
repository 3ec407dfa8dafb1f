"""How a check names a case and prints a value in feedback: chapter-agnostic."""
from __future__ import annotations

import numpy as np

from grader.primitives import numeric

__all__ = ["failed_kinds", "label", "shown"]


def label(name: str, x, case: str | None = None) -> str:
    """``softmax(x: f32[4,9]) [large_2d]``: how a case is named in feedback."""
    arr = np.asarray(x)
    dims = ",".join(str(n) for n in arr.shape)
    short = {"float32": "f32", "float64": "f64", "int32": "i32"}.get(arr.dtype.name, arr.dtype.name)
    return f"{name}(x: {short}[{dims}])" + (f" [{case}]" if case else "")


def failed_kinds(failures: list[numeric.CaseFailure], *, cases: tuple[str, ...] | None = None) -> set[str]:
    """The kinds of mistake among ``failures`` (only those of keys ending in one of ``cases``)."""
    return {f.kind for f in failures if cases is None or f.key.rsplit("/", 1)[1] in cases}


def shown(values: list[float], boundaries: tuple[float, ...] = ()) -> list[str]:
    """``values`` printed with the digits that matter: the fewest significant digits (3 at
    least) at which no two of them read the same and none reads as one of ``boundaries``
    (the values where the contract changes, 1 for a leaky ReLU's alpha) or on its other side:
    alpha 1.0017 reads 1.002, never 1."""
    for digits in range(3, 10):
        texts = [f"{v:.{digits}g}" for v in values]
        read = [float(t) for t in texts]
        distinct = len(set(texts)) == len(set(values))
        sides = all(np.sign(r - b) == np.sign(v - b) for r, v in zip(read, values) for b in boundaries)
        if distinct and sides:
            return texts
    return [repr(float(v)) for v in values]
