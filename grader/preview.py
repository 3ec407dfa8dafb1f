"""Preview grading: the reference's records for one public seed, in place of its run.

A course release (``grade dev release``) gives students the exercises and the grader,
never the reference solutions. What the checks compare a student's records with comes
instead from *reference records*: what the reference's job recorded for every exercise
on the hidden inputs of one public seed, stored as data in the chapter's folder
(``reference-records.json``: JSON, arrays as :mod:`grader.wire` writes them, never
pickle and never code). Grading with these records is a *preview*:

* it always uses the public seed (:attr:`ReferenceRecords.seed`); another seed has no records;
* each exercise's record is keyed by that seed and a digest of its hidden inputs, as
  the release's own ``inputs(rng)`` draws them, so a record is used only for exactly
  the inputs it was made on;
* a check of the reference's behaviour on the student's device (a speed-up) cannot be
  judged faithfully from records: the chapter's own bar stands in, and the report marks
  the check as decided at final grading (see :data:`FINAL_CATEGORIES`).

Final grading (the instructor's ``grade`` with the full repository) runs the real
reference with a fresh secret seed; these records play no part in it.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from grader import wire
from grader.protocol import ToJob, message
from grader.runner.job_sessions import JobOutcome

if TYPE_CHECKING:
    from grader.chapter import Chapter, ExerciseSpec
    from grader.results import ExerciseResult
    from grader.runner.host_handles import HostProcess

log = logging.getLogger("grader")
SCHEMA = "grade-records/1"
#: the records' file in a release's chapter folder
FILENAME = "reference-records.json"
#: checks of these categories need the reference's behaviour on the grading device: a
#: preview judges them against the chapter's own bar, and final grading decides them
FINAL_CATEGORIES = ("speedup",)


class RecordsError(Exception):
    """A records file that cannot be used; the message says why and what to do."""


def mark_checked(result: ExerciseResult) -> ExerciseResult:
    """Mark each check of a preview's exercise result as judged now, or decided at final
    grading (:data:`FINAL_CATEGORIES`); returns ``result``."""
    for check in result.checks:
        check.checked = "final" if check.category in FINAL_CATEGORIES else "now"
    return result


def inputs_digest(inputs: dict) -> str:
    """A fingerprint of an exercise's hidden inputs (its arrays' bytes included)."""
    text = json.dumps(wire.encode(inputs), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class ReferenceRecords:
    """The reference's records of a chapter for one public seed."""

    #: the chapter's id
    chapter: str
    #: the public seed: the only seed these records answer for
    seed: int
    #: where the reference ran: ``python``, ``jax``, ``jaxlib``, ``backend``, ``device_kind``
    environment: dict = field(default_factory=dict)
    #: by exercise id: ``inputs_sha256`` (the digest of its hidden inputs) and ``records``
    #: (what the reference's probe recorded, as :func:`grader.wire.encode` writes it)
    exercises: dict[str, dict] = field(default_factory=dict)

    def outcome(self, exercise_id: str, seed: int, inputs: dict) -> JobOutcome | None:
        """The reference's outcome for these very inputs, or ``None`` (another seed, other inputs)."""
        entry = self.exercises.get(exercise_id)
        if entry is None or seed != self.seed or entry.get("inputs_sha256") != inputs_digest(inputs):
            return None
        recorded = entry.get("records", entry.get("observations"))  # a release's file written before the rename
        return JobOutcome(end="done", side="reference", records=wire.decode(recorded))

    def recorded(self, exercise_id: str, seed: int, inputs: dict) -> JobOutcome:
        """:meth:`outcome`, or a failed outcome when no record fits (judged as the reference's failure)."""
        outcome = self.outcome(exercise_id, seed, inputs)
        if outcome is None:
            log.error("no reference record of %s for seed %s and these inputs", exercise_id, seed)
            return JobOutcome(end="not_started", side="reference", detail={"records": "none for these inputs"})
        return outcome

    def to_json(self) -> str:
        data = {"schema": SCHEMA, "chapter": self.chapter, "seed": self.seed, "environment": self.environment,
                "exercises": self.exercises}
        return json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n"

    @classmethod
    def load(cls, path: Path) -> "ReferenceRecords":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise RecordsError(f"{path}: cannot be read ({exc}); build the release again") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("seed"), int):
            raise RecordsError(f"{path}: not a {SCHEMA} file; build the release again")
        return cls(chapter=str(data.get("chapter")), seed=data["seed"], environment=data.get("environment") or {},
                   exercises=data.get("exercises") or {})


def release_records(chapter: Chapter) -> ReferenceRecords | None:
    """The records a course release ships in its chapter folder, when the solutions are not
    there (a student's copy of the release); else ``None``. Raises :class:`RecordsError`."""
    path = Path(chapter.folder) / FILENAME
    if Path(chapter.solutions).is_dir() or not path.exists():
        return None
    records = ReferenceRecords.load(path)
    if records.chapter != chapter.id:
        raise RecordsError(f"{path} holds the records of chapter {records.chapter}, not {chapter.id}")
    return records


