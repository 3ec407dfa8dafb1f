"""Grading one submission: the unit of work.

:func:`grade` takes a path and options and returns a :class:`~grader.results.Report`;
it never raises for anything the student's code does. It reads the submission, starts
two hosts (the student's, sandboxed, and the trusted reference's), runs one job per
exercise on each side with the same hidden inputs, judges the records with the
chapter's checks, and measures how long it all took. Batch grading, a cluster
worker or a notebook front end call this same function.
"""
from __future__ import annotations

import datetime as dt
import logging
import os
import platform
import secrets
import shutil
import signal
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from grader import integrity, submission as submissions
from grader.chapter import Chapter, ExerciseSpec, UnknownExercise
from grader.checks import CheckContext, Observations, Termination, run_checks
from grader.i18n import T, Text
from grader.results import CheckResult, ExerciseResult, Report, exercise_status, mark_selection
from grader.runner import sandbox as sandboxes
from grader.runner.pool import Host, JobOutcome, JobSession, Limits, run_job

log = logging.getLogger("grader")


@dataclass
class GradeOptions:
    chapter: str | None = None
    exercises: tuple[str, ...] = ()
    seed: int | None = None
    sandbox: str = "auto"
    limits: Limits = field(default_factory=Limits)
    submission_timeout_s: float = 900.0
    exercise_timeout_s: float | None = None  # caps every exercise's own limit
    workers: int | None = None
    reference_dir: Path | None = None
    scratch_root: Path | None = None
    #: told what the run is doing, for a live display (called from grading threads)
    on_progress: Callable[["Progress"], None] | None = None


@dataclass
class Progress:
    """One step of a grading run, for a display: an exercise starts, moves on, or is done."""

    exercise: str
    #: ``running`` (its jobs are at work) or ``done`` (``result`` holds its verdict)
    state: str
    #: the student's job: ``starting``, ``importing``, ``running``, ``calling`` (``function``), ``ended``
    phase: str = "starting"
    function: str | None = None
    #: exercises graded so far, and how many the run grades
    done: int = 0
    total: int = 0
    result: ExerciseResult | None = None


class Interrupted(Exception):
    """Grading was interrupted (Ctrl-C); ``report`` holds the exercises graded before it,
    ``pending`` the ids of those it did not finish."""

    def __init__(self, report: "Report", pending: list[str]):
        super().__init__("interrupted")
        self.report = report
        self.pending = pending


class ReferenceCache:
    """Reference outcomes by (exercise, seed, reference code): one reference run per batch.

    The reference is trusted and deterministic for a given seed, so every submission
    graded with the same seed in this process shares one run per exercise. Timed
    exercises never come from here: their timings must be measured in the same run.
    """

    def __init__(self, size: int = 512):
        self.size = size
        self._data: dict[tuple, JobOutcome] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(chapter: Chapter, ex: ExerciseSpec, seed: int, reference_dir: Path) -> tuple:
        return (chapter.id, ex.id, seed, str(reference_dir), _tree_digest(reference_dir), _tree_digest(chapter.folder))

    def get(self, key: tuple) -> JobOutcome | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: tuple, outcome: JobOutcome) -> None:
        with self._lock:
            if len(self._data) >= self.size:
                self._data.pop(next(iter(self._data)))
            self._data[key] = outcome


REFERENCE_CACHE = ReferenceCache()


def _tree_digest(folder: Path) -> str:
    import hashlib

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

    Raises :class:`SubmissionError` when nothing can be graded, and :class:`Interrupted`
    (holding the report of what was graded) on Ctrl-C, after every process it started
    has been stopped.
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
        environment = run.environment()
        findings = _scan(sub, chapter) + run.runtime_findings
        report = Report(
            chapter=chapter.id,
            chapter_title=chapter.title,
            seed=seed,
            started_at=started_at,
            duration_s=time.monotonic() - started,
            submission=sub.describe(),
            environment=environment,
            exercises=exercises,
            integrity=findings,
            sandbox=run.plan.describe(),
            timings=run.timings,
            interrupted=interrupted,
        )
        mark_selection(report, [ex.id for ex in chapter.exercises])
        if interrupted:
            raise Interrupted(report, [ex.id for ex in selected if ex.id not in run.results])
        return report
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _scan(sub: submissions.Submission, chapter: Chapter) -> list[dict]:
    """The static integrity scan; a notebook's code is scanned once, under its own name."""
    if "notebook" in sub.kind:
        findings = integrity.scan(sub.module_dir, [chapter.exercises[0].filename])
        for item in findings:  # the line of the generated module, back to the notebook's cell and line
            if sub.notebook_cells and 0 < item["line"] <= len(sub.notebook_cells):
                cell, line = sub.notebook_cells[item["line"] - 1]
                item["file"], item["line"] = f"{sub.files[0]} (cell {cell})", line
            else:
                item["file"] = sub.files[0]
        return findings
    return integrity.scan(sub.module_dir, [f for f in sub.files if f.endswith(".py")])


