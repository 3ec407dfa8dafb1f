"""The child side of a check: calling the student's code and recording what happened.

Each exercise package of a chapter has a probe, ``probe(ctx)``. It runs in the child
process, next to the untrusted code, and only *records* through a
:class:`ProbeContext`: return values (described as plain data), exceptions, compile
counts, printed text, module globals. It never judges; verdicts are made in the
grader's process from these records.

Every record is sent to the grader as soon as it is made, so a crash or a hang later
in the exercise costs only what came after it.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Generic, Iterator, TypeVar

import numpy as np

from grader.child.programs import FirstCalls
from grader.primitives.timing import READY
from grader.protocol import OP, FromJob, ToJob, message, word_of
from grader.word_fields import CallRecord
from grader.trusted import classify, defined_at, raised_in_submission, safe_str, student_frame
from grader.wire import SAFE_DTYPES, Channel

MAX_ELEMENTS = 1 << 22
MAX_TEXT = 16 * 1024

# ------------------------------------------------------------------ describing values
_TYPES: dict[str, type] = {}


def prepare() -> None:
    """Learn JAX's array and jit types once the backend is up (placing a value compiles nothing)."""
    import jax

    _TYPES["array"] = type(jax.device_put(np.zeros((), np.float32)))
    _TYPES["jit"] = type(jax.jit(lambda: None))


def describe(value: Any, *, _depth: int = 0) -> dict:
    """Plain data describing a return value; never trusts the object's own methods."""
    import jax

    if not _TYPES:
        prepare()
    array_type = _TYPES["array"]  # the concrete array class, not jax.Array's ABC
    kind = type(value)
    if kind is array_type or kind is np.ndarray or (isinstance(value, np.generic) and kind.__module__ == "numpy"):
        host = np.asarray(value)
        if kind is array_type:
            type_name = "jax.Array"
        else:
            type_name = "numpy.ndarray" if kind is np.ndarray else f"numpy.{kind.__name__}"
        if host.dtype.name not in SAFE_DTYPES:
            return {"t": "object", "type": f"{type_name}[{host.dtype}]"}
        if host.size > MAX_ELEMENTS:
            return {"t": "object", "type": f"{type_name} with {host.size} elements"}
        return {"t": "array", "type": type_name, "value": host}
    if kind in (bool, int, float):
        return {"t": "scalar", "type": kind.__name__, "value": value}
    if kind in (tuple, list) and _depth < 4:
        items = [describe(v, _depth=_depth + 1) for v in value[:64]]
        return {"t": kind.__name__, "items": items, "length": len(value)}
    if kind is dict and _depth < 4 and len(value) <= 512:
        if all(type(k) is str for k in value):
            return {"t": "dict", "items": {k: describe(v, _depth=_depth + 1) for k, v in value.items()}}
        return {"t": "object", "type": "dict with non-string keys"}
    if isinstance(value, jax.core.Tracer):
        return {"t": "tracer", "type": "Tracer"}
    module = getattr(kind, "__module__", "?")
    return {"t": "object", "type": f"{module}.{getattr(kind, '__qualname__', '?')}"}


def describe_callable(obj: Any) -> dict:
    """Whether a module-level name is a function, and whether it is ``jax.jit``'s object."""
    if not _TYPES:
        prepare()
    if obj is None:
        return {"missing": True}
    jitted = type(obj) is _TYPES["jit"]
    wrapped = getattr(obj, "__wrapped__", None) if jitted else None
    kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
    name = name_of(obj)
    return {
        "callable": callable(obj),
        "jitted": jitted,
        "type": kind,
        "wrapped": name_of(wrapped) if wrapped is not None else None,
        "name": name,
        # what the object is, in the report: its type, or what made it when that says more
        "shown": name if name.startswith(("jax.stages.", "functools.partial(")) else kind,
    }


