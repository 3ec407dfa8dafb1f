"""Grading one submission: the unit of work.

:func:`grade` takes a path and options and returns a :class:`~grader.results.Report`;
it never raises for anything the student's code does. A :class:`Grading` reads the
submission, starts two hosts (the student's, sandboxed, and the trusted reference's; or
takes a batch worker's warm ones), has each exercise graded on both sides
(:class:`grader.sides.BothSides`) in the order its :class:`grader.scheduling.Schedule` gives,
and gathers the verdicts into the report. Batch grading, a cluster worker, watch mode
and a notebook front end call this same function.
"""
from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from grader import ahead, store, submission as submissions
from grader.ahead import new_seed
from grader.chapter import ExerciseSpec, UnknownExercise
from grader import affinity as cores
from grader.i18n import T
from grader.outcomes import ReferenceCache
from grader.preview import ReferenceRecords, mark_checked, preview_records
from grader.results import ExerciseResult, Report, mark_selection
from grader.runner import devices, sandbox as sandboxes
from grader.runner.host_handles import HostProcess
from grader.runner.job_sessions import Limits
from grader.runner import service as service_hosts
from grader.runner.reference_host import reference_host
from grader.runner.service import Warm
from grader.runner.warm import WarmHosts
from grader.scheduling import Schedule
from grader.sides import BothSides
from grader.verdicts import unrunnable, untouched as untouched_result

log = logging.getLogger("grader")


@dataclass
class GradeOptions:
    """What the user says of how to grade one submission (the command line's options, a Gradescope
    autograder's settings, a notebook's ``check()``); every field has a default a student never needs to
    change. What a front end brings besides (warm hosts, shared reference outcomes, a display) is
    :class:`Machinery`, handed to :func:`grade` apart."""

    #: the chapter's id; ``None``: told from the submission (its name, then its contents)
    chapter: str | None = None
    #: grade only these exercises (ids, ``ex03`` or ``3``); empty: all (a partial run otherwise)
    exercises: tuple[str, ...] = ()
    #: in a folder or zip that holds the chapter more than once, the copy to grade (a path inside
    #: it: ``exercises/ch4.ipynb``); ``None``: the one the student changed (:mod:`grader.copies`)
    inside: str | None = None
    #: the hidden inputs' seed; ``None``: drawn fresh (the report records it)
    seed: int | None = None
    #: ``auto`` (the strongest available), ``bwrap`` or ``process``
    sandbox: str = "auto"
    #: as root, run the student's code even where it would run as root (no bubblewrap, and a Python other
    #: users cannot read); otherwise such a grading is refused (:func:`grader.runner.sandbox.refuse_root`)
    allow_weak_sandbox: bool = False
    #: the device measured on (:mod:`grader.runner.devices`): ``auto`` (the accelerator, when there is one and
    #: no other process holds it; else the CPU, saying why), ``cpu``, or ``device`` (the accelerator, or an error)
    device: str = "auto"
    #: per-job limits (CPU, memory, processes, file size, open files, disk)
    limits: Limits = field(default_factory=Limits)
    #: the whole submission's time limit, in seconds
    submission_timeout_s: float = 900.0
    #: caps every exercise's own time limit (seconds); ``None``: the chapter's limits
    exercise_timeout_s: float | None = None
    #: the reference solutions; ``None``: the chapter's ``solutions`` folder
    reference_dir: Path | None = None
    #: load what earlier runs compiled from JAX's persistent cache, and keep what a grading learns of this
    #: machine (:mod:`grader.store`); ``False``: a grading that starts from nothing
    compile_cache: bool = True


