"""A batch: a whole class graded in one command (:func:`run_batch`).

One seed for the class (``--seed``, else the one the results folder's manifest
recorded, so that running the same command again resumes, else a fresh one); the
reference run once for the class and shipped to every grading; each student graded in
a worker subprocess by an executor (here, or on a Dask cluster); each result written
as it arrives (the student's reports, then the manifest), so an interrupted batch
keeps what was graded; at the end the gradebook, the exports and the class summary,
all from the students' reports.

The manifest (``RESULTS/manifest.json``) records, for every student graded, the
digest of their files, the seed, the exercises and the digest of the chapter and
reference: a student whose entry matches and whose report is there is not graded
again, unless ``force``.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from grader.batch import filling, gradebook, layouts, reference as references, roster, summary as summaries, worksheets
from grader.batch.gradebook import Row
from grader.batch.manifest import FINAL_FAILURES, Manifest, batch_key, file_digest
from grader.batch.similarity import has_programs, keep_programs
from grader.chapter import Chapter, ChapterError, UnknownExercise, load_chapter
from grader.grading import GradeOptions, new_seed
from grader.i18n import T, TextError
from grader.runner import sandbox as sandboxes
from grader.runner.job_sessions import Limits

if TYPE_CHECKING:
    from grader.batch.similarity import SimilarityResult

log = logging.getLogger("grader")

#: time a worker gets beyond the submission's own limit (starting JAX, waiting for cores)
WORKER_SLACK_S = 300.0


class BatchError(TextError):
    """The batch cannot start; ``text`` is one line for the user (exit status 2)."""


@dataclass
class BatchOptions:
    """How to grade a class; the defaults are the ``grade batch`` command's."""

    #: the chapter's id (``ch4``)
    chapter: str
    #: the results folder (``RESULTS/``)
    out: Path
    #: grade only these exercises (``-k``); empty: all
    exercises: tuple[str, ...] = ()
    #: the class's seed; ``None``: the manifest's, else a fresh one
    seed: int | None = None
    #: gradings at once: local worker processes, or a local Dask cluster's workers
    jobs: int = 1
    #: ``local`` or ``dask``
    executor: str = "local"
    #: a running Dask scheduler's address (``tcp://host:8786``); ``None``: start a local cluster
    scheduler: str | None = None
    #: ``auto``, ``bwrap`` or ``process``
    sandbox: str = "auto"
    #: grade with a sandbox weaker than bubblewrap with per-job uids (the summary says so)
    allow_weak_sandbox: bool = False
    #: each submission's time limit, seconds
    timeout_s: float = 900.0
    #: caps every exercise's time limit, seconds
    exercise_timeout_s: float | None = None
    #: memory per exercise's process, MiB
    memory_mb: int = 4096
    #: grade every student again, even those already graded with this seed
    force: bool = False
    #: the language of the reports and the summary
    lang: str = "en"
    #: how the download is laid out: ``auto`` (told from its names) or one of :data:`grader.batch.layouts.LAYOUTS`
    layout: str = "auto"
    #: the assignment's column in the platform's gradebook import (Canvas: ``Chapter 4 (98765)``); ``""``: the
    #: chapter's title
    assignment: str = ""
    #: the key that seals the results (the manifest's HMAC); ``None``: the batch's own, kept in the grader's store
    sign_key: bytes | None = None
    #: the platform's own grading file to fill (Moodle's worksheet, Canvas's export, Gradescope's roster);
    #: written back under its own name in ``out``
    gradebook: Path | None = None
    #: Moodle: the download's folders are groups' (the assignment's "Students submit in groups")
    teams: bool = False
    #: record what each student's functions trace to, and rank the pairs of students alike
    #: (:mod:`grader.batch.similarity`): ``similarity.html`` and ``similarity.csv``, for the instructor
    similarity: bool = False


