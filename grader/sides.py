"""One exercise graded on both sides: the student's job, the reference's, then the verdict.

:class:`BothSides` holds what the exercises of one grading run share: the two hosts (no
reference's in a preview, whose records stand for it), the reference's outcomes known
already (:class:`~grader.outcomes.ReferenceCache`), the seed, the submission's deadline,
and what the jobs said of where they ran. :meth:`BothSides.grade` grades one exercise
whatever happens (a bug of the grader's costs that exercise only): its two jobs, the
reference's started as soon as the student's attempted something (a stub costs no
reference run), or the exercise's timing driver, given :class:`Sides`; then
:func:`grader.verdicts.judge` turns the records into the verdict.
"""
from __future__ import annotations

import contextlib
import logging
import os
import platform
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from grader import store
from grader.checks import TIMING
from grader.i18n import T
from grader.outcomes import ReferenceCache
from grader.results import ExerciseResult
from grader.runner import devices
from grader.runner.devices import DevicePlan
from grader.runner.host_handles import HostProcess
from grader.primitives import timing
from grader.primitives.driving import TimedJob
from grader.runner.job_sessions import JobOutcome, run_job
from grader.runner.kept import EarlyStart
from grader.runner.outcome import combined
from grader.reference_source import reference_source
from grader.scheduling import Schedule
from grader.verdicts import judge, unrunnable

if TYPE_CHECKING:
    from grader.chapter import Chapter, ExerciseSpec
    from grader.preview import ReferenceRecords
    from grader.submission import Submission

log = logging.getLogger("grader")


class DeviceTaken(Exception):
    """A job found the accelerator taken by another process as it started (``error``: what JAX said)."""

    def __init__(self, error: str):
        super().__init__(error)
        self.error = error


class Sides:
    """What a timing driver may use: new jobs of its exercise, on the student's side or the reference's.

    ``exercise`` is the :class:`~grader.chapter.ExerciseSpec`; :meth:`student` and
    :meth:`reference` return unstarted :class:`~grader.runner.job_sessions.JobSession` objects
    with the exercise's settings (synchronous CPU dispatch, import limit).
    """

    def __init__(self, both: BothSides, ex: ExerciseSpec, inputs: dict, early: EarlyStart | None = None):
        self._both = both
        self.exercise = ex
        #: the device admits one process at a time (a TPU): the two sides' jobs run one after the other,
        #: each timed alone (:func:`grader.primitives.comparison.timed_comparison`), never side by side
        self.in_turn = both.device.on_device(ex.device)
        #: a preview's recorded reference outcome (then there is no reference process), else ``None``
        self.recorded: JobOutcome | None = both.source.recorded(ex, inputs)
        #: the jobs started while the other exercises were graded (:meth:`BothSides.prestart`)
        self._early = early.take() if early is not None else None

    def student(self, timeout_s: float) -> TimedJob:
        if self._early is not None:
            self._early.student.renew(timeout_s)
            return self._early.student
        return self._both.student.exercise_session(self.exercise, timeout_s)

    def alone(self, sessions: list[TimedJob]) -> contextlib.AbstractContextManager:
        """Around a timed exercise's rounds (``sessions``: its jobs): see :meth:`BothSides.alone`."""
        return self._both.alone(self.exercise, sessions)

    def reference(self, timeout_s: float) -> TimedJob:
        """The reference's job: one started early, a new one, or on a batch worker the one kept for this
        exercise and seed (:mod:`grader.runner.kept`)."""
        if self._early is not None and self._early.reference is not None:
            self._early.reference.renew(timeout_s)
            return self._early.reference
        return self._both.source.session(self.exercise, timeout_s)