@dataclass
class Machinery:
    """What a front end hands a grading besides the user's options (:class:`GradeOptions`): what it
    keeps from one grading to the next, how it shows progress, how it shares the machine. Nothing a
    student or an instructor sets."""

    #: exercises graded at once (untimed ones); ``None``: one more than the CPUs (an exercise that
    #: mostly waits, like a timing harness's, leaves its CPU to the others); a batch's slot: its cores
    at_once: int | None = None
    #: where scratch folders go; ``None``: the system's temporary folder
    scratch_root: Path | None = None
    #: reference outcomes shared between gradings with one seed (a batch); ``None``: this run's own
    reference_cache: "ReferenceCache | None" = None
    #: told what the run is doing, for a live display (called from grading threads)
    on_progress: Callable[["Progress"], None] | None = None
    #: the reference's records for a public seed (:class:`grader.preview.ReferenceRecords`): grade a
    #: preview with them instead of running the reference; ``None``: those of a course
    #: release's chapter when it has no solutions (:func:`release_records`), else none
    preview: "ReferenceRecords | None" = None
    #: hosts kept from one grading to the next by a batch worker (:class:`grader.runner.warm.WarmHosts`):
    #: the reference's host is theirs, the student's is forked from their template; ``None``: this
    #: grading starts its own
    hosts: "WarmHosts | None" = None
    #: how many seeds to keep drawn ahead (:mod:`grader.ahead`): a grading without ``seed`` takes the
    #: first as its own, and its reference jobs compute the outcomes of the others; 0 (a batch's, a
    #: Gradescope submission's): none
    ahead: int = 0
    #: record what each graded function traces to, and each exercise file's text (``Report.programs``), for
    #: the class's similarity (``grade batch --similarity``)
    programs: bool = False
    #: fork the hosts from the user's warm service (:mod:`grader.runner.service`), started if none serves
    #: these settings, where it can serve them: a student's own gradings (``grade PATH``, watch mode)
    service: bool = False


@dataclass
class Progress:
    """One step of a grading run, for a display: an exercise starts, moves on, or is done."""

    #: the exercise's id
    exercise: str
    #: ``running`` (its jobs are at work) or ``done`` (``result`` holds its verdict)
    state: str
    #: the student's job: one of :data:`grader.runner.job_sessions.PHASES`
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


def _code_notes(sub: submissions.Submission, chapter) -> dict:
    """What the student should know about the code itself, by exercise (JAX's private API)."""
    from grader import integrity

    notebook = sub.cells is not None
    files = [chapter.exercises[0].filename] if notebook else [f for f in sub.files if f.endswith(".py")]
    return integrity.student_notes(sub.module_dir, files, chapter.exercises, sub.locate, notebook=notebook)


def grade(path: Path, options: GradeOptions | None = None, machinery: Machinery | None = None) -> Report:
    """Grade the submission at ``path`` as ``options`` say, with a front end's ``machinery``.

    Raises :class:`~grader.submission.SubmissionError` when nothing can be graded, and
    :class:`Interrupted` (holding the report of what was graded) on Ctrl-C, after
    every process it started has been stopped.
    """
    options = options or GradeOptions()
    with Grading(path, options, machinery) as grading:
        return grading.run(options.exercises)