class _Run:
    """The state of one grading run: its hosts, deadline and records."""

    def __init__(self, chapter: Chapter, selected: list[ExerciseSpec], sub: submissions.Submission, seed: int,
                 options: GradeOptions, scratch: Path):
        self.chapter = chapter
        self.selected = selected
        self.sub = sub
        self.seed = seed
        self.options = options
        self.deadline = time.monotonic() + options.submission_timeout_s
        self.plan = sandboxes.plan(options.sandbox)
        self.uids = sandboxes.UidPool() if self.plan.uid_isolation else None
        self.timings: dict[str, Any] = {}
        self.envs: list[dict] = []
        self.runtime_findings: list[dict] = []
        self.results: dict[str, ExerciseResult] = {}
        self.cancelled = False
        self._env_lock = threading.Lock()
        probes = chapter.probes_module_name
        self.student = Host(side="student", chapter=chapter.id, probes=probes, module_dir=sub.module_dir,
                            scratch=scratch / "student", plan=self.plan, limits=options.limits, uids=self.uids)
        reference_dir = options.reference_dir or chapter.solutions
        if not reference_dir.is_dir():
            raise submissions.SubmissionError(T("error.no_reference", chapter=chapter.id, path=str(reference_dir)))
        self.reference = Host(side="reference", chapter=chapter.id, probes=probes, module_dir=reference_dir,
                              scratch=scratch / "reference", plan=sandboxes.SandboxPlan("process", False),
                              limits=options.limits)

    # ------------------------------------------------------------------ running
    def execute(self) -> list[ExerciseResult]:
        """Grade every selected exercise; on Ctrl-C stop every process at once, then re-raise."""
        runnable = [ex for ex in self.selected if ex.id not in self.sub.problems]
        for ex in self.selected:
            if ex.id in self.sub.problems:
                self._done(ex, self._unrunnable(ex, self.sub.problems[ex.id]))
        if runnable:
            t0 = time.monotonic()
            self.student.listener = self._on_phase
            self.student.start()
            self.reference.start()
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
                self.student.stop()
                self.reference.stop()
            self.timings["exercises_s"] = round(time.monotonic() - t0, 3)
            self.timings["host_restarts"] = self.student.restarts
        return self.finished()

    def finished(self) -> list[ExerciseResult]:
        """The exercises graded so far, in chapter order."""
        return [self.results[ex.id] for ex in self.selected if ex.id in self.results]

    def cancel(self) -> None:
        """Stop grading now: no new job starts, every running one (and what it started) is killed."""
        self.cancelled = True
        for host in (self.student, self.reference):
            host.close()

    def _done(self, ex: ExerciseSpec, result: ExerciseResult) -> None:
        self.results[ex.id] = result
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

    def _timeout(self, ex: ExerciseSpec) -> float:
        cap = self.options.exercise_timeout_s
        return min(ex.timeout_s, cap) if cap else ex.timeout_s

    def _remaining(self) -> float:
        return self.deadline - time.monotonic()

    def _grade_exercise(self, ex: ExerciseSpec) -> ExerciseResult:
        """One exercise, whatever happens: a grader bug here costs this exercise only."""
        try:
            return self._grade_exercise_unguarded(ex)
        except Exception as exc:  # noqa: BLE001 - logged in full; the student sees one line
            log.exception("grading %s failed", ex.id)
            return self._unrunnable(ex, T("check.grader_error", detail=f"{type(exc).__name__}: {exc}"), "error")

    def _grade_exercise_unguarded(self, ex: ExerciseSpec) -> ExerciseResult:
        t0 = time.monotonic()
        self._progress(Progress(ex.id, "running"))
        try:
            inputs = self.chapter.checks_module.inputs(ex.id, self.seed)
        except Exception as exc:  # a bug in the chapter's input code
            log.exception("inputs for %s failed", ex.id)
            return self._unrunnable(ex, T("check.grader_error", detail=f"{type(exc).__name__}: {exc}"), "error")
        budget = min(self._timeout(ex), self._remaining())
        if budget <= 1:
            return self._unrunnable(ex, T("job.submission_timeout", seconds=self.options.submission_timeout_s),
                                    "timeout")
        driver = getattr(self.chapter.checks_module, "DRIVERS", {}).get(ex.id)
        if driver is not None:
            student_out, reference_out = driver(self, ex, inputs, budget)
            for side, outcome in (("student", student_out), ("reference", reference_out)):
                if outcome is not None and outcome.env:
                    with self._env_lock:
                        self.envs.append({"side": side, **outcome.env})
        else:
            student_out = self._job(self.student, ex, inputs, budget)
            reference_out = None
            if ex.needs_reference and student_out.attempted():
                reference_out = self._reference_job(ex, inputs)
        result = self._judge(ex, inputs, student_out, reference_out)
        result.duration_s = time.monotonic() - t0
        self.timings[ex.id] = {"student_s": round(student_out.duration_s, 3),
                               "reference_s": round(reference_out.duration_s, 3) if reference_out else None}
        return result

    def _job(self, host: Host, ex: ExerciseSpec, inputs: dict, timeout_s: float,
             driver: Callable[[JobSession], None] | None = None) -> JobOutcome:
        outcome = run_job(host, exercise=ex.id, module=ex.module, functions=ex.functions, inputs=inputs,
                          timeout_s=timeout_s, driver=driver,
                          import_timeout_s=min(ex.import_timeout_s, timeout_s) if host.side == "student" else None)
        if outcome.env:
            with self._env_lock:
                self.envs.append({"side": host.side, **outcome.env})
        return outcome

    def _reference_job(self, ex: ExerciseSpec, inputs: dict) -> JobOutcome:
        key = ReferenceCache.key(self.chapter, ex, self.seed, self.reference.module_dir)
        cached = REFERENCE_CACHE.get(key)
        if cached is not None:
            return cached
        outcome = self._job(self.reference, ex, inputs, ex.timeout_s * 2)
        if outcome.end != "done":  # the reference is trusted: a failure is transient or the grader's bug
            log.warning("reference run of %s ended with %s; retrying once", ex.id, outcome.end)
            outcome = self._job(self.reference, ex, inputs, ex.timeout_s * 2)
        if outcome.end == "done":
            REFERENCE_CACHE.put(key, outcome)
        return outcome

    # ------------------------------------------------------------------ judging
    def _unrunnable(self, ex: ExerciseSpec, reason: Text, status: str = "error") -> ExerciseResult:
        checks = [CheckResult(id=c.id, title=c.title, category=c.category, points=0.0, max_points=c.points,
                              status=status, message=reason, hint=None, hint_id="none") for c in ex.checks]
        return ExerciseResult(id=ex.id, title=ex.title, section=ex.section, checks=checks, status=status,
                              error=reason, unrunnable=True)

    def _judge(self, ex: ExerciseSpec, inputs: dict, student: JobOutcome,
               reference: JobOutcome | None) -> ExerciseResult:
        if student.end == "import_error":
            d = student.detail
            reason = T("job.import_error", file=ex.filename, type=d.get("type", "?"),
                       message=d.get("message", ""), where=_where(d.get("where"), self.sub))
            result = self._unrunnable(ex, reason)
            result.output = student.output
            return result
        termination = _termination(student, ex)
        if student.end == "timeout" and (student.detail.get("hung") or {}).get("phase") == "importing":
            result = self._unrunnable(ex, termination.reason, "timeout")  # the module never finished importing
            result.output = student.output
            return result
        tampering = _tampering(student)
        if tampering:
            with self._env_lock:
                self.runtime_findings.append({"file": ex.filename, "line": 0, "code": "runtime",
                                              "detail": ex.id, "message": T("integrity.runtime", detail=tampering)})
            result = self._unrunnable(ex, tampering, "failed")
            result.output = student.output
            return result
        data = dict(student.observations)
        data["grader/arrivals"] = dict(student.arrivals)
        for name, described in student.names.items():
            data[f"names/{name}"] = {**described, "file": ex.filename}
        s = Observations("student", data, module_file=ex.filename)
        ref_data: dict = {}
        if reference is not None:
            if reference.end == "done":
                ref_data = dict(reference.observations)
            else:
                log.error("reference run of %s failed: %s %s\n%s", ex.id, reference.end, reference.detail,
                          reference.output[-2000:])
        r = Observations("reference", ref_data)
        ctx = CheckContext(exercise=ex, inputs=inputs, seed=self.seed)
        checks = run_checks(ex, self.chapter.checks_module.checks, s, r, ctx, termination)
        if reference is not None and reference.end != "done":
            how = _how(reference)
            for check in checks:
                if check.status == "error":
                    check.message = T("job.reference_failed", how=how)
        _localize_where(checks, self.sub)
        status = exercise_status(checks, termination.kind)
        return ExerciseResult(id=ex.id, title=ex.title, section=ex.section, checks=checks, status=status,
                              error=termination.reason if termination.kind else None, output=student.output)

    def environment(self) -> dict:
        env: dict = {}
        for candidate in sorted(self.envs, key=lambda e: e.get("side") != "reference"):
            env = {k: v for k, v in candidate.items() if k != "side"}
            break
        if not env:  # no job ran (every module missing or broken): what the grader's own install says
            env = {"python": platform.python_version(), "jax": _version("jax"), "jaxlib": _version("jaxlib"),
                   "backend": None, "device_kind": None}
        env["cpu_count"] = os.cpu_count()
        return env


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _tampering(outcome: JobOutcome) -> list[Text] | None:
    """Why the job's records cannot be trusted, if they cannot.

    The job reports on its instruments after the import and after the probe; a change,
    a missing final report, or fewer compiles reported than XLA's own dump holds all
    mean that the student's code reached into the grader's side of the process.
    """
    problems: list[Text] = []
    changed = sorted({name for report in outcome.integrity for name in (report.get("changed") or [])
                      if isinstance(name, str)})
    if changed:
        problems.append(T("integrity.tampered", names=", ".join(changed[:8]) + (" …" if len(changed) > 8 else "")))
    final = next((r for r in outcome.integrity if r.get("stage") == "probe"), None)
    if outcome.end == "done" and final is None:
        problems.append(T("integrity.no_report"))
    reported = final.get("compiles_total") if final else None
    if type(reported) is int and outcome.xla_compiles is not None and outcome.xla_compiles > reported:
        problems.append(T("integrity.compiles_hidden", xla=outcome.xla_compiles, reported=reported))
    return problems or None


