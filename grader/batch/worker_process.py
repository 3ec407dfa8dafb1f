"""The batch's side of a batch worker (:mod:`grader.batch.worker`): :class:`WorkerProcess` starts the worker
subprocess, feeds it one student after another, and turns a crash, a hang or an interrupt into a student's result
instead of an exception; a worker that died or hung is replaced for the next student. :func:`dask_task` and
:func:`dask_warm` are the same on a Dask worker, one worker subprocess per thread that runs tasks.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.batch.worker import INTERRUPTED, PARENT_ENV, SCRATCH_ENV, failure
from grader.protocol import ToWorker, message


class WorkerProcess:
    """A worker subprocess that grades one student after another (see the module).

    ``slots``: how many gradings share this machine's cores (the worker takes one slot).
    Each :meth:`grade` returns a result, never raises; a worker that crashed, hung or was
    interrupted is gone afterwards, and the next :meth:`grade` starts a new one.
    """

    def __init__(self, slots: int | None = None):
        self.slots = slots
        self.proc: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        self._errors: list[str] = []
        self._sent: tuple | None = None
        self._lock = threading.Lock()
        self.interrupted = False
        #: closed for good (:meth:`close`): it starts no worker again
        self.closed = False
        self._scratch: Path | None = None

    def _start(self) -> subprocess.Popen:
        self._reaped()  # the worker before it (ended, or there would be no new one)
        env = {**os.environ, PARENT_ENV: str(os.getpid())}
        if os.geteuid() == 0:  # where its scratch is mounted (private_scratch): made by the worker, removed by _reaped
            self._scratch = Path(tempfile.gettempdir()) / f"grade-worker-{secrets.token_hex(6)}"
            env[SCRATCH_ENV] = str(self._scratch)
        proc = subprocess.Popen([sys.executable, "-m", "grader.batch.worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env)
        self._lines, self._errors = queue.Queue(), []
        threading.Thread(target=_read_lines, args=(proc.stdout, self._lines), daemon=True,
                         name="batch-worker-output").start()
        threading.Thread(target=_keep_tail, args=(proc.stderr, self._errors), daemon=True,
                         name="batch-worker-errors").start()
        self._sent = None
        return proc

    def warm(self, payload: dict) -> None:
        """Start the worker now, and its hosts for ``payload``'s chapter and sandbox (a task without a
        submission), while the batch does something else; :meth:`grade` finds them ready."""
        with self._lock:
            if self.closed:
                return
            if self.proc is None or self.proc.poll() is not None:
                self.proc = self._start()
            try:
                _send(self.proc, message(ToWorker.WARM, **{**payload, "slots": payload.get("slots", self.slots)}))
            except OSError:
                pass

    def grade(self, payload: dict, reference: dict | None, timeout_s: float = 3600.0) -> dict:
        """Grade one student; past ``timeout_s`` the worker and all it started are killed."""
        t0 = time.monotonic()
        with self._lock:
            if self.interrupted or self.closed:
                return failure("interrupted", "interrupted")
            if self.proc is None or self.proc.poll() is not None:
                self.proc = self._start()
            proc = self.proc
        try:
            shipped = ((reference or {}).get("digest"), (reference or {}).get("seed"))
            if self._sent != shipped:  # once per worker and class
                _send(proc, message(ToWorker.REFERENCE, reference=reference))
                self._sent = shipped
            _send(proc, message(ToWorker.GRADE, **{**payload, "slots": payload.get("slots", self.slots)}))
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            self._end(signal.SIGKILL)
            return {**failure("timeout", f"grading took more than {timeout_s:.0f} s and was stopped"),
                    "duration_s": time.monotonic() - t0}
        except OSError:  # the worker died before it read the student
            line = None
        if line is None:  # the worker ended
            code = self._end(None)
            if code == INTERRUPTED or self.interrupted:
                return {"ok": False, "status": "interrupted", "message": "interrupted"}
            return {**failure("crash", f"the grading process ended without a result ({self._last_error(code)})"),
                    "duration_s": time.monotonic() - t0}
        result = json.loads(line)
        result["duration_s"] = time.monotonic() - t0
        return result

    def interrupt(self) -> None:
        """Ask the worker to stop (Ctrl-C): it stops every process it started and exits."""
        self.interrupted = True
        proc = self.proc
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGINT)
            except (ProcessLookupError, PermissionError):
                pass

    def let_go(self) -> None:
        """Tell the worker to finish (it stops its hosts and exits), without waiting: :meth:`close` waits."""
        if self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def close(self) -> None:
        """Let the worker finish and exit (it stops its hosts); kill it if it does not. None is started again: a Dask
        worker closing (:func:`_close_dask_workers`) while its task thread starts one waits for it here, and closes
        it too."""
        with self._lock:
            self.closed = True
            proc, self.proc = self.proc, None
        if proc is None:  # none, or its start interrupted (a Ctrl-C inside Popen): the folder made for it goes
            self._reaped()
            return
        try:
            proc.stdin.close()
            proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            _kill_group(proc)
            proc.wait()
        self._reaped()

    def _end(self, how: int | None) -> int | None:
        proc, self.proc = self.proc, None
        if proc is None:
            self._reaped()
            return None
        if how is not None:
            _kill_group(proc)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            code = proc.wait()
        _kill_group(proc)  # what it started, if anything is left
        self._reaped()
        return code

    def _reaped(self) -> None:
        """The worker is gone: remove the folder its scratch was mounted on (its tmpfs went with its mount
        namespace; a worker that was killed left the empty folder in the system's temporary folder)."""
        scratch, self._scratch = self._scratch, None
        if scratch is not None:
            with contextlib.suppress(OSError):
                scratch.rmdir()

    def _last_error(self, code: int | None) -> str:
        time.sleep(0.05)  # its last words may still be on their way
        tail = [line for line in self._errors if line.strip()][-1:]
        return (tail[0].strip() if tail else f"exit status {code}")[:300]


def _send(proc: subprocess.Popen, order: dict) -> None:
    proc.stdin.write(json.dumps(order, ensure_ascii=False).encode() + b"\n")
    proc.stdin.flush()


def _read_lines(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line.decode("utf-8"))
    lines.put(None)


def _keep_tail(stream, lines: list[str], keep: int = 50) -> None:
    """What the worker writes on standard error, its last ``keep`` lines kept (to say why it died)."""
    for line in stream:
        lines.append(line.decode("utf-8", errors="replace"))
        del lines[:-keep]


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


#: a Dask worker's grading processes, one per thread that runs tasks (kept between its tasks)
_DASK_WORKERS: dict[int, WorkerProcess] = {}


def dask_task(payload: dict, reference: dict | None, host_slots: dict[str, int], timeout_s: float) -> dict:
    """One submission as a Dask task, graded by this thread's worker subprocess (started on its
    first task, or by :func:`dask_warm`, kept for the next), with as many core slots as this machine
    runs tasks at once (``host_slots``, by host, from the scheduler's view)."""
    process, slots = _dask_worker_process(host_slots)
    return process.grade({**payload, "slots": slots}, reference, timeout_s=timeout_s)


def dask_warm(payload: dict, host_slots: dict[str, int]) -> int:
    """Start this thread's worker subprocess and its hosts for ``payload``'s chapter and sandbox (a
    task without a submission), while the batch computes the reference; returns at once, the hosts
    still starting. Its process id, for the batch's tests."""
    process, slots = _dask_worker_process(host_slots)
    process.warm({**payload, "slots": slots})
    return process.proc.pid if process.proc is not None else 0


def _dask_worker_process(host_slots: dict[str, int]) -> tuple[WorkerProcess, int]:
    from urllib.parse import urlparse

    from distributed import get_worker

    worker = get_worker()
    host = urlparse(worker.address).hostname or ""
    slots = host_slots.get(host) or worker.state.nthreads
    ident = threading.get_ident()
    if ident not in _DASK_WORKERS:
        if not _DASK_WORKERS:
            atexit.register(_close_dask_workers)
        _DASK_WORKERS[ident] = WorkerProcess(slots)
    return _DASK_WORKERS[ident], slots


def _close_dask_workers() -> None:
    for process in list(_DASK_WORKERS.values()):
        process.close()
    _DASK_WORKERS.clear()

