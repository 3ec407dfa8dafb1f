"""Structure: how the student's code is built, judged from what JAX sees.

Child side: :func:`grader.child.probe.describe_callable` says whether a name is the object
``jax.jit`` returns; :func:`program_size` traces a function with ``jax.make_jaxpr``
and counts its equations at every nesting level (a Python loop that unrolls grows
with the loop count, ``fori_loop`` and ``scan`` do not); :func:`trace_abstractly`
traces a function on shapes alone, which raises exactly when a Python ``if``/``while``
or a host conversion (``.item()``, ``float()``) meets a traced value.
Grader side: the ``expect_*`` functions judge those records.
"""
from __future__ import annotations

import collections
from typing import Any, Callable

from grader.checks import Fail
from grader.i18n import T


def count_equations(jaxpr: Any) -> collections.Counter:
    """Primitive names over every equation of ``jaxpr`` and of its sub-programs."""
    from jax.extend.core import jaxprs_in_params

    counts: collections.Counter = collections.Counter()

    def visit(j: Any) -> None:
        for eqn in j.eqns:
            counts[eqn.primitive.name] += 1
            for sub in jaxprs_in_params(eqn.params):
                visit(sub)

    visit(jaxpr)
    return counts


def program_size(fn: Callable, *args: Any, student_dir: str = "", **kwargs: Any) -> dict:
    """The traced program's equation count (all levels), or how tracing failed."""
    import jax

    from grader.child.probe import _safe_str, classify, student_frame

    try:
        closed = jax.make_jaxpr(fn, static_argnums=())(*args, **kwargs)
    except NotImplementedError:
        return {"status": "not_attempted"}
    except Exception as exc:  # noqa: BLE001
        return {"status": "raised", "type": type(exc).__name__, "kind_of_error": classify(exc),
                "message": _safe_str(exc), "where": student_frame(exc.__traceback__, student_dir)}
    counts = count_equations(closed.jaxpr)
    return {"status": "ok", "equations": sum(counts.values()), "primitives": dict(counts)}


def trace_abstractly(fn: Callable, *args: Any, student_dir: str = "", **kwargs: Any) -> dict:
    """Trace ``fn`` (the Python function under a jit, if any) with abstract inputs only."""
    import jax

    from grader.child.probe import _safe_str, classify, student_frame

    target = getattr(fn, "__wrapped__", fn)
    shaped = [jax.ShapeDtypeStruct(a.shape, a.dtype) if hasattr(a, "shape") else a for a in args]
    try:
        jax.make_jaxpr(target)(*shaped, **kwargs)
    except NotImplementedError:
        return {"status": "not_attempted"}
    except Exception as exc:  # noqa: BLE001
        return {"status": "raised", "type": type(exc).__name__, "kind_of_error": classify(exc),
                "message": _safe_str(exc), "where": student_frame(exc.__traceback__, student_dir)}
    return {"status": "ok"}


# ---------------------------------------------------------------- grader side
def expect_jitted(described: dict, *, name: str, jitted: bool = True) -> dict:
    if described.get("missing"):
        raise Fail(T("call.missing", name=name, file=described.get("file", "")))
    if bool(described.get("jitted")) != jitted:
        key = "structure.not_jitted" if jitted else "structure.jitted"
        raise Fail(T(key, name=name, type=described.get("type", "?")), {"type": described.get("type")})
    return {"type": described.get("type"), "jitted": jitted}


def expect_traceable(record: dict, *, name: str) -> dict:
    """A function must trace on abstract inputs: no Python branch on traced values.

    A failure of the kind the check looks for (a traced value in a Python ``if``, ...)
    gets the check's own hint; any other exception is reported as what it is, with its
    message and line, and a hint about that exception.
    """
    from grader.checks import exception_hint

    status = record.get("status")
    if status == "raised":
        kind = record.get("kind_of_error")
        where = record.get("where") or "?"
        if kind in ("tracer_bool", "concretization", "tracer_int", "tracer_array"):
            raise Fail(T(f"structure.trace.{kind}", name=name, where=where), {"error": record.get("type")})
        raise Fail(T("structure.trace.other", name=name, type=record.get("type"), where=where,
                     message=record.get("message", "")), {"error": record.get("type")},
                   hint=exception_hint(record))
    if status != "ok":
        raise Fail(T("structure.trace.other", name=name, type=str(status), where="?", message=""),
                   {"status": status})
    return {"traced": True}