def name_of(obj: Any, _depth: int = 0) -> str:
    """How a student would name a callable: ``f``, ``functools.partial(f)``, ``jax.jit(f)``,
    ``jax.stages.Traced of f``; never empty (the type's name at least).

    Read from attributes only (``__name__``, ``func``, ``__wrapped__``, ``fun_name``), never by
    calling the object's own methods."""
    if _depth > 4:
        return "…"
    kind = type(obj)
    try:
        if _TYPES and kind is _TYPES.get("jit"):
            inner = getattr(obj, "__wrapped__", None)
            return f"jax.jit({name_of(inner, _depth + 1)})" if inner is not None else "jax.jit(…)"
        if kind.__module__ == "functools" and kind.__name__ == "partial":
            return f"functools.partial({name_of(obj.func, _depth + 1)})"
        if kind.__module__.startswith("jax") and kind.__name__ in ("Traced", "Lowered", "Compiled"):
            fun = getattr(obj, "fun_name", None)  # Traced has it; Lowered and Compiled do not
            return f"jax.stages.{kind.__name__}" + (f" of {fun}" if isinstance(fun, str) else "")
        name = getattr(obj, "__name__", None)
        if isinstance(name, str) and name:
            return name
    except Exception:  # noqa: BLE001 - an object whose attributes misbehave: its type says enough
        pass
    return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', kind.__name__)} object"


# ------------------------------------------------------------------ the context
def builtin_kinds(kind: type) -> list[str]:
    """The built-in exception classes ``kind`` is (``isinstance``): a library's ``class
    UnknownActivationError(ValueError)`` is a ``ValueError``, as a contract that asks for one means."""
    return [base.__name__ for base in getattr(kind, "__mro__", ()) if base.__module__ == "builtins"
            and isinstance(base, type) and issubclass(base, BaseException)]


class _Failed:
    def __repr__(self) -> str:
        return "FAILED"


#: returned by :meth:`ProbeContext.call` when the student's call did not return
FAILED = _Failed()


@dataclass(frozen=True)
class Called:
    """How one call of a student's function went."""

    #: what the checks read: ``status`` (``ok``, ``raised``, ``not_attempted``, ``missing``), the function's
    #: name, and the described ``value`` or the error (type, message, where)
    record: CallRecord
    #: the raw value it returned; :data:`FAILED` when it did not return
    result: Any = FAILED

    @property
    def ok(self) -> bool:
        return self.record["status"] == "ok"


#: an exercise's hidden inputs as its probe reads them: its ``Inputs`` TypedDict (``ProbeContext[Inputs]``)
InputsT = TypeVar("InputsT")