def preview_records(chapter: Chapter, *, preview: ReferenceRecords | None, reference_dir: Path | None,
                    seed: int | None) -> ReferenceRecords | None:
    """The records a grading previews with (its options' ``preview``, ``reference_dir`` and ``seed``):
    ``preview``, or a course release's own unless another reference is named; ``None``: grade with the
    reference. Raises :class:`~grader.submission.SubmissionError` (one line) when they cannot be used."""
    from grader.i18n import T
    from grader.submission import SubmissionError

    try:
        records = preview or (None if reference_dir else release_records(chapter))
    except RecordsError as exc:
        raise SubmissionError(T("release.records_unusable", detail=str(exc))) from None
    if records is not None and seed not in (None, records.seed):  # the records answer for it only
        raise SubmissionError(T("release.seed_fixed", seed=seed, public=records.seed))
    return records


def _reference_run(host: HostProcess, ex: ExerciseSpec, seed: int) -> tuple[JobOutcome, dict]:
    """One reference job on the inputs of ``seed`` (tried twice: the reference is trusted, so
    a failure is transient or a bug), and those inputs. A timed exercise's probe serves a
    driver once its records are made: it is told to stop then."""
    from grader.primitives.comparison import await_record
    from grader.primitives.timing import READY

    inputs = ex.inputs(seed)
    for _ in range(2):
        session = host.exercise_session(ex, ex.timeout_s * 2)
        session.options["all_records"] = True  # judged against itself below: it plays the student too
        try:
            if session.start() and session.send_inputs(inputs):
                if ex.timed:
                    await_record(session, READY, time.monotonic() + ex.timeout_s * 2)
                    session.send(message(ToJob.STOP))
                session.run_to_end()
        finally:
            outcome = session.finish()
        if outcome.end == "done":
            break
    return outcome, inputs


def read_by_checks(ex: ExerciseSpec, outcome: JobOutcome, inputs: dict, seed: int) -> set[str]:
    """The keys of the reference's records that the exercise's checks read.

    The reference is judged against itself, in a preview's context: every check passes
    (or meets a record only a live run has, such as a timing), reading every record of
    the reference that judging a submission needs, failure diagnoses included (they
    compare with records the passing path reads too). Only those go into a release: the
    rest (compile windows naming the reference's helpers, what it printed) is not data a
    check needs.
    """
    from grader.checks import ARRIVALS, NAMES, CheckContext, Records
    from grader.verdicts import Termination, run_checks

    data = {**outcome.records, ARRIVALS: dict(outcome.arrivals)}
    data.update({NAMES(name=name): {**described, "file": ex.filename} for name, described in outcome.names.items()})
    reference = Records("reference", dict(outcome.records))
    run_checks(ex, Records("student", data, module_file=ex.filename), reference,
               CheckContext(exercise=ex, inputs=inputs, seed=seed, preview=True), Termination())
    return reference.read


def record_reference(chapter: Chapter, seed: int, *, reference_dir: Path | None = None,
                     scratch_root: Path | None = None) -> ReferenceRecords:
    """Run the reference's job of every exercise that needs one on the inputs of ``seed``.

    The jobs run as in any grading (same host, same probe, two at a time, a timed
    exercise alone); only the records the checks read are kept (:func:`read_by_checks`).
    Raises :class:`RecordsError` when a job of the reference fails.
    """
    from grader.runner.reference_host import reference_jobs

    reference_dir = Path(reference_dir or chapter.solutions)
    if not reference_dir.is_dir():
        raise RecordsError(f"no reference solutions at {reference_dir}: records are made from the full repository")
    records = ReferenceRecords(chapter=chapter.id, seed=seed)
    wanted = [ex for ex in chapter.exercises if ex.needs_reference]
    outcomes = reference_jobs(chapter, wanted, lambda host, ex: _reference_run(host, ex, seed),
                              reference_dir=reference_dir, at_once=min(2, os.cpu_count() or 1),  # as grading does
                              scratch_root=scratch_root, prefix="grade-records-")
    for ex in wanted:
        outcome, inputs = outcomes[ex.id]
        if outcome.end != "done":
            raise RecordsError(f"the reference's job of {ex.id} ended with {outcome.end}: "
                               f"{outcome.detail or outcome.output[-500:]}")
        records.environment = records.environment or {k: v for k, v in (outcome.env or {}).items()
                                                      if k in ("python", "jax", "jaxlib", "backend", "device_kind")}
        kept = read_by_checks(ex, outcome, inputs, seed)
        records.exercises[ex.id] = {"inputs_sha256": inputs_digest(inputs), "records": wire.encode(
            {key: value for key, value in outcome.records.items() if key in kept})}
    return records