class Grading:
    """One submission's grading: its chapter, its seed, a scratch folder and the two hosts.

    :func:`grade` runs it once. Watch mode keeps one open and runs it again after every
    save: the hosts stay warm (JAX imported once), the reference's results for the seed
    stay cached, and each run reads the submission afresh. Closing it stops every
    process it started and removes its scratch folder.
    """

    def __init__(self, path: Path, options: GradeOptions, machinery: Machinery | None = None):
        self.path = Path(path)
        self.options = options
        run = self.machinery = machinery or Machinery()
        self._started: float | None = time.monotonic()  # the first run's duration counts from here
        self._cpu_started: float | None = time.process_time()
        self.chapter = submissions.resolve_chapter(self.path, options.chapter)
        #: a preview's reference records (then no reference process runs), else ``None``
        self.records = preview_records(self.chapter, preview=run.preview, reference_dir=options.reference_dir,
                                       seed=options.seed)
        if self.records is not None:  # a preview: the records answer for their public seed only
            options = self.options = replace(options, seed=self.records.seed)
        self.references = run.reference_cache or \
            ReferenceCache(store.outcomes_dir() if options.compile_cache else None)
        taken: int | None = None
        self.ahead: list[int] = []
        if run.ahead and self.records is None and self.references.folder is not None:
            taken, self.ahead = ahead.draw(self.chapter.id, run.ahead, take=options.seed is None)
        self.seed = options.seed if options.seed is not None else taken or new_seed()
        unsupported = devices.unsupported_system()
        if unsupported is not None:
            raise submissions.SubmissionError(unsupported)
        self.plan = sandboxes.plan(options.sandbox)
        refused = sandboxes.refuse_root(self.plan, options.allow_weak_sandbox)
        if refused is not None:  # a student's code as root: never without the user saying so
            raise submissions.SubmissionError(refused)
        try:  # before any process starts: a TPU admits one at a time (a batch worker's: the batch's plan)
            self.device = devices.default_plan() if run.hosts is not None else devices.plan(options.device)
        except devices.DeviceError as exc:
            raise submissions.SubmissionError(exc.text) from None
        self.uids = sandboxes.UidPool() if self.plan.uid_isolation else None
        self.reference_dir = options.reference_dir or self.chapter.solutions
        if self.records is None and not self.reference_dir.is_dir():
            raise submissions.SubmissionError(T("error.no_reference", chapter=self.chapter.id,
                                                path=str(self.reference_dir)))
        self.warm = run.hosts
        if self.warm is None and self.plan.uid_isolation:  # a grading killed before it cleaned up
            sandboxes.sweep_stale_scratch(Path(run.scratch_root or tempfile.gettempdir()))
        #: the group its jobs take besides their uids (per-job uids): it alone may enter the scratch folder,
        #: so no other local user (a classmate's job included) reads a grading in progress
        self.group = self.uids.acquire() if self.uids is not None else None
        #: its part in the user's warm service: hosts forked from it, or one started as it ends (``None``: neither)
        self.service: Warm | None = self._service() if run.service and self.warm is None else None
        self._completed = False  # ran to its end (a Ctrl-C'd grading starts no service)
        served = self.service.hosts if self.service is not None else None
        self.scratch = self.warm.grading_scratch() if self.warm is not None else \
            served.grading_scratch() if served is not None else \
            Path(tempfile.mkdtemp(prefix="grade-", dir=run.scratch_root))
        _private(self.scratch, self.group)
        self.hosts: tuple[HostProcess, HostProcess | None] | None = None
        self._start_hosts()  # JAX imports in them while the submission is read

    def __enter__(self) -> "Grading":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def run(self, exercises: tuple[str, ...] | list[str] = ()) -> Report:
        """Grade ``exercises`` (all when empty) of the submission as it is now."""
        started, self._started = self._started or time.monotonic(), None
        cpu_started, self._cpu_started = self._cpu_started or time.process_time(), None
        started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        turns_before = len(self.device.lease.turns)
        chapter = self.chapter
        try:
            selected = chapter.select(exercises)
        except UnknownExercise as exc:
            raise submissions.SubmissionError(T("error.unknown_exercise", item=exc.item, chapter=exc.chapter,
                                                known=exc.known)) from None
        sub = submissions.load(self.path, chapter, self.scratch / "submission", inside=self.options.inside)
        for folder in (self.scratch / "submission", sub.module_dir):
            os.chmod(folder, 0o755)
        for file in sub.module_dir.iterdir():
            os.chmod(file, 0o644)
        hosts = self._start_hosts()
        hosts[0].programs = self.machinery.programs
        tally = _Tally(selected, self.machinery.on_progress)
        # a timed exercise is timed beside the others on a core of its own where the grading has two or
        # more (a batch's grading has one: its slot), else after them; the longest untimed ones first
        schedule = Schedule(at_once=self.machinery.at_once, beside=self.warm is None and len(cores.available()) >= 2,
                            expected=store.durations(chapter.id) if self.options.compile_cache else {})
        both = BothSides(chapter, sub, self.seed, hosts, self.references,
                         submission_timeout_s=self.options.submission_timeout_s,
                         exercise_timeout_s=self.options.exercise_timeout_s, records=self.records,
                         started=lambda ex_id: tally.event(Progress(ex_id, "running")),
                         keep_timing=self.options.compile_cache, ahead=self.ahead, schedule=schedule,
                         device=self.device)

        code_notes = _code_notes(sub, chapter)

        def done(ex: ExerciseSpec, result: ExerciseResult) -> None:
            result.notes = code_notes.get(ex.id, []) + result.notes
            result = sub.annotate(ex.id, result)  # a notebook's notes, and the cells of failed checks
            tally.done(ex, mark_checked(result) if self.records is not None else result)

        untouched = sub.replay.untouched if sub.replay is not None else set()
        runnable = [ex for ex in selected if ex.id not in sub.problems and ex.id not in untouched]
        for ex in selected:
            if ex.id in untouched:
                done(ex, untouched_result(ex, T("notebook.untouched", functions=", ".join(ex.functions))))
            elif ex.id in sub.problems:
                done(ex, unrunnable(ex, sub.problems[ex.id]))
        interrupted = False
        if runnable:
            t0 = time.monotonic()
            student = hosts[0]
            student.listener = lambda session: tally.event(Progress(session.exercise, "running", session.phase,
                                                                    session.calling))
            for host in filter(None, hosts):
                if not host.alive():
                    host.start()

            def cancel() -> None:  # Ctrl-C: every process ends now; what the exercises in flight say is moot
                log.setLevel(logging.CRITICAL)
                for host in hosts:
                    if host is not None:
                        host.close()

            level = log.level
            try:
                schedule.run(runnable, both, done, cancel)
                if self.options.compile_cache:  # the order of the next grading's exercises
                    store.keep_durations(chapter.id, {ex_id: t["student_s"] for ex_id, t in both.timings.items()
                                                      if isinstance(t, dict) and ex_id in tally.results
                                                      and tally.results[ex_id].status != "not_attempted"})
                both.timings["exercises_s"] = round(time.monotonic() - t0, 3)
                self._completed = True
                both.timings["host_restarts"] = student.restarts
                if self.service is not None and self.service.hosts is not None:
                    both.timings["hosts_from"] = "warm service"
                # this process's, all threads
                both.timings["grader_cpu_s"] = round(time.process_time() - cpu_started, 3)
            except KeyboardInterrupt:
                interrupted = True
            finally:
                log.setLevel(level)
                if schedule.timed_beside:
                    both.timings["timed_beside"] = dict(schedule.timed_beside)
        report = Report(chapter=chapter.id, chapter_title=chapter.title, seed=self.seed, started_at=started_at,
                        duration_s=time.monotonic() - started, submission=sub.describe(),
                        environment=both.environment(), exercises=tally.finished(),
                        integrity=sub.integrity_findings(chapter) + both.runtime_findings,
                        sandbox=self.plan.describe(), timings=both.timings, interrupted=interrupted,
                        preview=self.records is not None,
                        device={**self.device.describe(), "note": self.device.fallback})
        recorded = (self.records.environment or {}).get("jax") if self.records is not None else None
        if recorded and report.environment.get("jax") and recorded != report.environment["jax"]:
            report.device["version_note"] = T("device.jax_version", jax=report.environment["jax"], recorded=recorded)
        if self.device.lease.turns[turns_before:]:  # this run's (watch mode runs a grading again)
            report.timings["device_turns"] = [dict(turn) for turn in self.device.lease.turns[turns_before:]]
        if self.machinery.programs:
            report.programs = both.programs_of(selected)
        mark_selection(report, [ex.id for ex in chapter.exercises])
        if interrupted:
            raise Interrupted(report, [ex.id for ex in selected if ex.id not in tally.results])
        return report

    def _start_hosts(self) -> tuple[HostProcess, HostProcess | None]:
        """The student's host (importing from the submission's folder, which stays where it is) and the
        reference's (none in a preview), started at once so that they are ready when a job needs them."""
        if self.hosts is None:
            chapter = self.chapter
            module_dir = self.scratch / "submission" / "modules"  # where submissions.load puts the modules
            module_dir.mkdir(parents=True)
            if self.warm is not None:  # a batch worker's: the reference's host is shared, the student's forked
                self.warm.start()
                self.hosts = (self.warm.student_host(module_dir, self.uids, self.options.limits),
                              None if self.records is not None else self.warm.reference())
                self.hosts[0].group = self.group
                self.hosts[0].start()
                return self.hosts
            student_cache, readable = self._compile_caches()
            service = self.service.hosts if self.service is not None else None  # its templates' folders are theirs
            self.hosts = (HostProcess(side="student", module_dir=module_dir,
                                      scratch=service.scratch["student"] if service else self.scratch / "student",
                                      plan=self.plan, uids=self.uids, compile_cache=student_cache,
                                      read_caches=readable, modules=chapter.child_modules, limits=self.options.limits,
                                      chapter_folders=chapter.import_folders, device=self.device,
                                      template=service.student if service else None),
                          None if self.records is not None else
                          reference_host(chapter, self.reference_dir,
                                         service.scratch["reference"].parent if service else self.scratch,
                                         limits=self.options.limits, compile_cache=readable[0] if readable else None,
                                         device=self.device, template=service.reference if service else None))
            for folder in (self.scratch / "submission", module_dir):
                os.chmod(folder, 0o755)
            self.hosts[0].group = self.group
            for host in filter(None, self.hosts):
                host.start()
        return self.hosts

    def _service(self) -> Warm | None:
        """The user's warm service for this grading's settings, where one can serve it (:func:`grader.runner.
        service.serves`), and the reference run (not a preview's records)."""
        if self.records is not None or not service_hosts.serves(self.plan, self.device):
            return None
        student_cache, readable = self._compile_caches()
        return service_hosts.connect_for(self.path, self.chapter, self.plan, sandbox=self.options.sandbox,
                                         reference_dir=self.reference_dir, student_cache=student_cache,
                                         readable=readable, disk_bytes=self.options.limits.disk_bytes,
                                         scratch_root=self.machinery.scratch_root)

    def _compile_caches(self) -> tuple[Path | None, list[Path]]:
        """The student's own compilation cache (where it can be used safely) and the caches its jobs
        may load from by key (the reference's)."""
        if not self.options.compile_cache:
            return None, []
        # A student's cache is seen by that student's jobs only: inside bubblewrap (mounted for
        # them alone), or as the user's own folder when there are no per-job uids. Under per-job
        # uids without bubblewrap, every uid could write into every student's: no cache there.
        own = self.plan.kind == "bwrap" or not self.plan.uid_isolation
        reference = store.reference_dir()
        return store.student_dir(self.path, self.group) if own else None, [reference] if reference is not None else []

    def close(self) -> None:
        """Stop every process this grading started; remove its scratch folder; keep the caches small."""
        hosts, self.hosts = [host for host in self.hosts or () if host], None
        stopping = [threading.Thread(target=host.stop, name=f"stop-{host.side}") for host in hosts
                    if self.warm is None or host.side != "reference"]  # a batch worker's serves the next grading
        for thread in stopping:  # both at once: each waits for its process to end
            thread.start()
        for thread in stopping:
            thread.join()
        if self.warm is not None:
            self.warm.release(self.scratch)
        else:
            sandboxes.release_folder(self.scratch)  # the jobs' capped folder (root)
            shutil.rmtree(self.scratch, ignore_errors=True)
            if self.service is not None:  # its hosts given back, or the service started, for the next grading
                self.service.close(self._completed)
                self.service = None
        if self.group is not None and self.uids is not None:
            self.uids.release(self.group)
            self.group = None
        store.tidy([host.compile_cache for host in hosts])


