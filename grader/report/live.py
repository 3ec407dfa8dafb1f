"""What is being graded now: one status line on a terminal, redrawn while grading runs.

A student who waits should see why: which exercise is graded, what its process is
doing (starting, importing the module, calling one of their functions) and for how
long. :class:`LiveStatus` is given to the grading run as ``on_progress``; it draws
only on a terminal, and erases its line when grading ends, so the report that
follows starts on a clean line.
"""
from __future__ import annotations

import threading
import time
from typing import TextIO

from grader.i18n import Catalog, T


class LiveStatus:
    """A status line on ``stream`` (a terminal), redrawn every ``interval`` seconds."""

    def __init__(self, stream: TextIO, catalog: Catalog, lang: str, *, interval: float = 0.25, width: int = 100):
        self.stream = stream
        self.catalog = catalog
        self.lang = lang
        self.interval = interval
        self.width = width
        self._active: dict[str, tuple[str, str | None, float]] = {}  # exercise -> (phase, function, since)
        self._done = 0
        self._total = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False

    # ------------------------------------------------------------- events
    def __call__(self, event) -> None:
        """Take one :class:`grader.grading.Progress` event (from any grading thread)."""
        with self._lock:
            self._done, self._total = event.done, event.total
            if event.state == "done":
                self._active.pop(event.exercise, None)
                return
            phase, function, since = self._active.get(event.exercise, ("starting", None, time.monotonic()))
            if event.phase != "ended":
                self._active[event.exercise] = (event.phase, event.function, since)

    # ------------------------------------------------------------- drawing
    def line(self, now: float | None = None) -> str:
        """The status line as it reads now."""
        now = time.monotonic() if now is None else now
        words = lambda text: self.catalog.render(text, self.lang)  # noqa: E731
        with self._lock:
            active = sorted(self._active.items())
            done, total = self._done, self._total
        text = ""
        for short in (False, True):  # the short form (ex03, no "(…)") when the full one does not fit
            parts = []
            for exercise, (phase, function, since) in active:
                doing = words(T(f"ui.live.{phase}", function=function or "?", file=f"{exercise}.py"))
                name = exercise.split("_", 1)[0] if short else f"{exercise}:"
                parts.append(f"{name} {doing} {now - since:.0f}s" if short else f"{name} {doing} ({now - since:.0f} s)")
            text = words(T("ui.live.line", now=" | ".join(parts) or "…", done=done, total=total))
            if len(text) <= self.width:
                return text
        return text[: self.width - 1] + "…"

    def _draw(self) -> None:
        self.stream.write("\r\x1b[2K" + self.line())
        self.stream.flush()
        self._drawn = True

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._draw()
            except (OSError, ValueError):  # the terminal went away
                return

    def __enter__(self) -> "LiveStatus":
        self._thread = threading.Thread(target=self._loop, name="live-status", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
        if self._drawn:
            try:
                self.stream.write("\r\x1b[2K")
                self.stream.flush()
            except (OSError, ValueError):
                pass
