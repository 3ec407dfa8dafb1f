"""What the child process trusts, taken before any student code runs.

* :data:`TRUSTED`: the clock (``time.perf_counter``, ``monotonic``, ``sleep``) as it was
  when the job started: a student's module that patches ``time`` changes nothing the
  grader times with;
* how an exception is told: its kind of JAX mistake (:func:`classify`), its message
  whatever its ``__str__`` does (:func:`safe_str`), and where in the submission it
  happened (:func:`student_frame`), or where the function that raised is defined (:func:`defined_at`).

Used by the probes (:mod:`grader.child.probe`), the job (:mod:`grader.child.job`) and
the instruments (:mod:`grader.primitives`); imports nothing of the grader's.
"""
from __future__ import annotations

import os
import traceback
from typing import Any


class _Trusted:
    """Trusted callables captured before any student code is imported."""

    def __init__(self) -> None:
        import time

        self.perf_counter = time.perf_counter
        self.monotonic = time.monotonic
        self.sleep = time.sleep


#: the clock as it was before any student code ran: no student can patch what the grader times with
TRUSTED = _Trusted()


#: JAX's exceptions by the name of their class, and the kind of mistake each shows
ERROR_KINDS = (
    ("TracerBoolConversionError", "tracer_bool"),
    ("TracerIntegerConversionError", "tracer_int"),
    ("TracerArrayConversionError", "tracer_array"),
    ("ConcretizationTypeError", "concretization"),
    ("UnexpectedTracerError", "tracer_leak"),
)


def safe_str(exc: BaseException) -> str:
    """An exception's message, at most 600 characters, whatever its ``__str__`` does."""
    try:
        text = str(exc)
    except BaseException:  # a hostile __str__
        text = "<message unavailable>"
    return text[:600]


def classify(exc: BaseException) -> str | None:
    """The kind of JAX mistake an exception shows (``tracer_bool``, ``static_needed``, ...), if any."""
    names = {k.__name__ for k in type(exc).__mro__}
    for name, kind in ERROR_KINDS:
        if name in names:
            return kind
    text = safe_str(exc)
    if isinstance(exc, TypeError) and ("not a valid JAX type" in text or "as an abstract array" in text):
        return "static_needed"
    if isinstance(exc, ValueError) and "truth value of an array" in text:
        return "tracer_bool"  # a Python if on an array of more than one element (traced or not)
    return None


def student_frame(tb: Any, student_dir: str) -> str | None:
    """``file:line`` of the innermost traceback frame inside the submission."""
    where = None
    for frame in traceback.extract_tb(tb):
        try:
            if os.path.dirname(os.path.abspath(frame.filename)) == student_dir:
                where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
        except (TypeError, ValueError):
            continue
    return where


def raised_in_submission(tb: Any, student_dir: str) -> bool:
    """Whether the innermost frame of a traceback is the submission's: its own ``raise`` (a stub's
    ``NotImplementedError``), not one a library raised on its behalf (JAX's "not implemented" for a
    transform a callback does not support, say)."""
    frames = traceback.extract_tb(tb)
    try:
        return bool(frames) and os.path.dirname(os.path.abspath(frames[-1].filename)) == student_dir
    except (TypeError, ValueError):
        return False


def defined_at(fn: Any, student_dir: str) -> str | None:
    """``file:line`` where the student's function under ``fn`` (a jit, a partial, a named_call)
    is defined, when it is in the submission; read from attributes only, whatever they do."""
    try:
        for _ in range(5):
            code = getattr(fn, "__code__", None)
            if code is not None:
                if os.path.dirname(os.path.abspath(code.co_filename)) == student_dir:
                    return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"
                return None
            fn = getattr(fn, "__wrapped__", None) or getattr(fn, "func", None)
            if fn is None:
                return None
    except Exception:  # noqa: BLE001 - an object whose attributes misbehave: no place to name
        return None
    return None