@dataclass
class BatchResult:
    """What a batch did."""

    #: the gradebook's rows, one a student, by name
    rows: list[Row]
    #: students graded by this run
    graded: list[str] = field(default_factory=list)
    #: students skipped because already graded (resume)
    skipped: list[str] = field(default_factory=list)
    #: the files written: ``grades``, ``junit``, ``summary_md``, ``summary_html``, ``manifest``
    paths: dict[str, Path] = field(default_factory=dict)
    #: the class's seed
    seed: int = 0
    #: whether Ctrl-C stopped it (what was graded is kept; the same command resumes)
    interrupted: bool = False
    #: the class as the download holds it (its layout, and what became of each file)
    klass: "layouts.Klass | None" = None
    #: every file written for a student by this run, as written (``<student>/<file>``: text): the
    #: grader's own record, from which a file changed during the batch is written again
    written: dict[str, str] = field(default_factory=dict)
    #: the files that were changed during the batch and written again from that record
    repaired: list[str] = field(default_factory=list)
    #: the platform's own file to fill (``--gradebook``), as read
    sheet: "worksheets.Sheet | None" = None
    #: the class's similar pairs (``--similarity``)
    similarity: "SimilarityResult | None" = None


def run_batch(submissions: Path, options: BatchOptions, *, executor=None,
              on_result: Callable[[Row, int, int], None] | None = None,
              on_plan: Callable[[int, int, int, layouts.Klass], None] | None = None) -> BatchResult:
    """Grade the class in ``submissions``; raises :class:`BatchError` when it cannot start.

    ``on_plan(to_grade, skipped, seed, klass)`` is told once what will be graded; ``on_result(row,
    done, total)`` after each student. On Ctrl-C the results so far are written and
    ``KeyboardInterrupt`` is raised again, with the partial :class:`BatchResult` as its
    ``result`` attribute.
    """
    chapter, selected = _chapter(options)
    try:
        klass = layouts.read_class(Path(submissions), options.out, options.layout, teams=options.teams)
    except roster.ClassError as exc:
        raise BatchError(exc.text) from None
    sheet = None
    try:
        if options.gradebook is not None:
            klass, sheet = _sheet(klass, chapter, options, submissions)
        return _run(klass, chapter, selected, options, executor, on_result, on_plan, sheet)
    finally:
        klass.download.close()


def _sheet(klass: layouts.Klass, chapter: Chapter, options: BatchOptions, submissions: Path):
    """The platform's own file (``--gradebook``), read before any grading (a wrong file is one line
    now, not after the class); a Moodle worksheet with a Group column makes the download's folders
    groups', whose members it lists. Returns the class (read again as groups when so) and the sheet."""
    path = Path(options.gradebook)
    if options.exercises:  # a part of the chapter is never filled as its total (the summary says how to)
        raise BatchError(T("batch.sheet.partial", path=str(path)))
    if klass.layout == "folders":
        raise BatchError(T("batch.sheet.wrong_platform", path=str(path), layout=klass.layout))
    if path.name.casefold() in roster.RESERVED:
        raise BatchError(T("batch.sheet.reserved", path=str(path)))
    try:
        sheet = worksheets.read(path, klass.layout, assignment=options.assignment,
                                chapter_names=(f"{chapter.title.en} ({chapter.id})", chapter.title.en, chapter.title.zh,
                                               chapter.id))
    except worksheets.WorksheetError as exc:
        raise BatchError(exc.text) from None
    if klass.layout == "moodle" and "team" in sheet.columns and klass.kind != "groups":
        klass.download.close()
        klass = layouts.read_class(Path(submissions), options.out, options.layout, teams=True)
    filling.members(sheet, klass.students)
    return klass, sheet


