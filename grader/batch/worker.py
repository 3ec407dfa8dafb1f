"""Grading the students of a batch in a process of their own: ``python -m grader.batch.worker``.

A batch (on this machine, or a Dask worker on another) keeps a worker subprocess per
grading slot and gives it one student after another: Dask's worker processes are
daemonic and cannot have children of their own through :mod:`multiprocessing`, and a
process of its own keeps the batch apart from the gradings. The worker reads JSON
lines on standard input, each saying one of :class:`grader.protocol.ToWorker`'s words: ``REFERENCE``
(the class's reference outcomes, shipped as data, once) and ``GRADE`` (a packed submission, the batch's
options and seed), and writes a JSON line on standard output for each student: the
files :func:`grader.report.render.write_reports` wrote for them (``report.json`` and
``report.md``, exactly what ``grade`` writes for that submission and seed), or why
there are none.

It keeps what one student's grading leaves ready for the next: its slot of cores
(:mod:`grader.batch.cpus`, taken once), the chapter, and its hosts
(:class:`~grader.runner.warm.WarmHosts`: the reference's, and a template that forks
each student's host with JAX already imported, fresh for each student).

:class:`WorkerProcess` is the other side: it starts the subprocess, feeds it, and turns a
crash, a hang or an interrupt into a student's result instead of an exception; a
worker that died or hung is replaced for the next student.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.protocol import ToWorker, message, word_of

#: exit status of a worker stopped by Ctrl-C (its student is graded again on resume)
INTERRUPTED = 130


#: the most the worker's scratch folder in memory holds (every job's folder, its XLA dump, the
#: students' modules): a job that fills it meets a full disk, never the machine's memory
SCRATCH_BYTES = 2 << 30
#: the folder the batch made for a worker's scratch, removed by the batch once the worker ends however it ended
SCRATCH_ENV = "GRADER_WORKER_SCRATCH"
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000


def private_scratch() -> Path | None:
    """A scratch folder of this worker's own, in memory: a tmpfs of :data:`SCRATCH_BYTES`, mounted
    in a mount namespace of the worker's (so nobody else sees it, and it is gone with the worker
    and everything it started, however they end). Root only; ``None`` elsewhere (the system's
    temporary folder is used then).

    A grading writes thousands of small files (each job's folder, and XLA's record of every
    program it compiles, which the grader counts): on a disk, creating and deleting them cost
    about a sixth of a batch's time.
    """
    import ctypes

    if os.geteuid() != 0:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    if libc.unshare(CLONE_NEWNS) != 0 or libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return None
    given = os.environ.get(SCRATCH_ENV)  # made by the batch, which removes it once the worker is gone
    folder = Path(given) if given and os.path.isdir(given) else Path(tempfile.mkdtemp(prefix="grade-worker-"))
    options = f"size={SCRATCH_BYTES},mode=0755".encode()
    if libc.mount(b"tmpfs", str(folder).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        folder.rmdir()
        return None
    return folder


class _State:
    """What a worker keeps from one student to the next."""

    def __init__(self, scratch: Path | None = None) -> None:
        #: where its gradings' scratch folders go (its private one in memory, when it has one)
        self.scratch = scratch
        self.slot = None
        self.slots_asked: int | None = None
        self.shipped: dict | None = None
        self.hosts = None
        self.references: dict[tuple, tuple] = {}

    def close(self) -> None:
        if self.hosts is not None:
            self.hosts.close()
            self.hosts = None

    def prepare(self, payload: dict):
        """Its slot of cores (taken once) and hosts for the chapter and sandbox of ``payload``, started;
        returns the chapter."""
        from grader.batch import cpus
        from grader.chapter import load_chapter
        from grader.runner.warm import WarmHosts

        if payload.get("slots") and self.slot is None and self.slots_asked is None:
            self.slots_asked = payload["slots"]
            self.slot = cpus.acquire(payload["slots"])
            if self.slot is not None:
                self.slot.pin()
        chapter = load_chapter(payload["chapter"])
        sandbox = payload["options"]["sandbox"]
        if self.hosts is not None and not self.hosts.fits(chapter, sandbox, None):
            self.close()
        if self.hosts is None:
            self.hosts = WarmHosts(chapter, sandbox=sandbox, scratch_root=self.scratch)
        return chapter


def grade_payload(payload: dict, state: _State | None = None) -> dict:
    """Grade the packed submission of ``payload``; the result object the batch reads."""
    from grader.batch import roster
    from grader.batch.reference import seed_cache
    from grader.grading import GradeOptions, Machinery, grade
    from grader.i18n import T
    from grader.report.render import write_reports
    from grader.runner import sandbox as sandboxes
    from grader.runner.job_sessions import Limits
    from grader.submission import SubmissionError

    state = state or _State()
    chapter = state.prepare(payload)
    lang = payload["lang"]
    words = lambda text: chapter.catalog.render(text, lang)  # noqa: E731
    settings = payload["options"]
    try:
        plan = sandboxes.plan(settings["sandbox"])
    except RuntimeError as exc:
        return failure("sandbox", str(exc))
    if not (plan.kind == "bwrap" and plan.uid_isolation) and not settings.get("allow_weak_sandbox"):
        return failure("sandbox", words(T("batch.error.weak_sandbox_here", sandbox=_sandbox_word(plan.describe()))))
    shipped = payload.get("reference", state.shipped)
    key = (payload["seed"], (shipped or {}).get("digest"))
    if key not in state.references:
        state.references = {key: seed_cache(shipped, chapter, payload["seed"], None)}
    cache, used = state.references[key]
    slot = state.slot
    options = GradeOptions(chapter=chapter.id, exercises=tuple(payload["exercises"]), seed=payload["seed"],
                           sandbox=settings["sandbox"], allow_weak_sandbox=bool(settings.get("allow_weak_sandbox")),
                           submission_timeout_s=settings["timeout_s"],
                           exercise_timeout_s=settings.get("exercise_timeout_s"),
                           limits=Limits(memory_bytes=int(settings["memory_mb"]) << 20))
    machinery = Machinery(reference_cache=cache, at_once=len(slot.cores) + 1 if slot is not None else None,
                          hosts=state.hosts, scratch_root=state.scratch, programs=bool(settings.get("similarity")))
    with tempfile.TemporaryDirectory(prefix="grade-batch-", dir=state.scratch) as tmp:
        path = roster.unpack(payload["submission"], payload["name"], Path(tmp) / "in")
        try:
            report = grade(path, options, machinery)
        except SubmissionError as exc:
            return failure("unreadable", words(exc.text).replace(str(path), payload["display"]))
        report.submission = {**report.submission, "path": payload["display"]}
        written = write_reports(report, chapter.catalog, lang, Path(tmp) / "out")
        files = {p.name: p.read_text(encoding="utf-8") for p in written.parent.iterdir() if not p.name.startswith(".")}
    return {"ok": True, "files": files, "report": written.name, "cpus": slot.cores if slot else None,
            "reference": "shipped" if used else "own", "programs": report.programs}


def failure(status: str, message: str) -> dict:
    """A result without a report: ``status`` is the gradebook's (``unreadable``, ``crash``, ...)."""
    return {"ok": False, "status": status, "message": message}