def _how(outcome: JobOutcome) -> Text:
    exit_info = outcome.detail.get("exit", {})
    if outcome.end == "timeout":
        return T("job.timeout", seconds=round(outcome.duration_s, 1))
    if "signal" in exit_info:
        number = exit_info["signal"]
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "?"
        if number == signal.SIGXFSZ:
            return T("job.output_limit")
        return T("job.signal", signal=number, name=name)
    if "code" in exit_info:
        return T("job.exit_code", code=exit_info["code"])
    return T("job.host_lost")


def _termination(outcome: JobOutcome, ex: ExerciseSpec) -> Termination:
    end = outcome.end
    if end == "done":
        return Termination()
    if end == "timeout":
        return Termination("timeout", _timeout_text(outcome, ex))
    if end == "crashed":
        exit_info = outcome.detail.get("exit", {})
        if exit_info.get("signal") == signal.SIGXCPU:
            return Termination("timeout", T("job.timeout", seconds=round(outcome.duration_s, 1)))
        how = _how(outcome)
        if "MemoryError" in outcome.output[-3000:] or "RESOURCE_EXHAUSTED" in outcome.output[-3000:]:
            how = [how, T("job.memory")]
        return Termination("error", T("job.crashed", how=how))
    if end == "probe_error":
        return Termination("error", T("job.probe_error", type=outcome.detail.get("type", "?")))
    if end == "disk_limit":
        return Termination("error", T("job.disk_limit", used=outcome.detail.get("disk_bytes", 0) >> 20,
                                      limit=outcome.detail.get("limit", 0) >> 20))
    if end == "protocol_error":
        return Termination("error", T("job.protocol_error", error=outcome.detail.get("error", "?")))
    return Termination("error", T("job.host_lost"))


