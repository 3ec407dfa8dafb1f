"""The reference's side, made once: its host (:func:`reference_host`) and the run of its jobs for a
chapter (:func:`reference_jobs`).

The reference is trusted: its host runs in the plain process sandbox, imports the
chapter's modules once (from the chapter's folders, :attr:`grader.chapter.Chapter.import_folders`)
and its jobs import the reference solutions. A grading starts one beside the student's
host, a batch worker keeps one for student after student (:mod:`grader.runner.warm`), and
the batch's shipped outcomes (:mod:`grader.batch.reference`) and a release's reference
records (:mod:`grader.preview`) run the reference's job of every exercise on one of
their own (:func:`reference_jobs`).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypeVar

from grader import store
from grader.runner import sandbox as sandboxes
from grader.runner.devices import DevicePlan
from grader.runner.host_handles import HostProcess, Template
from grader.runner.job_sessions import Limits

if TYPE_CHECKING:
    from grader.chapter import Chapter, ExerciseSpec

Ran = TypeVar("Ran")


def reference_host(chapter: Chapter, reference_dir: Path, scratch: Path, *, limits: Limits | None = None,
                   compile_cache: Path | None = None, device: DevicePlan | None = None,
                   template: Template | None = None) -> HostProcess:
    """A host (not started) for the reference's side of ``chapter``, importing from ``reference_dir``,
    its scratch under ``scratch``; its jobs write ``compile_cache`` (the reference's), if any; ``device``:
    where its jobs run (a grading's plan; ``None``: :func:`grader.runner.devices.default_plan`); ``template``:
    what forks it (the user's warm service's), else a process of its own."""
    return HostProcess(side="reference", module_dir=reference_dir, scratch=scratch / "reference",
                       plan=sandboxes.SandboxPlan("process", False), limits=limits or Limits(),
                       modules=chapter.child_modules, chapter_folders=chapter.import_folders,
                       compile_cache=compile_cache, device=device, template=template)


def reference_jobs(chapter: Chapter, exercises: list[ExerciseSpec], run: Callable[[HostProcess, ExerciseSpec], Ran],
                   *, reference_dir: Path, at_once: int, scratch_root: Path | None = None,
                   limits: Limits | None = None, compile_cache: Path | None = None,
                   prefix: str = "grade-reference-", warm_up: list[ExerciseSpec] = ()) -> dict[str, Ran]:
    """``run(host, ex)`` for each of ``exercises`` (the reference's job of each, run as its caller says) on a
    reference host of their own, ``at_once`` at a time and a timed exercise alone after them, as a
    grading runs them; what each gave, by exercise id. The host and its scratch are gone after.

    ``warm_up``: exercises run only for the programs their jobs leave in ``compile_cache``, started
    first and not waited for (a timing harness's job mostly sleeps in its instruments): this returns
    once ``exercises`` are done, and the host stops in a thread of its own when the warm-ups end."""
    scratch = Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_root))
    os.chmod(scratch, 0o700)  # the reference's alone (its jobs are the grader's uid)
    host = reference_host(chapter, reference_dir, scratch, limits=limits, compile_cache=compile_cache)
    pool = ThreadPoolExecutor(max_workers=max(1, at_once))

    def finish() -> None:
        pool.shutdown(wait=True, cancel_futures=True)
        host.stop()
        if host.compile_cache is not None:
            store.prune(host.compile_cache)
        shutil.rmtree(scratch, ignore_errors=True)

    warming: list = []
    try:
        host.start()
        warming = [pool.submit(run, host, ex) for ex in warm_up]
        untimed = [ex for ex in exercises if not ex.timed]
        ran = dict(zip([ex.id for ex in untimed], pool.map(lambda ex: run(host, ex), untimed)))
        timed = [ex for ex in exercises if ex.timed]
        if timed:  # alone on the machine: after the warm-ups too
            wait(warming)
        ran.update({ex.id: run(host, ex) for ex in timed})
    except BaseException:
        finish()
        raise
    if any(not future.done() for future in warming):
        threading.Thread(target=finish, name="reference-warm-up").start()  # joined at exit: not a daemon
    else:
        finish()
    return {ex.id: ran[ex.id] for ex in exercises}
