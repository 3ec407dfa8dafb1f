"""What chapter 4's exercise modules share: array helpers, case labels, and small guards
the checks use before judging (was the function attempted, did it return, is it jitted)."""
from __future__ import annotations

import numpy as np

from grader.checks import NAMES, Fail, NotAttempted, Records
from grader.i18n import T
from grader.primitives import numeric

F32 = np.float32


# ------------------------------------------------------------------ probes (child side)
def put(tree):
    """NumPy arrays placed on the device, and there before the student's code gets them (placing
    compiles nothing, so counts stay clean). Waiting matters: a host callback of the student's
    (``jax.pure_callback``) that reads an input still being copied waits for the copy, which on one
    CPU (a batch's core slot) can wait for the very thread the callback holds: the job hung."""
    import jax

    placed = jax.tree_util.tree_map(lambda a: jax.device_put(a) if isinstance(a, np.ndarray) else a, tree)
    return jax.block_until_ready(placed)


# ------------------------------------------------------------------ checks (grader side)
def label(name: str, x, case: str | None = None) -> str:
    """``softmax(x: f32[4,9]) [large_2d]``: how a case is named in feedback."""
    arr = np.asarray(x)
    dims = ",".join(str(n) for n in arr.shape)
    short = {"float32": "f32", "float64": "f64", "int32": "i32"}.get(arr.dtype.name, arr.dtype.name)
    return f"{name}(x: {short}[{dims}])" + (f" [{case}]" if case else "")


def failed_kinds(failures: list[numeric.CaseFailure], *, cases: tuple[str, ...] | None = None) -> set[str]:
    """The kinds of mistake among ``failures`` (only those of keys ending in one of ``cases``)."""
    return {f.kind for f in failures if cases is None or f.key.rsplit("/", 1)[1] in cases}


def attempted(s: Records, *keys: str) -> None:
    """Read calls first: a stub raises NotAttempted here, before anything is judged."""
    for key in keys:
        s.call(key)


def returned(s: Records, *keys: str) -> None:
    """Like :func:`attempted`, and every call must have returned (else Fail with its error)."""
    for key in keys:
        s.result(key)


def require_jitted(s: Records, name: str) -> None:
    """Fail unless the module-level ``name`` is the object ``jax.jit`` returns."""
    described = s.value(NAMES(name=name))
    if not described.get("jitted"):
        raise Fail(T("structure.not_jitted_compiles", name=name, type=described.get("shown") or described.get("type")),
                   {"type": described.get("type")})


def any_attempted(s: Records, keys: dict[str, str], *, missing_counts: bool = True) -> list[str]:
    """The functions (of ``{function: key of its first call}``) that got past ``NotImplementedError``
    (a function the module does not define counts when ``missing_counts``).

    Raises :class:`NotAttempted` when none did.
    """
    done = []
    for name, key in keys.items():
        try:
            s.call(key)
            done.append(name)
        except NotAttempted:
            continue
        except Fail:
            if missing_counts:
                done.append(name)
    if not done:
        raise NotAttempted(", ".join(keys))
    return done


def all_jitted(s: Records, names: list[str]) -> dict:
    """Fail naming every one of ``names`` that is not jitted."""
    not_jitted = [n for n in names if not s.value(NAMES(name=n)).get("jitted")]
    if not_jitted:
        raise Fail(T("structure.not_jitted_many", names=", ".join(not_jitted)), {"not_jitted": not_jitted})
    return {"jitted": names}


# ------------------------------------------------------------------ values in feedback
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
