"""Where the reference's outcome of an exercise comes from, chosen once for a grading run.

A verdict compares the student's records with the trusted reference's, for the same
hidden inputs. Where those come from is one decision, made when the grading starts
(:func:`reference_source`), and read through one interface, :class:`ReferenceSource`,
by an untimed exercise (:meth:`~ReferenceSource.beside`) and by a timed exercise's
driver alike (:meth:`~ReferenceSource.recorded`, :meth:`~ReferenceSource.session`):

* :class:`RecordedReference`: a preview (a course release without its solutions, or
  ``grade dev`` handed records): the records shipped for the public seed stand for the
  reference's run, and no reference process exists.
* :class:`LiveReference`: the reference's host. An outcome known already for this
  exercise, seed, reference and machine (:class:`grader.outcomes.ReferenceCache`: this
  run's, a batch's, one kept on disk, one computed ahead for this seed by an earlier
  grading) is taken from there; otherwise a job runs beside the student's, started
  once the student's attempted something (a stub costs no reference run), retried once
  should it fail (it is trusted: a failure is transient), and kept, with the outcomes of
  the seeds drawn ahead that it computed too (:mod:`grader.ahead`). On a batch worker a
  timed exercise's reference job is the one kept for its exercise and seed
  (:mod:`grader.runner.kept`).

How fast the two sides run (which cores, when each job starts, what is timed beside
what) is :mod:`grader.scheduling`'s and :class:`grader.sides.BothSides`'s; nothing here
decides it.
"""
from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from grader.checks import GraderError
from grader.outcomes import ReferenceCache
from grader.runner.devices import DevicePlan
from grader.runner.host_handles import HostProcess
from grader.runner.job_sessions import JobOutcome, JobSession, run_job
from grader.runner.kept import KeptSession

if TYPE_CHECKING:
    from grader.chapter import Chapter, ExerciseSpec
    from grader.preview import ReferenceRecords

log = logging.getLogger("grader")

#: told of each outcome of a job that ran (where it ran: :meth:`grader.sides.BothSides.environment`)
Note = Callable[[JobOutcome], None]


class ReferenceSource(ABC):
    """The reference's outcomes of one grading run (see the module)."""

    #: the reference's outcomes are a preview's records (the checks know it: ``CheckContext.preview``)
    preview: bool = False

    @abstractmethod
    def beside(self, ex: ExerciseSpec, inputs: dict, student: JobSession) -> tuple[JobOutcome, JobOutcome | None]:
        """Run the student's job (``student``, not started) on ``inputs`` and give its outcome with the
        reference's for the same inputs: ``None`` where the student attempted nothing."""

    @abstractmethod
    def recorded(self, ex: ExerciseSpec, inputs: dict) -> JobOutcome | None:
        """For a timed exercise's driver: the outcome that stands for the reference's run (a preview's
        records), or ``None`` where a reference job runs (:meth:`session`)."""

    @abstractmethod
    def session(self, ex: ExerciseSpec, timeout_s: float) -> JobSession | KeptSession:
        """For a timed exercise's driver: the reference's job, not started."""

    def early(self, ex: ExerciseSpec, timeout_s: float) -> Callable[[], JobSession | KeptSession] | None:
        """How a timed exercise's reference job is made when it starts early (:meth:`grader.sides.BothSides.prestart`),
        or ``None`` where none runs."""
        return None

    def ran(self, exercise_id: str) -> bool:
        """Whether a reference job of this run computed the exercise's outcome (its work is then reported)."""
        return False


class RecordedReference(ReferenceSource):
    """A preview's: the records of a public seed stand for the reference's run (no process)."""

    preview = True

    def __init__(self, records: ReferenceRecords, seed: int, note: Note):
        self.records = records
        self.seed = seed
        self._note = note

    def beside(self, ex: ExerciseSpec, inputs: dict, student: JobSession) -> tuple[JobOutcome, JobOutcome | None]:
        student_out = run_job(student, inputs)
        self._note(student_out)
        return student_out, self.recorded(ex, inputs) if student_out.attempted() else None

    def recorded(self, ex: ExerciseSpec, inputs: dict) -> JobOutcome | None:
        return self.records.recorded(ex.id, self.seed, inputs)

    def session(self, ex: ExerciseSpec, timeout_s: float) -> JobSession | KeptSession:
        raise GraderError(f"{ex.id}: a preview runs no reference process")  # a driver uses ``recorded``