def _run(klass: layouts.Klass, chapter: Chapter, selected: list, options: BatchOptions, executor,
         on_result: Callable[[Row, int, int], None] | None,
         on_plan: Callable[[int, int, int, layouts.Klass], None] | None, sheet=None) -> BatchResult:
    students = klass.students
    plan = _sandbox(options)
    out = Path(options.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BatchError(T("batch.error.out", path=str(out), detail=exc.strerror or str(exc))) from None
    manifest = Manifest.load(out, chapter.id, batch_key(out, options.sign_key))
    seed = options.seed if options.seed is not None else manifest.seed or new_seed()
    digest = references.outcomes_digest(chapter)
    words = lambda text: chapter.catalog.render(text, options.lang)  # noqa: E731
    ids = [ex.id for ex in selected]
    manifest.start(seed, ids, digest)
    rows: dict[str, Row] = {}
    tasks: list[tuple[str, dict]] = []
    result = BatchResult([], seed=seed, klass=klass, sheet=sheet)
    for student in students:
        if student.problem is not None:
            rows[student.key] = gradebook.row_from_failure(student.name, student.status, words(student.problem))
            continue
        try:
            packed = roster.pack(student)
        except roster.ClassError as exc:
            rows[student.key] = gradebook.row_from_failure(student.name, "unreadable", words(exc.text))
            continue
        key = {"digest": packed["digest"], "seed": seed, "exercises": ids, "reference": digest}
        previous = None if options.force else manifest.graded(student.key, key, out)
        if previous is not None and options.similarity and previous.status in gradebook.GRADED \
                and not has_programs(out, student.key):  # graded before without its programs: again, with them
            previous = None
        if previous is not None:
            rows[student.key] = previous
            result.skipped.append(student.key)
            continue
        manifest.pending[student.key] = key
        tasks.append((student.key, {"name": student.key, "display": student.display, "submission": packed,
                                    "chapter": chapter.id, "exercises": ids, "seed": seed, "lang": options.lang,
                                    "options": _settings(options)}))
    if on_plan is not None:
        on_plan(len(tasks), len(result.skipped), seed, klass)
    done = [0]

    by_key = {student.key: student for student in students}

    def collect(name: str, outcome: dict) -> None:
        row = _store(name, outcome, out, manifest, result.written).of(by_key[name])
        rows[name] = row
        if outcome.get("ok"):
            result.graded.append(name)
        done[0] += 1
        if on_result is not None:
            on_result(row, done[0], len(tasks))

    if tasks:
        executor = executor or make_executor(options)
        try:
            # its workers start (and import JAX) while the reference runs
            executor.prepare({k: v for k, v in tasks[0][1].items() if k != "submission"}, len(tasks))
            shipped = references.compute(chapter, seed, GradeOptions(
                chapter=chapter.id, exercises=tuple(ids), seed=seed, sandbox=options.sandbox,
                limits=Limits(memory_bytes=options.memory_mb << 20)))
            executor.run(tasks, shipped, options.timeout_s + WORKER_SLACK_S, collect)
        except KeyboardInterrupt as stop:
            result.interrupted = True
            executor.stop()  # its workers, also when the interrupt came before they had a student
            for name, _ in tasks:
                rows.setdefault(name, gradebook.row_from_failure(by_key[name].name, "interrupted",
                                                                 words(T("batch.row.interrupted"))))
            _finish(result, rows, students, chapter, selected, options, plan, words, manifest)
            stop.result = result  # type: ignore[attr-defined]
            raise
    if options.similarity:  # before the summary, which lists the pairs; sealed with it
        from grader.batch.similarity import similarity_report

        result.similarity = similarity_report(out, chapter, lang=options.lang, seed=seed,
                                              graded=[key for key, row in rows.items()
                                                      if row.status in gradebook.GRADED])
    _finish(result, rows, students, chapter, selected, options, plan, words, manifest)
    if result.similarity is not None:  # beside the grades; not sealed: grade similarity writes them again
        result.paths["similarity_html"] = result.similarity.paths["html"]
        result.paths["similarity_csv"] = result.similarity.paths["csv"]
    return result


def _platform_file(result: BatchResult, students, rows: dict[str, Row], points: float, out: Path, words):
    """The platform's own file filled (``--gradebook``) and what the summary says of the import files:
    its notes, and each row left as it was or graded student it lacks (who, why)."""
    klass, notes, listed = result.klass, [], []
    if klass is None:
        return notes, listed
    if result.sheet is not None:
        graded = [(s, rows[s.key]) for s in students if s.key in rows]
        done = filling.fill(result.sheet, graded, points, words)
        path = out / result.sheet.path.name
        gradebook.write_text(path, done.text)
        result.paths["gradebook"] = path
        notes.append(T("batch.sheet.filled", path=path.name, filled=done.filled, left=len(done.left),
                       missing=len(done.missing)))
        notes += done.notes
        listed = done.left + done.missing
    elif klass.layout == "moodle":
        notes.append(T("batch.summary.moodle_max", points=f"{points:g}"))
        groups = [s.name for s in students if s.group]
        if groups:
            notes.append(T("batch.summary.moodle_groups", n=len(groups), names=", ".join(groups[:10])))
    if klass.kind == "anonymous":
        notes.append(T("batch.summary.canvas_anonymous"))
    return notes, listed


def make_executor(options: BatchOptions):
    from grader.batch.executors import DaskExecutor, LocalExecutor

    if options.executor == "dask":
        return DaskExecutor(options.jobs, options.scheduler)
    return LocalExecutor(options.jobs)


def _chapter(options: BatchOptions) -> tuple[Chapter, list]:
    try:
        chapter = load_chapter(options.chapter)
        return chapter, chapter.select(options.exercises)
    except ChapterError as exc:
        raise BatchError(T("error.chapter", detail=str(exc))) from None
    except UnknownExercise as exc:
        raise BatchError(T("error.unknown_exercise", item=exc.item, chapter=exc.chapter, known=exc.known)) from None


def _sandbox(options: BatchOptions) -> sandboxes.SandboxPlan:
    """The sandbox this machine gives; a weaker one than bwrap+uid only when allowed."""
    try:
        plan = sandboxes.plan(options.sandbox)
    except RuntimeError as exc:
        raise BatchError(T("error.chapter", detail=str(exc))) from None
    if not strong(plan.describe()) and not options.allow_weak_sandbox:
        raise BatchError(T("batch.error.weak_sandbox", sandbox=_word(plan.describe())))
    return plan


def strong(sandbox: dict) -> bool:
    """Whether a report's sandbox is the one a class needs: bubblewrap with per-job uids."""
    return sandbox.get("kind") == "bwrap" and bool(sandbox.get("uid_isolation"))


def _word(sandbox: dict) -> str:
    return sandbox.get("kind", "?") + ("+uid" if sandbox.get("uid_isolation") else "")


def _settings(options: BatchOptions) -> dict:
    return {"sandbox": options.sandbox, "allow_weak_sandbox": options.allow_weak_sandbox,
            "timeout_s": options.timeout_s, "exercise_timeout_s": options.exercise_timeout_s,
            "memory_mb": options.memory_mb, "similarity": options.similarity}


def _store(name: str, outcome: dict, out: Path, manifest: "Manifest", record: dict[str, str]) -> Row:
    """Write one student's result as it arrives: their reports first (kept in ``record`` too), then the
    manifest's entry."""
    if not outcome.get("ok"):
        row = gradebook.row_from_failure(name, outcome.get("status", "crash"), outcome.get("message", ""),
                                         outcome.get("duration_s", 0.0))
        if row.status in FINAL_FAILURES:  # the same files would fail the same way: kept for resume
            manifest.record(name, {**manifest.pending.pop(name), "status": row.status, "report": None,
                                   "detail": row.detail})
        return row
    if outcome.get("programs"):  # the instructor's alone: beside the results, never in the student's folder
        keep_programs(out, name, outcome["programs"])
    written = {}
    for file_name, text in outcome["files"].items():
        path = out / name / Path(file_name).name
        gradebook.write_text(path, text)
        written[path.name] = file_digest(path)
        record[f"{name}/{path.name}"] = text
    report = json.loads(outcome["files"][outcome["report"]])
    row = gradebook.row_from_report(name, report)
    manifest.record(name, {**manifest.pending.pop(name), "status": row.status, "report": outcome["report"],
                           "files": written,
                           "duration_s": round(outcome.get("duration_s", 0.0), 3), "cpus": outcome.get("cpus"),
                           "reference_source": outcome.get("reference"),
                           "graded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")})
    return row