class BothSides:
    """The two sides of one grading run (see the module).

    ``records``: a preview's reference records (:class:`grader.preview.ReferenceRecords`), else
    ``None``; ``started(exercise_id)`` is told when an exercise starts.
    """

    def __init__(self, chapter: Chapter, sub: Submission, seed: int, hosts: tuple[HostProcess, HostProcess | None],
                 references: ReferenceCache, *, submission_timeout_s: float, exercise_timeout_s: float | None,
                 records: ReferenceRecords | None = None, started: Callable[[str], None] | None = None,
                 keep_timing: bool = False, ahead: list[int] | None = None, schedule: Schedule | None = None,
                 device: DevicePlan | None = None):
        self.chapter = chapter
        #: where the jobs run (:mod:`grader.runner.devices`): the device's exercises on it, one job at a
        #: time where it admits one process at a time, the others on the CPU
        self.device = device or devices.default_plan()
        #: when each exercise runs and on which cores (:class:`grader.scheduling.Schedule`)
        self.schedule = schedule or Schedule()
        #: a timed exercise prepares only the cases chosen when all were last timed here (:meth:`_sent`)
        self.keep_timing = keep_timing
        self.sub = sub
        self.seed = seed
        self.student, self.reference = hosts
        self.submission_timeout_s = submission_timeout_s
        self.exercise_timeout_s = exercise_timeout_s
        self.begun = time.monotonic()
        self.deadline = self.begun + submission_timeout_s
        self.started = started
        #: each exercise's time on each side (``student_s``, ``reference_s``)
        self.timings: dict[str, Any] = {}
        #: what the jobs said of where they ran (the reference's first)
        self.envs: list[dict] = []
        #: integrity findings of the runs themselves (an instrument changed, compiles hidden)
        self.runtime_findings: list[dict] = []
        #: by exercise, what its graded functions traced to (:mod:`grader.child.programs`), where recorded
        self.programs: dict[str, dict[str, dict]] = {}
        #: timed exercises' jobs started early (:meth:`prestart`), until their driver takes them
        self._early: dict[str, EarlyStart] = {}
        self._lock = threading.Lock()
        #: where the reference's outcomes come from, chosen once (:mod:`grader.reference_source`)
        self.source = reference_source(chapter, self.reference, references, seed, records=records,
                                       ahead=list(ahead or ()), device=self.device, note=self._note_environment,
                                       on_ahead=self._computed_ahead)

    def _computed_ahead(self, exercise_id: str, seeds: int) -> None:
        with self._lock:
            self.timings.setdefault("reference_ahead", {})[exercise_id] = seeds

    def prestart(self, ex: ExerciseSpec) -> None:
        """Start a timed exercise's jobs now, while the other exercises are graded: they prepare and
        then wait, and its driver, run alone later, times them (:class:`grader.runner.kept.EarlyStart`).
        Only their timing needs the machine to itself."""
        budget = self._budget(ex)
        if ex.driver is None or budget <= 1 or self.device.on_device(ex.device):  # a device's turn comes later
            return
        reference = self.source.early(ex, max(budget, ex.timeout_s))
        self._early[ex.id] = EarlyStart(self.student.exercise_session(ex, budget), self._sent(ex, ex.inputs(self.seed)),
                                        reference, timing.READY)

    def alone(self, ex: ExerciseSpec, sessions: list[TimedJob]) -> contextlib.AbstractContextManager:
        """A timed exercise's rounds (``sessions``: its jobs) alone on a core: :meth:`grader.scheduling.Schedule.alone`,
        the hosts moved off it; they wait for the untimed exercises at most until the submission's deadline, and
        never on a device of one process at a time."""
        hosts = [host for host in (self.student, self.reference) if host is not None]
        return self.schedule.alone(ex.id, hosts, [session.name for session in sessions],
                                   wait_until=None if self.device.on_device(ex.device) else self.deadline)

    # ------------------------------------------------------------------ one exercise
    def grade(self, ex: ExerciseSpec) -> ExerciseResult:
        """One exercise, whatever happens: a grader bug here costs this exercise only. Where a job found
        the accelerator taken by another process as it started, the grading goes on on the CPU
        (:meth:`grader.runner.devices.DevicePlan.fall_back`) and the exercise is graded again there."""
        try:
            try:
                return self._grade(ex)
            except DeviceTaken as taken:
                self._fall_back(taken.error)
                return self._grade(ex)
        except DeviceTaken as taken:  # on the CPU too: JAX's backend does not start at all
            return unrunnable(ex, T("job.no_backend", error=taken.error[:300]))
        except Exception as exc:  # noqa: BLE001 - logged in full; the student sees one line
            log.exception("grading %s failed", ex.id)
            return unrunnable(ex, T("check.grader_error", detail=f"{type(exc).__name__}: {exc}"))

    def _fall_back(self, error: str) -> None:
        """The accelerator was taken as a job started: every job from now on runs on the CPU, and the report
        says why (the holder named, where libtpu names it or this user can see it)."""
        found = self.device.accelerator
        if found is None or self.device.platform == "cpu":
            return
        if not devices.taken(error):  # it failed for a reason of its own (a broken install, say)
            if self.device.fall_back(devices.unavailable_text(found, error)):
                log.warning("%s could not be opened (%s): grading on the CPU", found.name, error[:200])
            return
        pid = devices.holder_in_message(error)
        seen = devices.tpu_holders() if found.exclusive else []
        holder = next((h for h in seen if h.pid == pid), None) or (seen[0] if seen else None) or \
            (devices.Holder(pid, "?") if pid else None)
        if self.device.fall_back(devices.held_text(found, holder), holder):
            log.warning("%s was taken as a job started (%s): grading on the CPU", found.name, error[:200])

    def _budget(self, ex: ExerciseSpec) -> float:
        cap = self.exercise_timeout_s
        return min(min(ex.timeout_s, cap) if cap else ex.timeout_s, self.deadline - time.monotonic())

    def _grade(self, ex: ExerciseSpec) -> ExerciseResult:
        t0 = time.monotonic()
        if self.started is not None:
            self.started(ex.id)
        inputs = ex.inputs(self.seed)
        budget = self._budget(ex)
        if budget <= 1:
            return unrunnable(ex, T("job.submission_timeout", seconds=self.submission_timeout_s), "timeout")
        if ex.driver is not None:
            sent = self._sent(ex, inputs)
            student_out, reference_out = ex.driver(Sides(self, ex, inputs, self._early.pop(ex.id, None)), sent,
                                                   budget)
            for outcome in (student_out, reference_out):
                if outcome is not None:
                    self._note_environment(outcome)
            self._keep_timing_cases(ex, sent, student_out, reference_out)
        else:
            student_out, reference_out = self._both_jobs(ex, inputs, budget)
        for outcome in (student_out, reference_out):
            if outcome is not None and outcome.end == "no_backend":
                raise DeviceTaken(str(outcome.detail.get("error") or ""))
        if student_out.programs:
            with self._lock:
                self.programs[ex.id] = dict(student_out.programs)
        result, findings = judge(ex, student_out, reference_out, inputs=inputs, seed=self.seed,
                                 locate=self.sub.locate, preview=self.source.preview,
                                 missing="not_attempted" if self.sub.cells is not None else "failed")
        result.duration_s = time.monotonic() - t0
        ran = student_out.env or (reference_out.env if reference_out is not None else None) or {}
        if ran.get("backend"):
            result.device = {"backend": ran.get("backend"), "device_kind": ran.get("device_kind")}
        with self._lock:
            self.runtime_findings += findings
            self.timings[ex.id] = {"began_s": round(t0 - self.begun, 3),
                                   "ended_s": round(time.monotonic() - self.begun, 3),
                                   "student_s": round(student_out.duration_s, 3),
                                   "reference_s": round(reference_out.duration_s, 3) if reference_out else None,
                                   "student_work": student_out.work,
                                   "reference_work": reference_out.work
                                   if reference_out and self.source.ran(ex.id) else None}
        return result

    # ------------------------------------------------------------------ a timed exercise's cases
    def _sent(self, ex: ExerciseSpec, inputs: dict) -> dict:
        """What a timed exercise's jobs are sent: its inputs and, once every candidate case was timed on
        this machine, the cases chosen then (:data:`grader.primitives.timing.PREPARE`): its jobs prepare
        and time only those (the others cost each grading their programs, their warm-up and their
        calibration, to be passed over)."""
        chosen = store.timing_cases(self.chapter.id, ex.id) if ex.timed and self.keep_timing else None
        return {**inputs, timing.PREPARE: list(chosen["cases"])} if chosen else inputs

    def _keep_timing_cases(self, ex: ExerciseSpec, sent: dict, student_out: JobOutcome,
                           reference_out: JobOutcome | None) -> None:
        """After a timed exercise: keep the cases chosen when both sides timed every candidate they
        prepared (nothing failed), with the device; forget them when they were sent to another device
        or one of them could not be timed (the next grading times every candidate again)."""
        if not (ex.timed and self.keep_timing):
            return
        results = student_out.records.get(TIMING)
        if not isinstance(results, dict):
            return
        functions = {name: r for name, r in results.items() if isinstance(r, dict) and "case" in r}
        timed = {name: r for name, r in functions.items() if "calibration" in r}
        judged_by = reference_out if reference_out is not None else student_out
        device = {k: (judged_by.env or {}).get(k) for k in ("backend", "device_kind")}
        if timing.PREPARE in sent:  # nothing timed (a stub), or a student's failure, teaches nothing of the cases
            kept = store.timing_cases(self.chapter.id, ex.id)
            if kept is not None and functions and (kept.get("device") != device or len(timed) < len(functions)):
                store.keep_timing_cases(self.chapter.id, ex.id, None)
            return
        ready = [set((out.records.get(timing.READY) or {}).get("cases") or ())
                 for out in (student_out, reference_out) if out is not None]
        calibrated = {case for r in timed.values() for case in r["calibration"]}
        if timed and all(cases == calibrated for cases in ready):
            store.keep_timing_cases(self.chapter.id, ex.id, {
                "cases": sorted(f"{name}/{r['case']}" for name, r in timed.items()), "device": device})

    def _job(self, host: HostProcess, ex: ExerciseSpec, inputs: dict, timeout_s: float) -> JobOutcome:
        outcome = run_job(host.exercise_session(ex, timeout_s), inputs)
        self._note_environment(outcome)
        return outcome

    def _shared(self, ex: ExerciseSpec, inputs: dict, budget: float) -> JobOutcome:
        """The student's job, or the jobs sharing its probe side by side (``ex.parts``: each does its shares
        of a probe that mostly waits), as one outcome (:func:`grader.runner.outcome.combined`)."""
        parts = 1 if self.device.on_device(ex.device) else ex.parts  # one job at a time there: one does all
        if parts <= 1:
            return self._job(self.student, ex, inputs, budget)
        outcomes: list[JobOutcome | None] = [None] * parts

        def part(index: int) -> None:
            outcomes[index] = run_job(self.student.exercise_session(ex, budget), inputs, part=(index, parts))

        others = [threading.Thread(target=part, args=(i,), daemon=True, name=f"{ex.id}-part{i}")
                  for i in range(1, parts)]
        for thread in others:
            thread.start()
        part(0)
        for thread in others:
            thread.join()
        outcome = combined([o if o is not None else JobOutcome(end="not_started", side="student") for o in outcomes])
        self._note_environment(outcome)
        return outcome

    def _note_environment(self, outcome: JobOutcome) -> None:
        if outcome.env:
            with self._lock:
                self.envs.append({"side": outcome.side, **outcome.env})

    def _both_jobs(self, ex: ExerciseSpec, inputs: dict, budget: float) -> tuple[JobOutcome, JobOutcome | None]:
        """The student's job and the reference's outcome (:meth:`grader.reference_source.ReferenceSource.beside`),
        or the student's alone where the exercise needs no reference."""
        if not ex.needs_reference:
            return self._shared(ex, inputs, budget), None
        return self.source.beside(ex, inputs, self.student.exercise_session(ex, budget))

    def programs_of(self, exercises: list[ExerciseSpec]) -> dict[str, dict]:
        """By exercise: its file, that file's text as graded, and what its functions traced to (``Report.programs``)."""
        found = {}
        for ex in exercises:
            path = self.sub.module_dir / ex.filename
            try:
                source = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
            except OSError:
                source = ""
            found[ex.id] = {"file": ex.filename, "source": source, "functions": self.programs.get(ex.id, {})}
        return found

    # ------------------------------------------------------------------ where it ran
    def environment(self) -> dict:
        """Where the grading ran: the device it measured on (an accelerator's job's view, where the device's
        exercises ran there while the others ran on the CPU), the reference's job's view first (the
        student's may be tampered with)."""
        env: dict = {}
        for candidate in sorted(self.envs, key=lambda e: (e.get("backend") == "cpu", e.get("side") != "reference")):
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
