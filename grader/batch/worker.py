"""Grading one student of a batch in a process of its own: ``python -m grader.batch.worker``.

The batch (on this machine, or a Dask worker on another) starts this module as a
subprocess for each submission: Dask's worker processes are daemonic and cannot have
children of their own through :mod:`multiprocessing`, and a process per student
keeps one student's grading apart from the next. It reads one JSON object on
standard input (the packed submission, the batch's options and seed, the reference's
outcomes shipped as data) and writes one on standard output: the files
:func:`grader.report.render.write_reports` wrote for that student (``report.json`` and
``report.md``, exactly what ``grade`` writes for that submission and seed), or why
there are none. Before it starts anything it takes a slot of cores of its own
(:mod:`grader.batch.cpus`).

:func:`run_worker` is the other side: it starts the subprocess, feeds it, and turns a
crash, a hang or an interrupt into a result instead of an exception.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

#: exit status of a worker stopped by Ctrl-C (its student is graded again on resume)
INTERRUPTED = 130


def grade_payload(payload: dict) -> dict:
    """Grade the packed submission of ``payload``; the result object the batch reads."""
    from grader.batch import cpus, roster
    from grader.batch.reference import seed_cache
    from grader.chapter import load_chapter
    from grader.grading import GradeOptions, grade
    from grader.i18n import T
    from grader.report.render import write_reports
    from grader.runner import sandbox as sandboxes
    from grader.runner.jobs import Limits
    from grader.submission import SubmissionError

    slot = cpus.acquire(payload["slots"]) if payload.get("slots") else None
    if slot is not None:
        slot.pin()
    chapter = load_chapter(payload["chapter"])
    lang = payload["lang"]
    words = lambda text: chapter.catalog.render(text, lang)  # noqa: E731
    settings = payload["options"]
    try:
        plan = sandboxes.plan(settings["sandbox"])
    except RuntimeError as exc:
        return failure("sandbox", str(exc))
    if not (plan.kind == "bwrap" and plan.uid_isolation) and not settings.get("allow_weak_sandbox"):
        return failure("sandbox", words(T("batch.error.weak_sandbox_here", sandbox=_sandbox_word(plan.describe()))))
    cache, shipped = seed_cache(payload.get("reference"), chapter, payload["seed"], None)
    options = GradeOptions(chapter=chapter.id, exercises=tuple(payload["exercises"]), seed=payload["seed"],
                           sandbox=settings["sandbox"], submission_timeout_s=settings["timeout_s"],
                           exercise_timeout_s=settings.get("exercise_timeout_s"),
                           limits=Limits(memory_bytes=int(settings["memory_mb"]) << 20), reference_cache=cache,
                           workers=len(slot.cores) if slot is not None else None)
    with tempfile.TemporaryDirectory(prefix="grade-batch-") as tmp:
        path = roster.unpack(payload["submission"], payload["name"], Path(tmp) / "in")
        try:
            report = grade(path, options)
        except SubmissionError as exc:
            return failure("unreadable", words(exc.text).replace(str(path), payload["display"]))
        report.submission = {**report.submission, "path": payload["display"]}
        written = write_reports(report, chapter.catalog, lang, Path(tmp) / "out")
        files = {p.name: p.read_text(encoding="utf-8") for p in written.parent.iterdir() if not p.name.startswith(".")}
    return {"ok": True, "files": files, "report": written.name, "cpus": slot.cores if slot else None,
            "reference": "shipped" if shipped else "own"}


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
    _stop_with_parent()
    payload = json.loads(sys.stdin.buffer.read())
    from grader.grading import Interrupted

    try:
        result = grade_payload(payload)
    except (Interrupted, KeyboardInterrupt):  # every process it started is already gone
        return INTERRUPTED
    sys.stdout.write(json.dumps(result, ensure_ascii=False))
    sys.stdout.flush()
    return 0


# ------------------------------------------------------------------ the batch's side
def run_worker(payload: dict, reference: dict | None = None, *, timeout_s: float = 3600.0,
               started: Callable[[subprocess.Popen], None] | None = None) -> dict:
    """Grade ``payload`` in a worker subprocess; always a result, never an exception.

    ``reference`` is the class's shipped reference (it travels beside the payload, so a
    Dask cluster can hold one copy per worker); ``started`` is told the process (to
    interrupt it). Past ``timeout_s`` the worker and all it started are killed.
    """
    proc = subprocess.Popen([sys.executable, "-m", "grader.batch.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    if started is not None:
        started(proc)
    t0 = time.monotonic()
    data = json.dumps({**payload, "reference": reference}).encode()
    try:
        out, err = proc.communicate(data, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        return {**failure("timeout", f"grading took more than {timeout_s:.0f} s and was stopped"),
                "duration_s": time.monotonic() - t0}
    if proc.returncode == INTERRUPTED:
        return {"ok": False, "status": "interrupted", "message": "interrupted"}
    try:
        result = json.loads(out.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        tail = err.decode("utf-8", errors="replace").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        result = failure("crash", f"the grading process ended without a result ({tail[0][:300]})")
    result["duration_s"] = time.monotonic() - t0
    return result


def interrupt(proc: subprocess.Popen) -> None:
    """Ask a worker to stop (Ctrl-C): it stops every process it started and exits."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def dask_task(payload: dict, reference: dict | None, host_slots: dict[str, int], timeout_s: float) -> dict:
    """One submission as a Dask task: a worker subprocess, with as many core slots as this
    machine runs tasks at once (``host_slots``, by host, from the scheduler's view)."""
    from urllib.parse import urlparse

    from distributed import get_worker

    worker = get_worker()
    host = urlparse(worker.address).hostname or ""
    slots = host_slots.get(host) or worker.state.nthreads
    return run_worker({**payload, "slots": slots}, reference, timeout_s=timeout_s)


if __name__ == "__main__":
    sys.exit(main())