def _timeout_text(outcome: JobOutcome, ex: ExerciseSpec) -> Text:
    """What ran past its limit: the import or a call, and the student's line when known."""
    hung = outcome.detail.get("hung") or {}
    at = T("job.stuck_at", where=hung["where"]) if hung.get("where") else ""
    if hung.get("phase") == "importing":
        return T("job.hung_import", file=ex.filename, seconds=round(outcome.duration_s), at=at)
    if hung.get("phase") == "calling" and hung.get("function"):
        return T("job.hung_call", function=hung["function"], seconds=round(outcome.duration_s, 1), at=at)
    return T("job.timeout", seconds=round(outcome.duration_s, 1))


def _where(where: str | None, sub: submissions.Submission) -> str:
    """``file:line`` for a module, or the notebook cell it came from."""
    if not where or not sub.notebook_cells:
        return where or "?"
    try:
        line = int(where.rsplit(":", 1)[1])
        cell, cell_line = sub.notebook_cells[min(line, len(sub.notebook_cells)) - 1]
        return f"notebook cell {cell}, line {cell_line}"
    except (ValueError, IndexError):
        return where


def _localize_where(checks: list[CheckResult], sub: submissions.Submission) -> None:
    if not sub.notebook_cells:
        return

    def fix(text: Any) -> Any:
        if isinstance(text, list):
            return [fix(t) for t in text]
        if isinstance(text, Text) and "where" in text.args:
            return Text(text.key, {**text.args, "where": _where(text.args["where"], sub)})
        if isinstance(text, Text):
            return Text(text.key, {k: fix(v) for k, v in text.args.items()})
        return text

    for check in checks:
        check.message = fix(check.message)
