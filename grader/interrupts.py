"""What a Ctrl-C leaves behind in this process, and how the ``grade`` command ends after one.

A ``KeyboardInterrupt`` is raised in the main thread between two bytecodes, wherever it was. Two places
where it lands leave CPython's own state wrong, and the command then hangs, or ends with another status
than the 130 it says:

* **In the middle of an import.** ``importlib._bootstrap`` (CPython 3.11, ``Lib/importlib/_bootstrap.py``)
  takes the global import lock in ``_get_module_lock`` (``_imp.acquire_lock()``, then ``try:``) and a
  module's lock in ``_ModuleLockManager.__enter__`` (``self._lock.acquire()``); 3.11's interpreter looks for
  a pending signal as a call to a C function returns (``CHECK_EVAL_BREAKER`` after ``CALL``), before the
  ``try`` that would release it. Raised there, the interrupt leaves the lock held by the main thread. The
  main thread may go on importing (the global lock is re-entrant), but a grading thread that imports
  anything (``numpy.random``, reached lazily by ``numpy.__getattr__``) waits for it forever, and the main
  thread, joining the grading's threads, with it: seen as a ``grade`` still running 20 s after Ctrl-C.
  :func:`release_import_locks` gives back what the main thread holds outside any import.
* **Inside ``exec`` of a string.** ``dataclasses._create_fn`` builds each ``__init__`` with
  ``exec(txt, ...)``; ``PyRun_StringFlags`` runs it through ``run_eval_code_obj`` (``Python/pythonrun.c``),
  which sets ``_Py_UnhandledKeyboardInterrupt`` when the code it ran ends with a ``KeyboardInterrupt``, and
  nothing clears it when the caller handles the interrupt. After ``python -m grader`` returns,
  ``Py_RunMain`` (``Modules/main.c``) sees the flag and calls ``exit_sigint``: SIGINT's default action,
  status -2 instead of 130 (one Ctrl-C in 60 at 0.1 to 0.6 s into a grading, while its modules import).
  Each ``run_eval_code_obj`` sets the flag to 0 as it begins: :func:`interrupted_exit` runs one.

Worse, an interrupt raised in a weakref callback (``_get_module_lock``'s ``cb``, which takes the import
lock too) is printed as "Exception ignored" and lost: the lock stays held, no ``KeyboardInterrupt`` reaches
the grading, which waits for its threads for good (seen in ``test_ctrl_c`` at 0.3 s). So the command's
handler, :func:`on_sigint`, raises the interrupt only where it cannot land in the import machinery: caught
inside ``importlib._bootstrap``'s code (an import under way in the main thread, its locks' callbacks), it is
delivered again 20 ms later, for at most :data:`DEFER_AT_MOST_S`; :func:`release_import_locks` and
:func:`interrupted_exit` stay as the net beneath it.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from types import FrameType

#: the ``grade`` command's status after Ctrl-C (the shell's 128 + SIGINT)
EXIT_INTERRUPTED = 130

#: how long an interrupt caught inside the import machinery waits for it to be left (an import of the
#: grader's own takes milliseconds; one stuck for good is interrupted where it is after this)
DEFER_AT_MOST_S = 5.0

#: the names of a grading's threads begin so (:func:`grader.scheduling.run_all`'s pools)
GRADING_THREADS = "grading-"

_deferred_since: list[float] = []


def grading_threads() -> list[threading.Thread]:
    """The grading's threads still running in this process."""
    return [t for t in threading.enumerate() if t.name.startswith(GRADING_THREADS) and t.is_alive()]


def _in_the_import_machinery(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def _starting_a_process(frame: FrameType | None) -> bool:
    """Inside ``subprocess.Popen``'s constructor: raised there after its fork, the interrupt leaves a process
    running that whoever started it never learns of (no ``Popen`` object: nobody waits for it, kills it or removes
    what was made for it; seen as a batch worker's scratch folder left in ``/tmp``)."""
    import subprocess

    while frame is not None:
        if frame.f_code.co_filename == subprocess.__file__ and frame.f_code.co_name in ("__init__", "_execute_child"):
            return True
        frame = frame.f_back
    return False


def on_sigint(signum: int, frame: FrameType | None) -> None:
    """SIGINT's handler for the grader's processes: ``KeyboardInterrupt``, as Python's own, but never inside
    ``importlib._bootstrap``'s code, where it would leave an import lock held or be lost (see the module), nor
    inside ``subprocess.Popen``'s constructor (:func:`_starting_a_process`): there it comes again 20 ms later,
    until the main thread has left it (or :data:`DEFER_AT_MOST_S`)."""
    if _in_the_import_machinery(frame) or _starting_a_process(frame):
        now = time.monotonic()
        if not _deferred_since:
            _deferred_since.append(now)
        if now - _deferred_since[0] < DEFER_AT_MOST_S:
            # a signal, not _thread.interrupt_main: a signal wakes the main thread from a wait (a lock, a sleep)
            timer = threading.Timer(0.02, signal.pthread_kill, (threading.main_thread().ident, signum))
            timer.daemon = True
            timer.start()
            return
    _deferred_since.clear()
    raise KeyboardInterrupt


def release_import_locks() -> int:
    """Give back the import locks that this thread holds outside any import (left by an interrupt raised
    in ``importlib._bootstrap`` between taking a lock and the ``try`` that releases it; see the module);
    return how many it gave back. Nothing is released while an import is under way in this thread (its
    locks are its own)."""
    if _in_the_import_machinery(sys._getframe()):
        return 0
    import _imp

    released = 0
    while _imp.lock_held():
        try:
            _imp.release_lock()  # RuntimeError: another thread holds it, as it may
        except RuntimeError:
            break
        released += 1
    bootstrap = sys.modules.get("importlib._bootstrap")
    me = threading.get_ident()
    for ref in list(getattr(bootstrap, "_module_locks", {}).values()):
        lock = ref()
        for _ in range(64):
            if lock is None or getattr(lock, "owner", None) != me:
                break
            try:
                lock.release()
            except RuntimeError:
                break
            released += 1
    return released


def join_within(threads: list[threading.Thread], seconds: float) -> list[threading.Thread]:
    """Wait up to ``seconds`` in all for ``threads`` to end; those still running after it."""
    end = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    return [thread for thread in threads if thread.is_alive()]


def interrupted_exit(code: int = EXIT_INTERRUPTED, *, end_process: bool = True, wait_s: float = 2.0) -> int:
    """End the ``grade`` command after Ctrl-C, with status ``code`` (its report, where there is one, written).
    A thread of the grading's (:func:`grading_threads`) that still runs
    ``wait_s`` later is stuck, and Python would wait for it before it exits, for ever: then, where
    ``end_process`` (the command's own process, not a program that calls its ``main``), the process ends
    here, its output flushed. Otherwise CPython's flag for an interrupt it saw go unhandled is cleared (see
    the module) and ``code`` is returned."""
    if join_within(grading_threads(), wait_s) and end_process:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    exec("pass")  # noqa: S102 - run_eval_code_obj clears _Py_UnhandledKeyboardInterrupt as it begins
    return code