def _finish(result: BatchResult, rows: dict[str, Row], students, chapter: Chapter, selected, options: BatchOptions,
            plan: sandboxes.SandboxPlan, words, manifest: "Manifest") -> None:
    """The gradebook, the exports and the summary, from every student's row; a student's file that was
    changed while the batch ran (a weaker sandbox lets a student's code reach the results) is written
    again from the grader's own record first, and the summary says so."""
    out = Path(options.out)
    for relative, text in result.written.items():
        if file_digest(out / relative) != hashlib.sha256(text.encode("utf-8")).hexdigest():
            gradebook.write_text(out / relative, text)
            result.repaired.append(relative)
    result.rows = [rows[s.key].of(s) for s in students if s.key in rows]
    for student, row in zip([s for s in students if s.key in rows], result.rows):
        if student.group and not student.people and not row.detail:  # the row names the group, and the way out
            row.detail = words(T("batch.note.moodle_group", group=student.group, id=student.group_id or "–"))
    max_points = {ex.id: ex.max_score for ex in selected}
    klass = result.klass
    partial = len(selected) < len(chapter.exercises)  # -k: no total of the chapter for a platform's gradebook
    result.paths = gradebook.write_exports(result.rows, max_points, out, chapter.id,
                                           layout=klass.layout if klass else "folders",
                                           assignment=options.assignment or f"{words(chapter.title)} ({chapter.id})",
                                           uses=klass.files if klass else None, kind=klass.kind if klass else "people",
                                           modified=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                                           partial=partial)
    manifest.exports(out, list(result.paths.values()))  # the grades sealed before anything else is written
    try:
        platform_notes, sheet_rows = _platform_file(result, students, rows, sum(max_points.values()), out, words)
    except Exception as exc:  # noqa: BLE001 - the class's grades are written and sealed: the summary says why not
        log.exception("filling %s failed", result.sheet.path if result.sheet is not None else "the platform's file")
        platform_notes, sheet_rows = [T("batch.sheet.fill_failed", detail=f"{type(exc).__name__}: {exc}"[:300])], []
    if partial and klass is not None and klass.layout in ("canvas", "moodle"):
        platform_notes.insert(0, T("batch.summary.partial_no_import", ids=", ".join(ex.id for ex in selected)))
    weak = sorted({_word(r.report["sandbox"]) for r in result.rows if r.report and not strong(r.report["sandbox"])})
    if not weak and not strong(plan.describe()):
        weak = [_word(plan.describe())]
    warning = T("batch.summary.weak_sandbox", sandbox=", ".join(weak)) if weak else None
    notes = []
    from grader.batch import cpus

    if options.executor == "local" and not cpus.slots(options.jobs) and options.jobs > 1:
        notes.append(T("batch.summary.shared_cores", jobs=options.jobs, cpus=len(cpus.machine_cpus())))
    if result.interrupted:
        notes.append(T("batch.summary.interrupted"))
    if result.repaired:
        notes.insert(0, T("batch.summary.repaired", n=len(result.repaired), files=", ".join(result.repaired[:10])))
    download: list[tuple[str, object]] = []
    if klass is not None:
        notes.insert(0, layouts.describe(klass))
        late = [s.name for s in students if s.late]
        if late:
            notes.append(T("batch.summary.late", n=len(late),
                           names=", ".join(late[:20]) + (" …" if len(late) > 20 else "")))
        download = [(s.name, note) for s in students for note in s.notes]
    notes += platform_notes
    chapter_words = f"{words(chapter.title)} ({chapter.id})"
    summary = summaries.summarize(result.rows, chapter=chapter_words, seed=result.seed,
                                  max_score=sum(max_points.values()), warning=warning, notes=notes, download=download,
                                  sheet=sheet_rows)
    if result.similarity is not None:  # the instructor's page: the pairs at its top, the whole list beside it
        summary.similar = [summaries.SimilarPair(p.exercise, p.students, p.score, p.same_program, p.equals_reference)
                           for p in result.similarity.pairs[:summaries.TOP]]
        summary.similar_total = len(result.similarity.pairs)
    result.paths["summary_md"] = out / "summary.md"
    result.paths["summary_html"] = out / "summary.html"
    gradebook.write_text(result.paths["summary_md"], summaries.render_markdown(summary, words))
    gradebook.write_text(result.paths["summary_html"], summaries.render_html(summary, words, options.lang))
    manifest.exports(out, [path for key, path in result.paths.items()])  # sealed as written
    result.paths = {key: path for key, path in result.paths.items() if not key.startswith("results:")}
    result.paths["manifest"] = manifest.path
