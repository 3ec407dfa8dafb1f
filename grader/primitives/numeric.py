"""Numeric tolerance: compare a described return value with the expected array.

The child describes what the student's function returned (:func:`grader.probe.describe`);
here that description is checked in order: an array at all, then its shape, then its
dtype, then finiteness, then the values within ``atol + rtol * |expected|``. Every
mismatch over all cases of a check is collected into one message, and the worst
absolute and relative errors are reported in ``measured``.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

from grader.checks import Fail, Observations
from grader.i18n import T

FLOAT32 = {"rtol": 1e-5, "atol": 1e-6}


def as_array(described: Any, *, what: str, accept_scalars: bool = False) -> np.ndarray:
    """The array inside a description, or :class:`Fail` saying what came back instead."""
    kind = described.get("t") if isinstance(described, dict) else None
    if kind == "array":
        return np.asarray(described["value"])
    if kind == "scalar" and accept_scalars:
        return np.asarray(described["value"])
    if kind == "scalar":
        raise Fail(T("numeric.python_scalar", what=what, type=described.get("type")))
    if kind == "tracer":
        raise Fail(T("numeric.tracer", what=what))
    got = described.get("type") if isinstance(described, dict) else type(described).__name__
    if kind in ("tuple", "list"):
        got = f"{kind} of {described.get('length')}"
    elif kind == "dict":
        got = f"dict of {len(described.get('items', {}))}"
    raise Fail(T("numeric.not_array", what=what, type=got))


def errors(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """Maximum absolute and relative error over the finite expected elements."""
    finite = np.isfinite(want)
    if not finite.any():
        return 0.0, 0.0
    wide = np.complex128 if np.iscomplexobj(got) or np.iscomplexobj(want) else np.float64
    diff = np.abs(got.astype(wide) - want.astype(wide))[finite]
    scale = np.abs(want.astype(wide))[finite]
    max_abs = float(diff.max()) if diff.size else 0.0
    nonzero = scale > 0  # the relative error is undefined where the answer is exactly 0
    max_rel = float((diff[nonzero] / scale[nonzero]).max()) if nonzero.any() else 0.0
    return max_abs, max_rel


def compare(got: Any, want: np.ndarray, *, what: str, rtol: float = FLOAT32["rtol"],
            atol: float = FLOAT32["atol"], dtype: str | None = None, array_type: str | None = None,
            accept_scalars: bool = False) -> dict:
    """Judge one value; returns the measured errors or raises :class:`Fail`."""
    if array_type and isinstance(got, dict) and got.get("t") == "array" and got.get("type") != array_type:
        raise Fail(T("numeric.wrong_type", what=what, expected=array_type, got=got.get("type")))
    arr = as_array(got, what=what, accept_scalars=accept_scalars)
    want = np.asarray(want)
    if arr.shape != want.shape:
        raise Fail(T("numeric.shape", what=what, expected=_shape(want.shape), got=_shape(arr.shape)),
                   {"expected_shape": list(want.shape), "shape": list(arr.shape)})
    expected_dtype = dtype or want.dtype.name
    if arr.dtype.name != expected_dtype:
        raise Fail(T("numeric.dtype", what=what, expected=expected_dtype, got=arr.dtype.name),
                   {"expected_dtype": expected_dtype, "dtype": arr.dtype.name})
    if arr.dtype.kind in "biu":
        if not np.array_equal(arr, want):
            bad = int(np.sum(arr != want))
            raise Fail(T("numeric.int_values", what=what, bad=bad, total=int(want.size)),
                       {"mismatched": bad})
        return {"max_abs_err": 0.0, "max_rel_err": 0.0}
    got_bad = ~np.isfinite(arr) & np.isfinite(want)
    if got_bad.any():
        raise Fail(T("numeric.non_finite", what=what, count=int(got_bad.sum()), total=int(arr.size)),
                   {"non_finite": int(got_bad.sum())})
    max_abs, max_rel = errors(arr, want)
    measured = {"max_abs_err": max_abs, "max_rel_err": max_rel, "rtol": rtol, "atol": atol}
    close = np.isclose(arr, want, rtol=rtol, atol=atol, equal_nan=True)
    if not close.all():
        index = tuple(int(i) for i in np.argwhere(~close)[0])
        raise Fail(T("numeric.values", what=what, bad=int((~close).sum()), total=int(arr.size),
                     max_abs=max_abs, max_rel=max_rel, rtol=rtol, atol=atol,
                     index=list(index), got=float(arr[index]), expected=float(want[index])),
                   measured)
    return measured


def _shape(shape: tuple) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def compare_calls(student: Observations, reference: Observations, cases: Iterable[tuple[str, str]], *,
                  expected: Callable[[str], Any] | None = None, **tolerance: Any) -> dict:
    """Compare many recorded calls (``(key, label)`` pairs) with the expected values.

    The expected value of a key is the reference's recorded call under the same key,
    unless ``expected(key)`` gives it (a float64 computation of the grader's, say).
    All mismatches are gathered into one :class:`Fail`; the measured worst errors
    cover every case.
    """
    failures: list = []
    worst = {"max_abs_err": 0.0, "max_rel_err": 0.0, "cases": 0}
    for key, label in cases:
        try:
            got = student.result(key)  # first: a stub raises NotAttempted before the reference is read
            want = np.asarray(expected(key)) if expected else \
                as_array(reference.result(key), what=label, accept_scalars=True)
            m = compare(got, want, what=label, **tolerance)
        except Fail as failure:
            failures.append(failure.message)
            continue
        worst["cases"] += 1
        worst["max_abs_err"] = max(worst["max_abs_err"], m["max_abs_err"])
        worst["max_rel_err"] = max(worst["max_rel_err"], m["max_rel_err"])
    worst.update({k: v for k, v in tolerance.items() if k in ("rtol", "atol")})
    if failures:
        worst["failed_cases"] = len(failures)
        raise Fail(failures[:4] + ([T("numeric.more", n=len(failures) - 4)] if len(failures) > 4 else []), worst)
    return worst
