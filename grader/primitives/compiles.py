"""Compile counting: backend compiles around the grader's own calls.

In the child, :data:`COUNTER` listens to JAX's monitoring event for every backend
compile (``/jax/core/compile/backend_compile_duration``), so compiles done by any
helper the student's function calls are counted too, eager ``jnp`` operations
included. Probes open a window around their calls after building and placing the
inputs; the window records the count and the names of what compiled.

``jitted._cache_size()`` is not used: it counts dispatch entries, and a NumPy input
or a weak-typed scalar adds entries without compiling.
"""
from __future__ import annotations

import collections
import contextlib
import threading
from typing import Iterator

from grader.checks import Fail
from grader.i18n import T

BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class _Window:
    def __init__(self) -> None:
        self.names: collections.Counter[str] = collections.Counter()

    def summary(self) -> dict:
        return {"count": sum(self.names.values()), "names": dict(self.names)}


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

        jax.monitoring.register_event_duration_secs_listener(self._on_event)
        self.installed = True

    def _on_event(self, name: str, _duration: float, **kwargs: object) -> None:
        if name != BACKEND_COMPILE_EVENT:
            return
        label = str(kwargs.get("fun_name", "?"))
        with self._lock:
            self.total += 1
            for window in self._windows:
                window.names[label] += 1

    @contextlib.contextmanager
    def window(self) -> Iterator[_Window]:
        self.install()
        window = _Window()
        with self._lock:
            self._windows.append(window)
        try:
            yield window
        finally:
            with self._lock:
                self._windows.remove(window)


COUNTER = CompileCounter()


# ---------------------------------------------------------------- grader side
def count(observation: dict) -> int:
    value = observation.get("count")
    if type(value) is not int or value < 0:
        raise Fail(T("compile.implausible", value=repr(value)))
    return value


def expect(observation: dict, *, what: str, exactly: int | None = None, at_most: int | None = None,
           reason: object = None) -> dict:
    """Judge one window: the count must equal ``exactly`` or stay within ``at_most``."""
    seen = count(observation)
    names = observation.get("names", {})
    measured = {"compiles": seen, "compiled": names}
    if exactly is not None:
        measured["expected"] = exactly
        if seen != exactly:
            raise Fail(T("compile.exactly", what=what, expected=exactly, seen=seen,
                         names=_names(names), reason=reason or ""), measured)
    if at_most is not None:
        measured["at_most"] = at_most
        if seen > at_most:
            raise Fail(T("compile.at_most", what=what, limit=at_most, seen=seen,
                         names=_names(names), reason=reason or ""), measured)
    return measured


def _names(names: dict) -> str:
    if not names:
        return "-"
    parts = sorted(names.items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{name} ×{n}" for name, n in parts[:6])
    return shown + (", …" if len(parts) > 6 else "")
