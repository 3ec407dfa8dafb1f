"""Grading one submission: the unit of work.

:func:`grade` takes a path and options and returns a :class:`~grader.results.Report`;
it never raises for anything the student's code does. It reads the submission, starts
two hosts (the student's, sandboxed, and the trusted reference's), runs one job per
exercise on each side with the same hidden inputs, has :func:`grader.judge.judge`
turn the records into verdicts, and measures how long it all took. The run only
schedules and collects. Batch grading, a cluster worker or a notebook front end call
this same function.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import platform
import secrets
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from grader import chapters as chapter_folders, submission as submissions
from grader.chapter import Chapter, ExerciseSpec, UnknownExercise
from grader.checks import GraderError
from grader.i18n import T
from grader.judge import judge, unrunnable
from grader.preview import Records, RecordsError, mark_checked, release_records
from grader.results import ExerciseResult, Report, mark_selection
from grader.runner import sandbox as sandboxes
from grader.runner.hosts import HostProcess
from grader.runner.jobs import JobOutcome, JobSession, Limits, run_job

log = logging.getLogger("grader")


@dataclass
class GradeOptions:
    """How to grade one submission; every field has a default a student never needs to change."""

    #: the chapter's id; ``None``: told from the submission (its name, then its contents)
    chapter: str | None = None
    #: grade only these exercises (ids, ``ex03`` or ``3``); empty: all (a partial run otherwise)
    exercises: tuple[str, ...] = ()
    #: the hidden inputs' seed; ``None``: drawn fresh (the report records it)
    seed: int | None = None
    #: ``auto`` (the strongest available), ``bwrap`` or ``process``
    sandbox: str = "auto"
    #: per-job limits (CPU, memory, processes, file size, open files, disk)
    limits: Limits = field(default_factory=Limits)
    #: the whole submission's time limit, in seconds
    submission_timeout_s: float = 900.0
    #: caps every exercise's own time limit (seconds); ``None``: the chapter's limits
    exercise_timeout_s: float | None = None
    #: exercises graded at once (untimed ones); ``None``: up to 2, as many CPUs allow
    workers: int | None = None
    #: the reference solutions; ``None``: the chapter's ``solutions`` folder
    reference_dir: Path | None = None
    #: where scratch folders go; ``None``: the system's temporary folder
    scratch_root: Path | None = None
    #: reference outcomes shared between gradings with one seed (a batch); ``None``: this run's own
    reference_cache: "ReferenceCache | None" = None
    #: told what the run is doing, for a live display (called from grading threads)
    on_progress: Callable[["Progress"], None] | None = None
    #: the reference's records for a public seed (:class:`grader.preview.Records`): grade a
    #: preview with them instead of running the reference; ``None``: those of a course
    #: release's chapter when it has no solutions (:func:`release_records`), else none
    preview: "Records | None" = None


@dataclass
class Progress:
    """One step of a grading run, for a display: an exercise starts, moves on, or is done."""

    #: the exercise's id
    exercise: str
    #: ``running`` (its jobs are at work) or ``done`` (``result`` holds its verdict)
    state: str
    #: the student's job: one of :data:`grader.runner.jobs.PHASES`
    phase: str = "starting"
    #: the student's function being called, when ``phase`` is ``calling``
    function: str | None = None
    #: exercises graded so far
    done: int = 0
    #: how many the run grades
    total: int = 0
    #: the exercise's verdict, once ``state`` is ``done``
    result: ExerciseResult | None = None


class Interrupted(Exception):
    """Grading was interrupted (Ctrl-C); ``report`` holds the exercises graded before it,
    ``pending`` the ids of those it did not finish."""

    def __init__(self, report: Report, pending: list[str]):
        super().__init__("interrupted")
        self.report = report
        self.pending = pending


class ReferenceCache:
    """Reference outcomes by (exercise, seed, reference code): one reference run per batch.

    The reference is trusted and deterministic for a given seed, so every submission
    graded with the same seed and the same cache shares one run per exercise. Timed
    exercises never come from here: their timings must be measured in the same run.
    """

    def __init__(self, size: int = 512):
        self.size = size
        self._data: dict[tuple, JobOutcome] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(chapter: Chapter, ex: ExerciseSpec, seed: int, reference_dir: Path) -> tuple:
        return (chapter.id, ex.id, seed, str(reference_dir), tree_digest(reference_dir), tree_digest(chapter.folder))

    def get(self, key: tuple) -> JobOutcome | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: tuple, outcome: JobOutcome) -> None:
        with self._lock:
            if len(self._data) >= self.size:
                self._data.pop(next(iter(self._data)))
            self._data[key] = outcome


def tree_digest(folder: Path) -> str:
    """A fingerprint of a folder's Python and TOML files (names, sizes, times)."""
    digest = hashlib.sha256()
    for file in sorted(folder.glob("*")):
        if file.is_file() and file.suffix in (".py", ".toml"):
            stat = file.stat()
            digest.update(f"{file.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def new_seed() -> int:
    return secrets.randbelow(2**31 - 1) + 1


def grade(path: Path, options: GradeOptions | None = None) -> Report:
    """Grade the submission at ``path``.

    Raises :class:`~grader.submission.SubmissionError` when nothing can be graded, and
    :class:`Interrupted` (holding the report of what was graded) on Ctrl-C, after
    every process it started has been stopped.
    """
    options = options or GradeOptions()
    started = time.monotonic()
    started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    path = Path(path)
    chapter = submissions.resolve_chapter(path, options.chapter)
    try:
        selected = chapter.select(options.exercises)
    except UnknownExercise as exc:
        raise submissions.SubmissionError(T("error.unknown_exercise", item=exc.item, chapter=exc.chapter,
                                            known=exc.known)) from None
    try:
        records = options.preview or (None if options.reference_dir else release_records(chapter))
    except RecordsError as exc:
        raise submissions.SubmissionError(T("release.records_unusable", detail=str(exc))) from None
    if records is not None:  # a preview: the records answer for their public seed only
        if options.seed not in (None, records.seed):
            raise submissions.SubmissionError(T("release.seed_fixed", seed=options.seed, public=records.seed))
        options = replace(options, seed=records.seed, preview=records)
    seed = options.seed if options.seed is not None else new_seed()
    scratch = Path(tempfile.mkdtemp(prefix="grade-", dir=options.scratch_root))
    os.chmod(scratch, 0o755)
    try:
        sub = submissions.load(path, chapter, scratch / "submission")
        os.chmod(scratch / "submission", 0o755)
        for file in sub.module_dir.iterdir():
            os.chmod(file, 0o644)
        os.chmod(sub.module_dir, 0o755)
        run = _Run(chapter, selected, sub, seed, options, scratch)
        interrupted = False
        try:
            exercises = run.execute()
        except KeyboardInterrupt:
            exercises, interrupted = run.finished(), True
        report = Report(chapter=chapter.id, chapter_title=chapter.title, seed=seed, started_at=started_at,
                        duration_s=time.monotonic() - started, submission=sub.describe(),
                        environment=run.environment(), exercises=exercises,
                        integrity=sub.integrity_findings(chapter) + run.runtime_findings,
                        sandbox=run.plan.describe(), timings=run.timings, interrupted=interrupted,
                        preview=records is not None)
        mark_selection(report, [ex.id for ex in chapter.exercises])
        if interrupted:
            raise Interrupted(report, [ex.id for ex in selected if ex.id not in run.results])
        return report
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class Sides:
    """What a timing driver may use: new jobs of its exercise, on the student's side or the reference's.

    ``exercise`` is the :class:`~grader.chapter.ExerciseSpec`; :meth:`student` and
    :meth:`reference` return unstarted :class:`~grader.runner.jobs.JobSession` objects
    with the exercise's settings (synchronous CPU dispatch, import limit).
    """

    def __init__(self, run: "_Run", ex: ExerciseSpec, inputs: dict):
        self._run = run
        self.exercise = ex
        #: a preview's recorded reference outcome (then there is no reference process), else ``None``
        self.recorded: JobOutcome | None = run.recorded(ex, inputs) if run.records else None

    def student(self, timeout_s: float) -> JobSession:
        return self._run.session(self._run.student, self.exercise, timeout_s)

    def reference(self, timeout_s: float) -> JobSession:
        if self._run.reference is None:
            raise GraderError(f"{self.exercise.id}'s driver needs the reference's process, which a preview "
                              f"does not run (it has the reference's records only: Sides.recorded)")
        return self._run.session(self._run.reference, self.exercise, timeout_s)


class _Run:
    """The state of one grading run: its hosts, deadline and the results collected so far."""

    def __init__(self, chapter: Chapter, selected: list[ExerciseSpec], sub: submissions.Submission, seed: int,
                 options: GradeOptions, scratch: Path):
        self.chapter = chapter
        self.selected = selected
        self.sub = sub
        self.seed = seed
        self.options = options
        self.references = options.reference_cache or ReferenceCache()
        self.deadline = time.monotonic() + options.submission_timeout_s
        self.plan = sandboxes.plan(options.sandbox)
        self.uids = sandboxes.UidPool() if self.plan.uid_isolation else None
        self.timings: dict[str, Any] = {}
        self.envs: list[dict] = []
        self.runtime_findings: list[dict] = []
        self.results: dict[str, ExerciseResult] = {}
        self._lock = threading.Lock()
        #: a preview's reference records (no reference process then), else ``None``
        self.records: Records | None = options.preview
        reference_dir = options.reference_dir or chapter.solutions
        if self.records is None and not reference_dir.is_dir():
            raise submissions.SubmissionError(T("error.no_reference", chapter=chapter.id, path=str(reference_dir)))
        common = {"modules": chapter.child_modules, "limits": options.limits,
                  "chapter_folders": [] if chapter.search_folder == chapter_folders.BUILT_IN
                  else [chapter.search_folder]}
        self.student = HostProcess(side="student", module_dir=sub.module_dir, scratch=scratch / "student",
                                   plan=self.plan, uids=self.uids, **common)
        self.reference: HostProcess | None = None if self.records else HostProcess(
            side="reference", module_dir=reference_dir, scratch=scratch / "reference",
            plan=sandboxes.SandboxPlan("process", False), **common)

    # ------------------------------------------------------------------ running
    def execute(self) -> list[ExerciseResult]:
        """Grade every selected exercise; on Ctrl-C stop every process at once, then re-raise."""
        runnable = [ex for ex in self.selected if ex.id not in self.sub.problems]
        for ex in self.selected:
            if ex.id in self.sub.problems:
                self._done(ex, unrunnable(ex, self.sub.problems[ex.id]))
        if runnable:
            t0 = time.monotonic()
            self.student.listener = self._on_phase
            for host in self.hosts:
                host.start()
            pool = ThreadPoolExecutor(max_workers=self.options.workers or max(1, min(2, os.cpu_count() or 1)))
            try:
                plain = [ex for ex in runnable if not ex.timed]
                timed = [ex for ex in runnable if ex.timed]
                for ex, result in zip(plain, pool.map(self._grade_exercise, plain)):
                    self._done(ex, result)
                for ex in timed:  # alone on the machine
                    self._done(ex, self._grade_exercise(ex))
            except KeyboardInterrupt:
                self.cancel()
                raise
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
                for host in self.hosts:
                    host.stop()
            self.timings["exercises_s"] = round(time.monotonic() - t0, 3)
            self.timings["host_restarts"] = self.student.restarts
        return self.finished()

    def finished(self) -> list[ExerciseResult]:
        """The exercises graded so far, in chapter order."""
        return [self.results[ex.id] for ex in self.selected if ex.id in self.results]

    @property
    def hosts(self) -> list[HostProcess]:
        """The student's host, and the reference's unless this is a preview."""
        return [host for host in (self.student, self.reference) if host is not None]

    def cancel(self) -> None:
        """Stop grading now: no new job starts, every running one (and what it started) is killed."""
        for host in self.hosts:
            host.close()

    def _done(self, ex: ExerciseSpec, result: ExerciseResult) -> None:
        self.results[ex.id] = mark_checked(result) if self.records is not None else result
        self._progress(Progress(ex.id, "done", "ended", result=result))

    def _on_phase(self, session: JobSession) -> None:
        self._progress(Progress(session.exercise, "running", session.phase, session.calling))

    def _progress(self, event: Progress) -> None:
        if self.options.on_progress is not None:
            event.done, event.total = len(self.results), len(self.selected)
            try:
                self.options.on_progress(event)
            except Exception:  # noqa: BLE001 - a display never stops grading
                log.exception("progress display failed")

    def _budget(self, ex: ExerciseSpec) -> float:
        cap = self.options.exercise_timeout_s
        return min(min(ex.timeout_s, cap) if cap else ex.timeout_s, self.deadline - time.monotonic())

    def _grade_exercise(self, ex: ExerciseSpec) -> ExerciseResult:
        """One exercise, whatever happens: a grader bug here costs this exercise only."""
        try:
            return self._grade_exercise_unguarded(ex)
        except Exception as exc:  # noqa: BLE001 - logged in full; the student sees one line
            log.exception("grading %s failed", ex.id)
            return unrunnable(ex, T("check.grader_error", detail=f"{type(exc).__name__}: {exc}"))

    def _grade_exercise_unguarded(self, ex: ExerciseSpec) -> ExerciseResult:
        t0 = time.monotonic()
        self._progress(Progress(ex.id, "running"))
        inputs = ex.inputs(self.seed)
        budget = self._budget(ex)
        if budget <= 1:
            return unrunnable(ex, T("job.submission_timeout", seconds=self.options.submission_timeout_s), "timeout")
        if ex.driver is not None:
            student_out, reference_out = ex.driver(Sides(self, ex, inputs), inputs, budget)
            for outcome in (student_out, reference_out):
                if outcome is not None:
                    self._note_environment(outcome)
        else:
            student_out = self._job(self.student, ex, inputs, budget)
            reference_out = None
            if ex.needs_reference and student_out.attempted():
                reference_out = self._reference_job(ex, inputs)
        result, findings = judge(ex, student_out, reference_out, inputs=inputs, seed=self.seed,
                                 locate=self.sub.locate, preview=self.records is not None)
        result.duration_s = time.monotonic() - t0
        with self._lock:
            self.runtime_findings += findings
            self.timings[ex.id] = {"student_s": round(student_out.duration_s, 3),
                                   "reference_s": round(reference_out.duration_s, 3) if reference_out else None}
        return result

    def session(self, host: HostProcess, ex: ExerciseSpec, timeout_s: float) -> JobSession:
        """A new job of ``ex`` on ``host``, with the exercise's settings."""
        return job_session(host, ex, timeout_s)

    def recorded(self, ex: ExerciseSpec, inputs: dict) -> JobOutcome:
        """A preview's reference outcome for ``ex``; a failed one when no record fits these inputs."""
        outcome = self.records.outcome(ex.id, self.seed, inputs)
        if outcome is None:
            log.error("no reference record of %s for seed %s and these inputs", ex.id, self.seed)
            return JobOutcome(end="not_started", side="reference", detail={"records": "none for these inputs"})
        return outcome

    def _job(self, host: HostProcess, ex: ExerciseSpec, inputs: dict, timeout_s: float) -> JobOutcome:
        outcome = run_job(self.session(host, ex, timeout_s), inputs)
        self._note_environment(outcome)
        return outcome

    def _note_environment(self, outcome: JobOutcome) -> None:
        if outcome.env:
            with self._lock:
                self.envs.append({"side": outcome.side, **outcome.env})

    def _reference_job(self, ex: ExerciseSpec, inputs: dict) -> JobOutcome:
        if self.records is not None:
            return self.recorded(ex, inputs)
        key = ReferenceCache.key(self.chapter, ex, self.seed, self.reference.module_dir)
        cached = self.references.get(key)
        if cached is not None:
            return cached
        outcome = self._job(self.reference, ex, inputs, ex.timeout_s * 2)
        if outcome.end not in ("done", "cancelled"):  # the reference is trusted: a failure is transient or a bug
            log.warning("reference run of %s ended with %s; retrying once", ex.id, outcome.end)
            outcome = self._job(self.reference, ex, inputs, ex.timeout_s * 2)
        if outcome.end == "done":
            self.references.put(key, outcome)
        return outcome

    def environment(self) -> dict:
        """Where the grading ran: the reference's job's view first (the student's may be tampered with)."""
        env: dict = {}
        for candidate in sorted(self.envs, key=lambda e: e.get("side") != "reference"):
            env = {k: v for k, v in candidate.items() if k != "side"}
            break
        if not env:  # no job ran (every module missing or broken): what the grader's own install says
            env = {"python": platform.python_version(), "jax": _version("jax"), "jaxlib": _version("jaxlib"),
                   "backend": None, "device_kind": None}
        env["cpu_count"] = os.cpu_count()
        return env


def job_session(host: HostProcess, ex: ExerciseSpec, timeout_s: float) -> JobSession:
    """A new, unstarted job of ``ex`` on ``host``, with the exercise's settings (the import
    limit applies to the student's side only)."""
    return host.session(exercise=ex.id, module=ex.student_module, code=ex.code_name, functions=ex.functions,
                        timeout_s=timeout_s, options={"sync_cpu_dispatch": ex.sync_cpu_dispatch},
                        import_timeout_s=min(ex.import_timeout_s, timeout_s) if host.side == "student" else None)


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