def _sandbox_word(described: dict) -> str:
    return described.get("kind", "?") + ("+uid" if described.get("uid_isolation") else "")


def _stop_with_parent() -> None:
    """Be interrupted (as by Ctrl-C) if the process that started this one dies (Linux):
    a Dask worker killed mid-task leaves no grading running on."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGINT), 0, 0, 0)
    except (OSError, AttributeError):
        pass


PR_SET_PDEATHSIG = 1


def main() -> int:
    """Grade the students given on standard input, one JSON line each, until it closes."""
    # a Ctrl-C (and the parent's death, below) interrupts it, though a local Dask worker that started it ignores
    # SIGINT (grader.batch.cluster_host), and Python keeps a signal ignored at its start ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # held until the try below can leave what it sets up: interrupted in the middle of its imports (the parent's
    # death, a Dask worker stopped as its cluster closes), it left the folder its scratch was to be mounted on
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    _stop_with_parent()
    from grader.grading import Interrupted

    scratch = private_scratch()
    state = _State(scratch)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # one that came meanwhile is raised here
        for line in sys.stdin:
            order = json.loads(line)
            word = word_of(order, ToWorker)  # a word it does not know ends the worker at once (ProtocolError)
            if word is ToWorker.REFERENCE:
                state.shipped = order.get("reference")
                continue
            if word is ToWorker.WARM:  # hosts started while the batch runs the reference
                state.prepare(order)
                state.hosts.start()
                continue
            result = grade_payload(order, state)
            sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
            sys.stdout.flush()
    except (Interrupted, KeyboardInterrupt):  # every process it started is already gone
        return INTERRUPTED
    finally:
        state.close()
        if scratch is not None:  # its tmpfs goes with this mount namespace; the empty folder under it stays
            _leave(scratch)
        elif os.environ.get(SCRATCH_ENV):  # the batch made it, and no tmpfs could be mounted on it
            with contextlib.suppress(OSError):
                os.rmdir(os.environ[SCRATCH_ENV])
    return 0


def _leave(scratch: Path) -> None:
    """Unmount the worker's scratch (what its folder held goes with it) and remove the folder."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.umount2(str(scratch).encode(), 2)  # MNT_DETACH
    try:
        scratch.rmdir()
    except OSError:
        pass


# ------------------------------------------------------------------ the batch's side
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
        self._scratch: Path | None = None

    def _start(self) -> subprocess.Popen:
        self._reaped()  # the worker before it (ended, or there would be no new one)
        env = dict(os.environ)
        if os.geteuid() == 0:  # where its scratch is mounted (private_scratch): removed by _reaped
            self._scratch = Path(tempfile.mkdtemp(prefix="grade-worker-"))
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
            if self.interrupted:
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
        """Let the worker finish and exit (it stops its hosts); kill it if it does not."""
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


if __name__ == "__main__":
    sys.exit(main())
