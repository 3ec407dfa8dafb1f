"""Numeric tolerance: compare a described return value with the expected array.

The child describes what the student's function returned (:func:`grader.child.probe.describe`);
here that description is checked in order: an array at all, then its shape, then its
dtype, then finiteness, then the values within ``atol + rtol * |expected|``. Every
mismatch over all cases of a check is collected into one message, and the worst
absolute and relative errors are reported in ``measured``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from grader.checks import Fail, Records
from grader.i18n import T, Text

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
    """Judge one value; returns the measured errors or raises :class:`Fail` carrying them.

    The errors are measured over the elements where both values are finite, whether the
    check passes or not, so that what the student reads and the numbers beside it agree.
    """
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
        bad = int(np.sum(arr != want))
        measured = {"max_abs_err": 0.0 if not bad else float(np.max(np.abs(arr.astype(np.float64) - want))),
                    "max_rel_err": 0.0, "mismatched": bad}
        if bad:
            raise Fail(T("numeric.int_values", what=what, bad=bad, total=int(want.size)), measured)
        return measured
    got_bad = ~np.isfinite(arr) & np.isfinite(want)
    both = np.isfinite(arr) & np.isfinite(want)
    max_abs, max_rel = errors(np.where(both, arr, 0), np.where(both, want, 0))
    measured = {"max_abs_err": max_abs, "max_rel_err": max_rel, "rtol": rtol, "atol": atol}
    if got_bad.any():
        measured["non_finite"] = int(got_bad.sum())
        raise Fail(T("numeric.non_finite", what=what, count=int(got_bad.sum()), total=int(arr.size)), measured)
    close = np.isclose(arr, want, rtol=rtol, atol=atol, equal_nan=True)
    if not close.all():
        index = tuple(int(i) for i in np.argwhere(~close)[0])
        measured["outside_tolerance"] = int((~close).sum())
        raise Fail(T("numeric.values", what=what, bad=int((~close).sum()), total=int(arr.size),
                     max_abs=max_abs, max_rel=max_rel, rtol=rtol, atol=atol,
                     first=first_difference(index, float(arr[index]), float(want[index]))),
                   measured)
    return measured


def first_difference(index: tuple[int, ...], got: float, expected: float) -> Any:
    """``at [0, 3] got …, expected …`` as a student indexes an array; no index for a scalar."""
    if not index:
        return T("numeric.first_scalar", got=got, expected=expected)
    return T("numeric.first_at", index=", ".join(str(i) for i in index), got=got, expected=expected)


def _shape(shape: tuple) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


#: what kind of mistake a failed comparison shows, by the message it raised
_KINDS = {
    "numeric.non_finite": "non_finite", "numeric.values": "values", "numeric.int_values": "values",
    "numeric.shape": "shape", "numeric.dtype": "dtype", "numeric.python_scalar": "type",
    "numeric.not_array": "type", "numeric.wrong_type": "type", "numeric.tracer": "type",
    "call.missing": "missing",
}


@dataclass
class CaseFailure:
    """One case of :func:`compare_calls` that failed, for a check to tell its mistake apart."""

    #: the record of the call
    key: str
    #: how the case reads in feedback
    label: str
    #: ``raised`` (the call raised), ``type`` (not an array), ``shape``, ``dtype``,
    #: ``non_finite`` (NaN or inf where the answer is finite), ``values`` (outside the
    #: tolerance) or ``missing`` (the function is not defined)
    kind: str
    #: the failure itself (message, measured, hint)
    failure: Fail


def _kind(failure: Fail) -> str:
    key = getattr(failure.message, "key", "")
    if key.startswith("call.raised"):
        return "raised"
    return _KINDS.get(key, "values")


#: hints of the grader's own for a kind of mistake every numeric check can meet
_KIND_HINTS = {"type": "hint.return_type", "shape": "hint.shape", "dtype": "hint.dtype"}


#: how much wider a tolerance is for float32 values computed on a device than on a CPU. A TPU's float32
#: transcendental functions are less exact (matrix products are at ``highest`` precision in a job on an
#: accelerator, :data:`grader.child.job.MATMUL_PRECISION`): on a TPU v5e the provided ``heavy`` (a product,
#: ``tanh``, a square, a mean) differed from its float64 value by up to 5.5e-6 absolute and 4.5e-5
#: relative, jitted or eager, and the same computed by NumPy in float32 on the host (a host callback)
#: differed from the TPU's by as much: at the CPU's tolerance (rtol 2e-5, atol 1e-6) it failed.
DEVICE_TOLERANCE = {"tpu": 10.0}


def on_device(device: str | None, *, rtol: float, atol: float) -> dict:
    """A check's tolerance (``rtol``, ``atol``: the CPU's) for values computed on ``device`` (its backend),
    widened by :data:`DEVICE_TOLERANCE`; what it gives names the device where it widened."""
    factor = DEVICE_TOLERANCE.get(device or "", 1.0)
    return {"rtol": rtol * factor, "atol": atol * factor}


def compare_calls(student: Records, reference: Records, cases: Iterable[tuple[str, str]], *,
                  expected: Callable[[str], Any] | None = None,
                  diagnose: Callable[[list[CaseFailure]], str | None] | None = None, **tolerance: Any) -> dict:
    """Compare many recorded calls (``(key, label)`` pairs) with the expected values.

    The expected value of a key is the reference's recorded call under the same key,
    unless ``expected(key)`` gives it (a float64 computation of the grader's, say).
    All mismatches are gathered into one :class:`Fail` (the same sentence once, with how
    many cases it covers). What is measured covers every case, failed ones included:
    ``cases`` (all of them), ``failed_cases``, and the worst errors over every case whose
    values could be compared.

    The hint is about the mistake the failures show: an exception's own hint first;
    else ``diagnose(failures)`` (the check's named hint for the pattern it recognises,
    or ``None``); else the grader's hint for a wrong type, shape or dtype; else the
    check's own hint.
    """
    failures: list[CaseFailure] = []
    worst: dict = {"max_abs_err": 0.0, "max_rel_err": 0.0, "cases": 0}
    for key, label in cases:
        worst["cases"] += 1
        try:
            got = student.result(key)  # first: a stub raises NotAttempted before the reference is read
            want = np.asarray(expected(key)) if expected else \
                as_array(reference.result(key), what=label, accept_scalars=True)
            m = compare(got, want, what=label, **tolerance)
        except Fail as failure:
            failures.append(CaseFailure(key, label, _kind(failure), failure))
            m = failure.measured
        for name in ("max_abs_err", "max_rel_err"):
            if name in m:
                worst[name] = max(worst[name], m[name])
        if m.get("non_finite"):
            worst["non_finite"] = worst.get("non_finite", 0) + m["non_finite"]
    worst.update({k: v for k, v in tolerance.items() if k in ("rtol", "atol")})
    if failures:
        worst["failed_cases"] = len(failures)
        raise Fail(summarize([f.failure.message for f in failures]), worst, hint=_hint(failures, diagnose))
    return worst


def _hint(failures: list[CaseFailure], diagnose: Callable[[list[CaseFailure]], str | None] | None
          ) -> str | Text | None:
    raised = next((f.failure.hint for f in failures if f.kind == "raised"), None)
    if raised is not None:
        return raised
    named = diagnose(failures) if diagnose else None
    if named is not None:
        return named
    kinds = {f.kind for f in failures}
    if len(kinds) == 1 and next(iter(kinds)) in _KIND_HINTS:
        return T(_KIND_HINTS[next(iter(kinds))])
    return None


def summarize(messages: list, limit: int = 4) -> list:
    """Messages in order, each sentence once (with how many cases repeat it), at most ``limit``."""
    distinct: list = []
    counts: list[int] = []
    for message in messages:
        for i, seen in enumerate(distinct):
            if seen == message:
                counts[i] += 1
                break
        else:
            distinct.append(message)
            counts.append(1)
    out = [m if n == 1 else T("numeric.repeated", message=m, n=n) for m, n in zip(distinct, counts)]
    return out[:limit] + ([T("numeric.more", n=len(out) - limit)] if len(out) > limit else [])
