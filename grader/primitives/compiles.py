"""Compile counting: backend compiles around the grader's own calls, and why each happened.

In the child, :data:`COUNTER` listens to JAX's monitoring event for every backend
compile (``/jax/core/compile/backend_compile_duration``), so compiles done by any
helper the student's function calls are counted too, eager ``jnp`` operations
included. Probes open a window around their calls after building and placing the
inputs; the window records the count, the names of what compiled, and JAX's own
explanation of every tracing-cache miss (``jax_explain_cache_misses``, logged under
``jax._src.interpreters.partial_eval``) with the number of the call it happened in.

Grader side, :func:`expect` judges a window, and a failure says which call compiled
again and why, in the student's terms (:func:`explain`): "call 2 compiled again:
argument n_steps changed from 3 to 5, and it is static".

``jitted._cache_size()`` is not used: it counts dispatch entries, and a NumPy input
or a weak-typed scalar adds entries without compiling.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import re
import threading
from typing import Callable, Iterator

from grader.checks import Fail
from grader.i18n import T, Text

BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
#: the logger JAX explains its tracing-cache misses on
MISS_LOGGER = "jax._src.interpreters.partial_eval"
MAX_EXPLANATIONS = 12


class _Window:
    def __init__(self) -> None:
        self.names: collections.Counter[str] = collections.Counter()
        self.calls = 0  # the student's calls made in the window so far
        self.params: list[str] = []  # the parameter names of the function called last
        self.why: list[dict] = []

    def summary(self) -> dict:
        return {"count": sum(self.names.values()), "names": dict(self.names), "calls": self.calls,
                "why": self.why}


class _MissHandler(logging.Handler):
    """Hands JAX's cache-miss explanations to the counter (nothing reaches the job's output)."""

    def __init__(self, counter: "CompileCounter"):
        super().__init__(logging.DEBUG)
        self.counter = counter

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record: nothing to explain
            return
        if "CACHE MISS" in text:
            self.counter.on_miss(text)


class CompileCounter:
    """Counts backend compiles while a window is open (child side)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: list[_Window] = []
        self.installed = False
        self.total = 0  # every backend compile in this process, windows or not

    def install(self) -> None:
        if self.installed:
            return
        import jax.monitoring

        jax.monitoring.register_event_duration_secs_listener(self.on_event)
        self.installed = True

    def on_event(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        """JAX's event listener (``jax.monitoring``'s, called with the event's name and duration): a backend
        compile counts in every open window."""
        if event != BACKEND_COMPILE_EVENT:
            return
        label = str(kwargs.get("fun_name", "?"))
        with self._lock:
            self.total += 1
            for window in self._windows:
                window.names[label] += 1

    def on_miss(self, text: str) -> None:
        """A cache miss's explanation (JAX's log, through :class:`_MissHandler`) for every open window."""
        with self._lock:
            for window in self._windows:
                if len(window.why) < MAX_EXPLANATIONS:
                    window.why.append({"call": window.calls, "params": window.params, "text": text[:1500]})

    @property
    def windows(self) -> list[_Window]:
        """The windows open now (the list itself: the job's guard watches that it is not replaced)."""
        return self._windows

    def note_call(self, fn: Callable | None = None) -> None:
        """The probe is about to call ``fn``: later misses belong to this call (and name its parameters)."""
        params = _parameters(fn) if self._windows else []
        with self._lock:
            for window in self._windows:
                window.calls += 1
                window.params = params

    @contextlib.contextmanager
    def window(self) -> Iterator[_Window]:
        self.install()
        window = _Window()
        with self._lock:
            self._windows.append(window)
        with _explaining(self):
            try:
                yield window
            finally:
                with self._lock:
                    self._windows.remove(window)


#: JAX's loggers that, with ``jax_explain_cache_misses`` on, tell about the grader's own persistent cache
PERSISTENT_CACHE_LOGGERS = ("jax._src.compiler", "jax._src.compilation_cache")


class _NotAboutThePersistentCache(logging.Filter):
    """Drops JAX's notes on the grader's persistent compilation cache (a miss, a write, a hit):
    they are not the student's output and would read as if their code printed them."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "persistent compilation cache" not in str(record.msg).lower() \
            and "persistent cache entry" not in str(record.msg).lower()


@contextlib.contextmanager
def _explaining(counter: CompileCounter) -> Iterator[None]:
    """JAX explains its cache misses to the counter while a window is open, and to nobody else."""
    import jax

    logger = logging.getLogger(MISS_LOGGER)
    handler = _MissHandler(counter)
    saved = (logger.level, logger.propagate, getattr(jax.config, "jax_explain_cache_misses"))  # no stub names it
    quiet = _NotAboutThePersistentCache()
    for name in PERSISTENT_CACHE_LOGGERS:
        logging.getLogger(name).addFilter(quiet)
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    jax.config.update("jax_explain_cache_misses", True)
    try:
        yield
    finally:
        jax.config.update("jax_explain_cache_misses", saved[2])
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        for name in PERSISTENT_CACHE_LOGGERS:
            logging.getLogger(name).removeFilter(quiet)


COUNTER = CompileCounter()


def _parameters(fn: Callable | None) -> list[str]:
    """The parameter names of the Python function under a jit, for explanations that give positions."""
    import inspect

    target = getattr(fn, "__wrapped__", fn)
    if not callable(target):
        return []
    try:
        return list(inspect.signature(target).parameters)[:32]
    except (TypeError, ValueError):
        return []


def traced_in(window: dict, folder: str) -> list[str]:
    """The functions defined in ``folder`` (the submission) that ``jax.jit`` traced while the
    window was open, from JAX's own explanations of its tracing-cache misses ("never seen
    function: NAME id=... defined at FILE:LINE"). JAX explains misses of functions outside
    its own code only, so an eager ``jnp`` operation, which compiles too, never shows here."""
    import os

    found = set()
    for record in window.get("why") or []:
        for match in _DEFINED.finditer(str(record.get("text", ""))):
            try:
                if os.path.dirname(os.path.realpath(match["file"])) == os.path.realpath(folder):
                    found.add(match["name"])
            except (TypeError, ValueError):
                continue
    return sorted(found)


_DEFINED = re.compile(r"never seen function:\s*\n\s*(?P<name>\S+) id=\d+ defined at (?P<file>.+?):\d+\s*$", re.M)


# ---------------------------------------------------------------- grader side
def count(record: dict) -> int:
    value = record.get("count")
    if type(value) is not int or value < 0:
        raise Fail(T("compile.implausible", value=repr(value)))
    return value


def expect(record: dict, *, what: str | Text, exactly: int | None = None, at_most: int | None = None) -> dict:
    """Judge one window: the count must equal ``exactly`` or stay within ``at_most``.

    A failure says why the calls compiled again, from JAX's own explanations.
    """
    seen = count(record)
    names = record.get("names", {})
    measured = {"compiles": seen, "compiled": names}
    reasons = explain(record.get("why") or [])
    if reasons:
        measured["why"] = [r.args.get("call") for r in reasons]
    bad = None
    if exactly is not None:
        measured["expected"] = exactly
        if seen != exactly:
            bad = T("compile.exactly", what=what, expected=exactly, seen=seen, names=_names(names))
    if at_most is not None and bad is None:
        measured["at_most"] = at_most
        if seen > at_most:
            bad = T("compile.at_most", what=what, limit=at_most, seen=seen, names=_names(names))
    if bad is not None:
        shown = _varied(reasons, 3)
        raise Fail([bad, *shown] + ([T("compile.why.more", n=len(reasons) - 3)] if len(reasons) > 3 else []),
                   measured)
    return measured


def _varied(reasons: list[Text], most: int) -> list[Text]:
    """At most ``most`` of ``reasons``, each kind (a new dtype, a new shape, a static value, ...)
    first, then more of the same, in the order of the calls: a new dtype is named even when
    new shapes came first."""
    firsts = [i for i, r in enumerate(reasons) if r.key not in {q.key for q in reasons[:i]}]
    chosen = sorted((firsts + [i for i in range(len(reasons)) if i not in firsts])[:most])
    return [reasons[i] for i in chosen]


def _names(names: dict) -> str:
    if not names:
        return "-"
    parts = sorted(names.items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{name} ×{n}" for name, n in parts[:6])
    return shown + (", …" if len(parts) > 6 else "")


# ---------------------------------------------------------------- why a call compiled again
_STATIC = re.compile(r"at input path \[\d+\](?:\['(?P<name>[^']+)'\]|\[(?P<index>\d+)\]).*?"
                     r"now .*?Static\(val=(?P<now>.*?)\) and before .*?Static\(val=(?P<before>.*?)\)")
_TYPES = re.compile(r"\* at (?P<arg>[^,]+), now (?P<now>\S+) and before (?P<before>\S+?)(?:,|$)", re.M)
_NEW = re.compile(r"never seen function:\s*\n\s*(?P<name>\S+) id=(?P<id>\d+)")
_FOR = re.compile(r"for (?P<name>\S+) defined at")


def explain(records: list[dict]) -> list[Text]:
    """The calls that compiled again, each with why, from JAX's explanations (first compiles left out)."""
    out: list[Text] = []
    first: dict[str, tuple[object, str]] = {}  # a function's name: the call it was first seen at, its id then
    for record in records:
        text, call = str(record.get("text", "")), record.get("call") or 1
        new = _NEW.search(text)
        if new:
            name, fid = new["name"], new["id"]
            # the same function, made anew: JAX has never seen it though it saw one of that name at an earlier
            # call (the object it traced then would have been found again), or at this call with another id.
            # Not by the id alone: the new object may take the freed one's address, and its id with it
            if name in first and (first[name][0] != call or first[name][1] != fid):
                out.append(T("compile.why.new_function", call=call, name=name))
            first.setdefault(name, (call, fid))
            continue
        reason = _reason(text, call, record.get("params") or [])
        if reason is not None:
            out.append(reason)
    return out


def _reason(text: str, call: int, params: list[str]) -> Text | None:
    static = _STATIC.search(text)
    if static:
        index = int(static["index"]) if static["index"] else -1
        argument = static["name"] or (params[index] if 0 <= index < len(params) else f"#{index}")
        return T("compile.why.static", call=call, arg=argument, before=_value(static["before"]),
                 now=_value(static["now"]))
    types = _TYPES.search(text)
    if types:
        before, now = types["before"], types["now"]
        kind = "dtype" if before.split("[")[0] != now.split("[")[0] else \
            "weak_type" if "weak" in before + now else "shape"
        return T(f"compile.why.{kind}", call=call, arg=types["arg"].strip(), before=before, now=now)
    for_ = _FOR.search(text)  # a miss JAX explains otherwise: its own words
    detail = next((line.strip(" *") for line in text.splitlines()[1:] if line.strip().startswith("*")), "")
    if for_ or detail:
        return T("compile.why.other", call=call, detail=detail or text.splitlines()[-1].strip())
    return None


def _value(text: str) -> str:
    """A static value as a student reads it: floats to 4 significant digits."""
    try:
        return f"{float(text):.4g}" if "." in text or "e" in text.lower() else text
    except ValueError:
        return text