def _private(folder: Path, group: int | None) -> None:
    """A grading's scratch folder, entered by the grader and by its jobs alone: ``0700``, or, where the
    jobs have uids of their own, ``0710`` with the grading's ``group`` (which every job of it takes).
    Its ``owner`` file names the grading's process (:func:`grader.runner.sandbox.sweep_stale_scratch`)."""
    if group is not None:
        os.chown(folder, os.geteuid(), group)
        os.chmod(folder, 0o710)
    else:
        os.chmod(folder, 0o700)
    (folder / "owner").write_text(f"{os.getpid()}\n")


class _Tally:
    """The exercises graded so far, and what a display is told of them."""

    def __init__(self, selected: list[ExerciseSpec], on_progress: Callable[[Progress], None] | None):
        self.selected = selected
        self.on_progress = on_progress
        self.results: dict[str, ExerciseResult] = {}

    def done(self, ex: ExerciseSpec, result: ExerciseResult) -> None:
        self.results[ex.id] = result
        self.event(Progress(ex.id, "done", "ended", result=result))

    def finished(self) -> list[ExerciseResult]:
        """The exercises graded so far, in chapter order."""
        return [self.results[ex.id] for ex in self.selected if ex.id in self.results]

    def event(self, event: Progress) -> None:
        if self.on_progress is not None:
            event.done, event.total = len(self.results), len(self.selected)
            try:
                self.on_progress(event)
            except Exception:  # noqa: BLE001 - a display never stops grading
                log.exception("progress display failed")