class ProbeContext(Generic[InputsT]):
    """What a probe uses to touch the student's module and to make its records.

    Generic in the hidden inputs' type: a probe annotated ``probe(ctx: ProbeContext[Inputs]) -> None`` (its
    exercise's ``Inputs`` TypedDict) reads ``ctx.inputs["cases"]`` typed, and the type checker names a misspelt
    key (``grader.exercise_package.ExercisePackage``: the contract of an exercise's code)."""

    def __init__(self, channel: Channel, module: ModuleType, inputs: InputsT, student_dir: str, workdir: str,
                 keep: Callable[[str], bool] | None = None, side: str = "student", part: Any = None,
                 first_calls: FirstCalls | None = None):
        self.channel = channel
        #: where the job records the programs the student's functions trace to (:mod:`grader.child.programs`)
        self.first_calls = first_calls
        #: which of the jobs sharing this probe this one is, and how many (an exercise's ``parts``): :meth:`does`
        self.part = (part[0], part[1]) if isinstance(part, list) and len(part) == 2 and all(
            type(n) is int for n in part) and 0 <= part[0] < part[1] else (0, 1)
        #: whose job this is: ``"student"`` or ``"reference"`` (a probe may order its work by it, never its records)
        self.side = side
        self.module = module
        #: the hidden inputs the grader sent (what the exercise's ``inputs(rng)`` drew, as the wire carries them)
        self.inputs: InputsT = inputs
        self.student_dir = student_dir
        self.workdir = workdir
        #: which records this job makes (the reference's: what the checks read from it); ``None``: all
        self.keep = keep
        self.recorded: set[str] = set()
        self._calling: str | None = None

    def does(self, share: int) -> bool:
        """Whether this job does the probe's share ``share`` (0, 1, ...) where several jobs share the probe
        (an exercise's ``parts``: share ``i`` is job ``i`` modulo their number's); a job alone does every one."""
        index, count = self.part
        return share % count == index

    # ---- recording
    def wants(self, key: str) -> bool:
        """Whether this job records ``key``: a probe skips the work of a record nobody reads (but the
        grader's timing driver reads that a job is ready to be timed, whichever job it is)."""
        return self.keep is None or key == READY or self.keep(key)

    def _claim(self, key: str) -> bool:
        """Whether this job records ``key`` now (each key once)."""
        if not self.wants(key):
            return False
        if key in self.recorded:
            raise KeyError(f"observation {key!r} recorded twice")
        self.recorded.add(key)
        return True

    def record(self, key: str, value: Any) -> None:
        if self._claim(key):
            self.channel.send(message(FromJob.RECORD, key=key, value=value))

    def mark(self, key: str) -> None:
        """Record ``key`` as a moment of the grader's own clock, and go on only once the grader has it.

        The grader stamps the moment when it answers, so whatever the probe does next
        starts after that stamp, however late the grader reads its messages (a busy
        grader reads a plain record late: stamped then, it would shorten what follows).
        For probes that take no requests while they run (the answer is the next message).
        """
        if not self._claim(key):
            return
        self.channel.send(message(FromJob.MARK, key=key))
        answer = self.channel.recv()
        if answer is None:
            raise SystemExit(0)
        if word_of(answer, ToJob) is not ToJob.GO:
            raise RuntimeError(f"the grader answered a mark with {answer[OP]!r}")

    def request(self) -> dict:
        """Wait for an instruction from the grader (used by timed exercises)."""
        order = self.channel.recv()
        if order is None:
            raise SystemExit(0)
        return order

    def reply(self, answer: dict) -> None:
        self.channel.send(answer)

    # ---- the student's names
    def get(self, name: str) -> Any:
        """A module-level name, or ``None`` when the module does not define it."""
        return getattr(self.module, name, None)

    def call(self, key: str | None, name: str, *args: Any, under: Callable[[Any], Any] | None = None,
             **kwargs: Any) -> Any:
        """Call the student's ``name(*args, **kwargs)``; record how it went under ``key``.

        ``under``: a transform to call it under (``jax.vmap``, ``jax.grad``, a probe's own wrapper):
        ``under(name)(*args, **kwargs)``, its error the call's. Returns the raw result, or
        :data:`FAILED` when the call did not return, or was not made because this job does not
        record ``key`` (:meth:`wants`).
        """
        if key is not None and not self.wants(key):
            return FAILED
        called = self.invoke(self.get(name), name, *args, under=under, **kwargs)
        if key is not None:
            self.record(key, called.record)
        return called.result

    def call_object(self, key: str | None, fn: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        """Like :meth:`call`, for a callable the student's code made rather than a module-level name (a
        compiled program, a function it returned), said as ``name`` in feedback."""
        if key is not None and not self.wants(key):
            return FAILED
        called = self.invoke(fn, name, *args, **kwargs)
        if key is not None:
            self.record(key, called.record)
        return called.result

    def invoke(self, fn: Any, name: str, *args: Any, under: Callable[[Any], Any] | None = None,
               **kwargs: Any) -> Called:
        """Call ``fn`` (under ``under`` when given) and describe how it went: :class:`Called` (its record,
        and the raw value it returned). Records nothing: a probe that records something else than the
        call's record (one record for many calls, the value alone) uses this."""
        if fn is None:
            return Called({"status": "missing", "function": name})
        if self.first_calls is not None and under is None and fn is getattr(self.module, name, None):
            self.first_calls.note(name, fn, args, kwargs)
        self.announce(name)
        from grader.primitives.compiles import COUNTER

        COUNTER.note_call(fn)  # a cache miss from here on belongs to this call
        try:
            result = (under(fn) if under is not None else fn)(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too
            if isinstance(exc, NotImplementedError) and raised_in_submission(exc.__traceback__, self.student_dir):
                return Called({"status": "not_attempted", "function": name})  # the stub's own raise
            return Called(self._raised(fn, name, exc, student_frame(exc.__traceback__, self.student_dir)))
        try:
            value = describe(result)
        except BaseException as exc:  # noqa: BLE001 - e.g. an array whose transfer fails
            if type(exc).__module__.startswith(("jax", "jaxlib")):
                # dispatch is asynchronous: the computation's own error (out of memory on the device, a failed
                # check) comes when its result is read, and it is the call's, said as a raised call's is
                return Called(self._raised(fn, name, exc, None))
            value = {"t": "object", "type": f"undescribable ({type(exc).__name__})"}
        return Called({"status": "ok", "function": name, "value": value}, result)

    def _raised(self, fn: Any, name: str, exc: BaseException, where: Any) -> CallRecord:
        """The record of a call that raised ``exc``; ``where``: the submission's line it raised at, if any (else
        where the function is defined: it raised inside JAX before or after any line of it ran)."""
        raised: CallRecord = {"status": "raised", "function": name, "type": type(exc).__name__,
                              "message": safe_str(exc), "kind_of_error": classify(exc), "where": where,
                              "is_a": builtin_kinds(type(exc))}
        if where is None:
            raised["defined"] = defined_at(fn, self.student_dir)
        return raised

    def announce(self, name: str) -> None:
        """Tell the grader which of the student's functions runs next (it says so if it hangs)."""
        if name != self._calling:
            self._calling = name
            self.channel.send(message(FromJob.CALLING, function=name))

    def attempted(self, name: str, *args: Any, **kwargs: Any) -> bool:
        """Whether calling ``name`` gets past ``NotImplementedError`` (not recorded)."""
        fn = self.get(name)
        if fn is None:
            return False
        return self.invoke(fn, name, *args, **kwargs).record["status"] != "not_attempted"

    # ---- instruments
    def timing_begins(self) -> None:
        """What this job compiles from here on is what it times, or after it: compiled the default way,
        where the exercise compiles quickly until it times (:func:`grader.child.quick_compile.timing_begins`);
        a probe calls it before it prepares its timed functions (else they are compiled twice)."""
        from grader.child import quick_compile

        quick_compile.timing_begins()

    @contextlib.contextmanager
    def compiles(self, key: str, *, fresh: bool = True) -> Iterator[dict]:
        """Count backend compiles inside the block (JAX's caches emptied first, unless not ``fresh``);
        the dict it gives holds the count once the block is over (for the probe's own use)."""
        from grader.primitives.compiles import COUNTER

        box: dict = {}
        if not self.wants(key):
            yield box
            return
        if fresh:
            import jax

            jax.clear_caches()
        with COUNTER.window() as window:
            yield box
        box.update(window.summary())
        self.record(key, dict(box))

    @contextlib.contextmanager
    def capture(self, key: str) -> Iterator[dict]:
        """Capture what is written to standard output (Python and file descriptor 1)."""
        import jax

        box: dict = {}
        if not self.wants(key):
            yield box
            return
        sys.stdout.flush()
        saved = os.dup(1)
        with tempfile.TemporaryFile(dir=self.workdir) as sink:
            os.dup2(sink.fileno(), 1)
            try:
                yield box
            finally:
                try:
                    jax.effects_barrier()
                except BaseException:  # noqa: BLE001
                    pass
                try:
                    sys.stdout.flush()
                except BaseException:  # noqa: BLE001
                    pass
                os.dup2(saved, 1)
                os.close(saved)
                sink.seek(0, os.SEEK_END)
                size = sink.tell()
                sink.seek(0)
                raw = sink.read(MAX_TEXT)
                text = raw.decode("utf-8", errors="replace")
                _echo(raw, size)
        box.update(text=text, bytes=size)
        self.record(key, box)


def _echo(raw: bytes, size: int) -> None:
    """Copy captured text to the job's own output too: everything printed reaches the student."""
    try:
        os.write(1, raw)
        if size > len(raw):
            os.write(1, f"\n[… {size - len(raw)} more bytes …]\n".encode())
    except OSError:
        pass




def module_dir(module: ModuleType) -> str:
    return str(Path(module.__file__ or ".").resolve().parent)