class LiveReference(ReferenceSource):
    """The reference's host, with the outcomes known already (see the module)."""

    def __init__(self, chapter: Chapter, host: HostProcess, cache: ReferenceCache, seed: int, *,
                 ahead: list[int], device: DevicePlan, note: Note, on_ahead: Callable[[str, int], None]):
        self.chapter = chapter
        self.host = host
        self.cache = cache
        self.seed = seed
        #: seeds drawn ahead (:mod:`grader.ahead`): a reference job that runs computes their outcomes too
        self.ahead = [s for s in ahead if s != seed]
        self.device = device
        self._note = note
        #: told how many seeds ahead an exercise's reference job computed
        self._on_ahead = on_ahead
        #: exercises whose outcome was known already: no reference job ran for them
        self.known: set[str] = set()

    def ran(self, exercise_id: str) -> bool:
        return exercise_id not in self.known

    def recorded(self, ex: ExerciseSpec, inputs: dict) -> JobOutcome | None:
        return None

    def session(self, ex: ExerciseSpec, timeout_s: float) -> JobSession | KeptSession:
        """A new job, or a batch worker's kept one (:mod:`grader.runner.kept`)."""
        host = self.host
        if host.kept is not None:
            return host.kept.session(ex.id, (self.seed, str(host.module_dir)), timeout_s,
                                     lambda: host.exercise_session(ex, timeout_s))
        return host.exercise_session(ex, timeout_s)

    def early(self, ex: ExerciseSpec, timeout_s: float) -> Callable[[], JobSession | KeptSession] | None:
        return lambda: self.session(ex, timeout_s)

    def beside(self, ex: ExerciseSpec, inputs: dict, student: JobSession) -> tuple[JobOutcome, JobOutcome | None]:
        key = ReferenceCache.key(self.chapter, ex, self.seed, self.host.module_dir,
                                 platform=self.device.platform_for(ex.device))
        cached = self.cache.get(key)
        if cached is not None:
            self.known.add(ex.id)
            student_out = run_job(student, inputs)
            self._note(student_out)
            return student_out, cached if student_out.attempted() else None
        box: dict[str, JobOutcome] = {}
        ahead = [s for s in self.ahead if not self.cache.has(ReferenceCache.for_seed(key, s))]
        computed: dict[int, dict] = {}

        def reference_when_attempted() -> None:
            while not student.attempted.wait(0.05):
                if box.get("student") is not None:
                    return  # the student's job ended having attempted nothing
            session = self.host.exercise_session(ex, ex.timeout_s * 2)
            box["reference"] = run_job(session, inputs, ahead=[ex.inputs(s) for s in ahead])
            computed.update(session.ahead)

        thread = threading.Thread(target=reference_when_attempted, daemon=True, name=f"reference-{ex.id}")
        thread.start()
        box["student"] = student_out = run_job(student, inputs)
        self._note(student_out)
        thread.join()
        outcome = box.get("reference")
        if outcome is None or not student_out.attempted():
            return student_out, None
        if outcome.end not in ("done", "cancelled") and not self.host.closed:
            # the reference is trusted: a failure is transient or a bug (not a grading stopped with Ctrl-C)
            log.warning("reference run of %s ended with %s; retrying once", ex.id, outcome.end)
            computed.clear()
            outcome = run_job(self.host.exercise_session(ex, ex.timeout_s * 2), inputs)
        self._note(outcome)
        if outcome.end == "done":
            self.cache.put(key, outcome)
            self._keep_ahead(ex, key, outcome, {ahead[i]: records for i, records in computed.items()
                                                if 0 <= i < len(ahead)})
        return student_out, outcome

    def _keep_ahead(self, ex: ExerciseSpec, key: tuple, outcome: JobOutcome, computed: dict[int, dict]) -> None:
        """Keep the reference's outcome for each seed drawn ahead that its job computed (:mod:`grader.ahead`):
        the same run's, with that seed's records."""
        for seed, records in computed.items():
            self.cache.put(ReferenceCache.for_seed(key, seed),
                           replace(outcome, records=records, arrivals={}, work={}, duration_s=0.0))
        if computed:
            self._on_ahead(ex.id, len(computed))


def reference_source(chapter: Chapter, host: HostProcess | None, cache: ReferenceCache, seed: int, *,
                     records: ReferenceRecords | None, ahead: list[int], device: DevicePlan, note: Note,
                     on_ahead: Callable[[str, int], None]) -> ReferenceSource:
    """The source of a grading run's reference outcomes: a preview's ``records``, else the reference's ``host``."""
    if records is not None:
        return RecordedReference(records, seed, note)
    if host is None:
        raise GraderError("a grading that is not a preview needs the reference's host")
    return LiveReference(chapter, host, cache, seed, ahead=ahead, device=device, note=note, on_ahead=on_ahead)
