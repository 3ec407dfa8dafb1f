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

:class:`grader.batch.worker_process.WorkerProcess` is the other side: it starts the subprocess, feeds it, and
turns a crash, a hang or an interrupt into a student's result instead of an exception.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
from pathlib import Path

from grader.protocol import ToWorker, word_of

#: exit status of a worker stopped by Ctrl-C (its student is graded again on resume)
INTERRUPTED = 130


#: the most the worker's scratch folder in memory holds (every job's folder, its XLA dump, the
#: students' modules): a job that fills it meets a full disk, never the machine's memory
SCRATCH_BYTES = 2 << 30
#: the folder the batch names for a worker's scratch: the worker makes it (a batch that dies as it starts the worker
#: leaves nothing) and removes it as it ends; the batch removes it where the worker was killed first
SCRATCH_ENV = "GRADER_WORKER_SCRATCH"
#: the process id of the process that started the worker: gone by the time the worker asks to be stopped with it
#: (``PR_SET_PDEATHSIG``), it is stopped at once (:func:`_stop_with_parent`)
PARENT_ENV = "GRADER_WORKER_PARENT"
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
    folder = _scratch_folder(os.environ.get(SCRATCH_ENV))
    options = f"size={SCRATCH_BYTES},mode=0755".encode()
    if libc.mount(b"tmpfs", str(folder).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        folder.rmdir()
        return None
    return folder


def _scratch_folder(named: str | None) -> Path:
    """The folder the batch named, made here (never one that was there: another user's link or folder planted under
    that name is not mounted on), else one of the worker's own in the system's temporary folder."""
    if named:
        try:
            os.mkdir(named, 0o700)
            return Path(named)
        except OSError:
            pass
    return Path(tempfile.mkdtemp(prefix="grade-worker-"))


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


def _stop_with_parent() -> bool:
    """Be interrupted (as by Ctrl-C) if the process that started this one dies (Linux): a Dask worker killed
    mid-task leaves no grading running on. ``False`` where it has died already: the signal is asked for only once
    this process runs its own code, and a parent that died before then (a Dask worker stopped as its cluster
    closes, in the moment it started this one) sends none, while this worker waited for its slot of cores and
    started its hosts for nobody (seen: one still there minutes after its batch, holding a core's lock)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGINT), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    named = os.environ.get(PARENT_ENV, "")
    return not named.isdigit() or os.getppid() == int(named)


PR_SET_PDEATHSIG = 1


def main() -> int:
    """Grade the students given on standard input, one JSON line each, until it closes."""
    # a Ctrl-C (and the parent's death, below) interrupts it, though a local Dask worker that started it ignores
    # SIGINT (grader.batch.cluster_host), and Python keeps a signal ignored at its start ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # held until the try below can leave what it sets up: interrupted in the middle of its imports (the parent's
    # death, a Dask worker stopped as its cluster closes), it left the folder its scratch was to be mounted on
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    parent_alive = _stop_with_parent()
    from grader.grading import Interrupted

    scratch = private_scratch() if parent_alive else None
    state = _State(scratch)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # one that came meanwhile is raised here
        if not parent_alive:
            return INTERRUPTED
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
        _wind_up(state, scratch)
    return 0


def _wind_up(state: "_State", scratch: Path | None) -> None:
    """Stop the worker's hosts and leave its scratch, deaf to Ctrl-C meanwhile: a second one (the parent's death
    after the batch's Ctrl-C, the batch's own interrupt) raised in the middle cut this short, and the folder the
    scratch was mounted on stayed in the system's temporary folder, nobody left to remove it. Ignored, not
    blocked: a signal blocked in this thread alone is taken by another (a host's reader), and Python raises it
    here all the same. The batch kills a worker that takes too long (:meth:`WorkerProcess.close`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        state.close()
    finally:
        if scratch is not None:  # its tmpfs goes with this mount namespace; the empty folder under it stays
            _leave(scratch)
        elif os.environ.get(SCRATCH_ENV):  # named by the batch, and no tmpfs mounted on it
            with contextlib.suppress(OSError):
                os.rmdir(os.environ[SCRATCH_ENV])


def _leave(scratch: Path) -> None:
    """Unmount the worker's scratch (what its folder held goes with it) and remove the folder."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.umount2(str(scratch).encode(), 2)  # MNT_DETACH
    try:
        scratch.rmdir()
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
