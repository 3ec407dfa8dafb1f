"""Structure: how the student's code is built, judged from what JAX sees.

Child side: :func:`grader.child.probe.describe_callable` says whether a name is the object
``jax.jit`` returns; :func:`program_size` lowers a function with ``jax.jit(...).lower``
and measures the program XLA would receive, in lines of its StableHLO text (a Python
loop that unrolls grows with the loop count, ``fori_loop`` and ``scan`` do not), and
names the host callbacks in it; :func:`trace_abstractly` traces a function on shapes
alone, which raises exactly when a Python ``if``/``while`` or a host conversion
(``.item()``, ``float()``) meets a traced value.
Grader side: the ``expect_*`` functions judge those records.

The size is measured on the lowered text, not by walking the traced program's
equations: a walk of equations at every nesting level is the answer to an exercise of
chapter 4 (``count_primitives``), and the grader ships to students in a course release.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from grader.checks import Fail
from grader.i18n import T


#: a host callback in lowered StableHLO: ``stablehlo.custom_call @xla_ffi_python_cpu_callback(...)``
_CALLBACK = re.compile(r"custom_call @([\w.]*callback[\w.]*)")
#: which of JAX's callbacks a lowered one is, told from its line: a result and no side effect is
#: ``jax.pure_callback``'s; a side effect without a result, ``jax.debug.callback``'s (``jax.debug.print``
#: too); both, ``io_callback``'s
CALLBACK_KINDS = {(True, False): "jax.pure_callback", (False, True): "jax.debug.callback",
                  (True, True): "io_callback", (False, False): "jax.debug.callback"}


def host_calls(text: str) -> list[str]:
    """JAX's host callbacks in a lowered program's text, by the API that made them."""
    found = set()
    for line in text.splitlines():
        if _CALLBACK.search(line):
            stripped = line.strip()
            found.add(CALLBACK_KINDS[(stripped.startswith("%"), "has_side_effect = true" in stripped)])
    return sorted(found)


def program_size(fn: Callable, *args: Any, student_dir: str = "", **kwargs: Any) -> dict:
    """The lowered program's size in lines and its host callbacks, or how tracing failed."""
    import jax

    try:
        text = jax.jit(fn).lower(*args, **kwargs).as_text()
    except NotImplementedError:
        return {"status": "not_attempted"}
    except Exception as exc:  # noqa: BLE001
        return _raised(exc, fn, student_dir)
    return {"status": "ok", "lines": text.count("\n") + 1, "callbacks": sorted(set(_CALLBACK.findall(text))),
            "host_calls": host_calls(text)}


def trace_abstractly(fn: Callable, *args: Any, student_dir: str = "", **kwargs: Any) -> dict:
    """Trace ``fn`` (the Python function under a jit, if any) with abstract inputs only."""
    import jax

    target = getattr(fn, "__wrapped__", fn)
    shaped = [jax.ShapeDtypeStruct(a.shape, a.dtype) if hasattr(a, "shape") else a for a in args]
    try:
        jax.make_jaxpr(target)(*shaped, **kwargs)
    except NotImplementedError:
        return {"status": "not_attempted"}
    except Exception as exc:  # noqa: BLE001
        return _raised(exc, fn, student_dir)
    return {"status": "ok"}


def _raised(exc: BaseException, fn: Callable, student_dir: str) -> dict:
    """The record of an exception tracing or lowering ``fn`` raised: its kind, message and place
    (the student's line, else where ``fn`` is defined, see :func:`grader.checks.place`)."""
    from grader.trusted import classify, defined_at, safe_str, student_frame

    where = student_frame(exc.__traceback__, student_dir)
    record = {"status": "raised", "type": type(exc).__name__, "kind_of_error": classify(exc),
              "message": safe_str(exc), "where": where}
    if where is None:
        record["defined"] = defined_at(fn, student_dir)
    return record


# ---------------------------------------------------------------- grader side
def expect_jitted(described: dict, *, name: str, jitted: bool = True) -> dict:
    if described.get("missing"):
        raise Fail(T("call.missing", name=name, file=described.get("file", "")))
    if bool(described.get("jitted")) != jitted:
        key = "structure.not_jitted" if jitted else "structure.jitted"
        shown = described.get("shown") or described.get("type")
        raise Fail(T(key, name=name, type=shown), {"type": described.get("type")})
    return {"type": described.get("type"), "jitted": jitted}


def expect_traceable(record: dict, *, name: str) -> dict:
    """A function must trace on abstract inputs: no Python branch on traced values.

    A failure of the kind the check looks for (a traced value in a Python ``if``, ...)
    gets the check's own hint; any other exception is reported as what it is, with its
    message and line, and a hint about that exception.
    """
    from grader.checks import exception_hint, place

    status = record.get("status")
    if status == "raised":
        kind = record.get("kind_of_error")
        where = place(record, name)
        if kind in ("tracer_bool", "concretization", "tracer_int", "tracer_array"):
            raise Fail(T(f"structure.trace.{kind}", name=name, where=where), {"error": record.get("type")})
        raise Fail(T("structure.trace.other", name=name, type=record.get("type"), where=where,
                     message=record.get("message", "")), {"error": record.get("type")},
                   hint=exception_hint(record))
    if status != "ok":
        raise Fail(T("structure.trace.other", name=name, type=str(status), where=place(record, name), message=""),
                   {"status": status})
    return {"traced": True}
