"""The programs a student's functions trace to, for the class's similarity (:mod:`grader.similarity`).

Where a batch asks for it (``grade batch --similarity``: the job's option ``programs``), a student's job
keeps the arguments of the first call the probe made of each graded function, and once the probe has ended
(every record made, the compiles counted) traces each function on them: a jitted function as ``jit`` traces
it (``.trace(...)``, its static arguments static), any other with :func:`jax.make_jaxpr` (its arguments
that are not arrays static). The jaxprs, as JAX prints them, travel as one word, ``FromJob.PROGRAMS``, into
the outcome's ``programs``, which no check reads and no report shows: the batch keeps them for the instructor.

Capturing never changes a verdict: it runs after the probe, its prints are swallowed, every failure is the
function's entry (``error``), and a function whose tracing does not end within :data:`TRACE_S` is left
(a timer interrupts it).
"""
from __future__ import annotations

import contextlib
import functools
import io
import signal
from types import FrameType
from typing import Callable, Iterator

from grader.trusted import safe_str

#: a student's function, as the probe called it (anything callable the module defines)
StudentFunction = Callable[..., object]
#: a jaxpr's text is cut there
MAX_JAXPR = 60_000
#: the seconds one function's tracing may take
TRACE_S = 3.0


class FirstCalls:
    """The first call the probe made of each graded function (see the module)."""

    def __init__(self) -> None:
        self.calls: dict[str, tuple[StudentFunction, tuple, dict]] = {}

    def note(self, name: str, fn: object, args: tuple, kwargs: dict) -> None:
        """Keep the call of ``name`` where it is its first and it was handed plain data alone: a function
        handed a callable or an object of the grader's (a timing harness is handed the function it times,
        whose calls are recorded) is not traced, since tracing it would call what it was handed."""
        if callable(fn) and name not in self.calls and all(_plain(value) for value in (*args, *kwargs.values())):
            # an array kept as its shape and type alone: the call may have donated it, and it holds memory
            self.calls[name] = (fn, tuple(_shape_of(a) for a in args), {k: _shape_of(v) for k, v in kwargs.items()})

    def traced(self) -> dict[str, dict[str, str]]:
        """Each function's jaxpr (``{"jaxpr": text}``), or why it has none (``{"error": ...}``)."""
        found: dict[str, dict[str, str]] = {}
        for name, (fn, args, kwargs) in sorted(self.calls.items()):
            try:
                with _quiet(), _time_limit(TRACE_S):
                    found[name] = {"jaxpr": jaxpr_text(fn, args, kwargs)[:MAX_JAXPR]}
            except BaseException as exc:  # noqa: BLE001 - a student's function: anything, SystemExit included
                found[name] = {"error": f"{type(exc).__name__}: {safe_str(exc)[:300]}"}
        return found


def jaxpr_text(fn: StudentFunction, args: tuple, kwargs: dict) -> str:
    """The jaxpr ``fn`` traces to on ``args`` and ``kwargs``, as JAX prints it."""
    import jax

    trace = getattr(fn, "trace", None)
    if isinstance(fn, type(jax.jit(lambda: None))) and callable(trace):
        return str(trace(*args, **kwargs).jaxpr)
    static = tuple(i for i, arg in enumerate(args) if not _is_array(arg))
    bound = functools.partial(fn, **kwargs) if kwargs else fn
    return str(jax.make_jaxpr(bound, static_argnums=static)(*args))


def _plain(value: object, depth: int = 0) -> bool:
    """An array, a number, a string, ``None``, or a tuple or list of them."""
    if isinstance(value, (tuple, list)):
        return depth < 3 and len(value) <= 64 and all(_plain(item, depth + 1) for item in value)
    return value is None or isinstance(value, (bool, int, float, complex, str)) or _is_array(value)


def _shape_of(value: object) -> object:
    """An array as its shape and dtype (:class:`jax.ShapeDtypeStruct`), in a tuple or list too; else itself."""
    import jax
    import numpy as np

    if isinstance(value, (jax.Array, np.ndarray)):
        return jax.ShapeDtypeStruct(value.shape, value.dtype)
    if isinstance(value, (tuple, list)):
        return type(value)(_shape_of(item) for item in value)
    return value


def _is_array(value: object) -> bool:
    import jax
    import numpy as np

    return isinstance(value, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """What the student's function prints while traced goes nowhere (the job's output is the report's)."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


class _TooLong(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt what runs in this (the main) thread after ``seconds``."""
    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise _TooLong(f"tracing took over {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
