"""What grading produces: plain, documented data that renderers turn into reports.

Results hold :class:`~grader.i18n.Text` where a sentence belongs, so one grading run
can be rendered in either language; :func:`report_to_dict` renders them into the
``grade-report/1`` JSON object of the contract.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Callable, Sequence

from grader.i18n import Bilingual, Catalog, T, Text, Words

SCHEMA = "grade-report/1"

#: check statuses, in the order a summary lists them
CHECK_STATUSES = ("passed", "failed", "error", "timeout", "not_attempted", "skipped")
#: exercise statuses
EXERCISE_STATUSES = ("passed", "partial", "failed", "not_attempted", "error", "timeout")
CATEGORIES = ("numeric", "compile", "purity", "speedup", "harness", "structure")


@dataclass
class CheckResult:
    """The verdict of one hidden check."""

    #: the check's id in its exercise (``piecewise.values``)
    id: str
    #: what it checks, in both languages (a :class:`~grader.i18n.Bilingual`)
    title: Bilingual
    #: one of :data:`CATEGORIES`
    category: str
    #: the points it got (``max_points`` when passed, else 0)
    points: float
    #: what it is worth
    max_points: float
    #: one of :data:`CHECK_STATUSES`: ``passed``, ``failed``, ``error`` (it could not be
    #: judged: the process crashed, or the grader's own error), ``timeout``, ``not_attempted``
    #: (the function still raises ``NotImplementedError``), ``skipped`` (a check it depends
    #: on did not pass)
    status: str
    #: what was seen, a :class:`~grader.i18n.Text` (or a list of them) put into words late
    message: Words = None
    #: what to do about it, naming the chapter's section; ``None`` when no hint applies
    hint: Words = None
    #: the numbers behind the verdict (plain JSON-ready data)
    measured: dict = field(default_factory=dict)
    #: which hint ``hint`` is: ``check`` (the check's own), ``check:<name>`` (one of its
    #: named hints, for the mistake the records show), or a grader message key (for
    #: example ``hint.exception``: an exception that is not the mistake the check looks for)
    hint_id: str = "check"
    #: ``now``: the verdict is this run's; ``final``: a course release's preview cannot judge
    #: the check faithfully (a speed-up without the reference), final grading decides it
    checked: str = "now"


class _Scored:
    """``score`` and ``max_score``: sums over the parts (checks of an exercise, exercises of a report),
    rounded so that 0.1 + 0.2 reads 0.3."""

    def _parts(self) -> list[tuple[float, float]]:
        raise NotImplementedError

    @property
    def score(self) -> float:
        return round(sum(points for points, _ in self._parts()), 6)

    @property
    def max_score(self) -> float:
        return round(sum(most for _, most in self._parts()), 6)


@dataclass
class ExerciseResult(_Scored):
    """One exercise: its checks, and how its child process ended."""

    #: the exercise's id (``ex02_where``)
    id: str
    #: its title, in both languages
    title: Bilingual
    #: the section of the chapter it practises
    section: str
    #: its checks' verdicts, in the chapter's order
    checks: list[CheckResult]
    #: one of :data:`EXERCISE_STATUSES` (see :func:`exercise_status`)
    status: str = "failed"
    #: why the exercise could not be graded fully (a :class:`~grader.i18n.Text`), else ``None``
    error: Words = None
    #: what the student's code printed: head and tail, up to the job's limits
    output: str = ""
    #: how long grading it took, in seconds
    duration_s: float = 0.0
    #: True when the exercise's module could not be run at all: its file is missing,
    #: has a syntax error or failed to import, the run was out of time before it
    #: started, or the grader failed before any call. Every check then carries
    #: ``error`` as its message and a report shows one line (what, where, what to do)
    #: instead of the checks. Set by grading; :func:`is_unrunnable` also recognises
    #: such a result by its checks.
    unrunnable: bool = False
    #: what the student should know about how the exercise's code was read (a
    #: :class:`~grader.i18n.Text` each), e.g. a notebook's function defined in two cells
    #: (the later one is graded); empty for most
    notes: list = field(default_factory=list)
    #: where its student's job ran: ``backend`` (``cpu``, ``tpu``, ``gpu``) and ``device_kind`` (``TPU v5 lite``);
    #: empty where no job ran
    device: dict = field(default_factory=dict)

    def _parts(self) -> list[tuple[float, float]]:
        return [(c.points, c.max_points) for c in self.checks]


@dataclass
class Report(_Scored):
    """One graded submission."""

    #: the chapter's id
    chapter: str
    #: the chapter's title, in both languages
    chapter_title: Bilingual
    #: the hidden inputs' seed (``grade --seed`` replays it)
    seed: int
    #: when grading started (ISO 8601, UTC)
    started_at: str
    #: how long grading took, in seconds
    duration_s: float
    #: what was graded: path, kind, sha256, files (:meth:`grader.submission.Submission.describe`)
    submission: dict
    #: where: ``python``, ``jax``, ``jaxlib``, ``backend``, ``device_kind``, ``cpu_count``
    environment: dict
    #: the graded exercises, in the chapter's order
    exercises: list[ExerciseResult]
    #: warnings for the instructor: what a static scan of the code found, and any
    #: tampering the child's guard saw (each: ``file``, ``line``, ``code``, ``message``)
    integrity: list[dict] = field(default_factory=list)
    #: which sandbox ran (:meth:`grader.runner.sandbox.SandboxPlan.describe`)
    sandbox: dict = field(default_factory=dict)
    #: how long each part took (seconds), for the grader's own benchmarks
    timings: dict = field(default_factory=dict)
    #: the ids of the exercises graded when a run graded only some of the chapter's
    #: (``grade PATH -k ...``, or a run interrupted); empty for a run of every exercise
    selected: list[str] = field(default_factory=list)
    #: how many exercises the chapter has; 0 when not known
    chapter_exercises: int = 0
    #: grading was interrupted (Ctrl-C): ``exercises`` holds only those graded before
    interrupted: bool = False
    #: a course release's preview: graded with the reference's records for the public seed
    #: (``seed``), not with the reference itself; the score is a preview of final grading's
    preview: bool = False
    #: where the jobs ran (:meth:`grader.runner.devices.DevicePlan.describe`): the ``platform`` measured on,
    #: the ``accelerator`` found, whether it is ``exclusive``, its ``holder``; ``note``: a
    #: :class:`~grader.i18n.Text` saying why an accelerator here was not used, else ``None``
    device: dict = field(default_factory=dict)
    #: by exercise, where a batch asked for the class's similarity (``grade batch --similarity``): its file
    #: (``file``), that file's text (``source``) and what each graded function traced to (``functions``:
    #: :mod:`grader.child.programs`). For the instructor alone: never written into a report's files
    programs: dict = field(default_factory=dict)

    def _parts(self) -> list[tuple[float, float]]:
        return [(e.score, e.max_score) for e in self.exercises]

    @property
    def partial(self) -> bool:
        """Whether only some of the chapter's exercises were graded: a run of some (``-k``), or one interrupted
        before its end, even before any exercise was graded (it never takes the full report's place)."""
        return bool(self.selected) or (self.interrupted and len({e.id for e in self.exercises})
                                       < (self.chapter_exercises or len(self.exercises) + 1))



def mark_selection(report: Report, chapter_ids: Sequence[str]) -> Report:
    """Record in ``report`` whether it covers every one of ``chapter_ids`` (the chapter's exercises)."""
    graded = [e.id for e in report.exercises]
    report.chapter_exercises = len(chapter_ids)
    report.selected = graded if set(graded) != set(chapter_ids) else []
    return report


def is_unrunnable(ex: ExerciseResult) -> bool:
    """Whether ``ex`` could not be run at all (see :attr:`ExerciseResult.unrunnable`).

    Besides the flag, an ``error`` is recognised by its checks: every one is an error
    with the exercise's ``error`` as its message.
    """
    if ex.unrunnable:
        return True
    return (ex.status == "error" and ex.error is not None and bool(ex.checks)
            and all(c.status == "error" and c.message == ex.error for c in ex.checks))


def headline(report: Report) -> Text:
    """The report's first line: chapter, score, whether the run was partial, whether it was a
    course release's preview, and what was graded (:func:`graded_text`)."""
    if report.partial:
        line = T("ui.title_partial", chapter=report.chapter_title, score=_number(report.score),
                 max_score=_number(report.max_score), n=len(report.exercises),
                 total=report.chapter_exercises or "?", ids=", ".join(report.selected))
    else:
        line = T("ui.title", chapter=report.chapter_title, score=_number(report.score),
                 max_score=_number(report.max_score))
    line = T("release.title", title=line, seed=report.seed) if report.preview else line
    graded = graded_text(graded_submission(report))
    return T("ui.title_graded", title=line, graded=graded) if graded is not None else line


def score_line(report: Report) -> Text:
    """The report's first line without what was graded (its path is the grading machine's): what a
    platform's feedback shows a student."""
    line = headline(report)
    return line.args["title"] if line.key == "ui.title_graded" else line


def graded_place(submission: dict) -> tuple[str, str]:
    """What was graded, as a path the student can use: (the path given, or the folder inside it
    that was graded; the place inside a zip, else ``""``)."""
    path, inner = str(submission.get("path") or ""), str(submission.get("inner") or "")
    if not str(submission.get("kind", "")).startswith("zip") and inner:
        return str(PurePath(path) / inner), ""
    return path, inner


def graded_submission(report: Report) -> dict:
    """What :func:`graded_text` says a report is of: a partial run of modules (``-k``) names the files it
    graded (``exercises/ch4 (ex02_where.py)``), not the folder's eight."""
    submission = report.submission
    if report.partial and str(submission.get("kind", "")).endswith("folder"):
        ids = {e.id for e in report.exercises}
        files = [f for f in submission.get("files") or [] if str(f).removesuffix(".py") in ids]
        if files:
            submission = {**submission, "named": True, "files": files}
    return submission


def graded_text(submission: dict) -> Text | None:
    """``graded exercises/ch4 (8 .py files)``: what a report is of; ``None`` when not known."""
    kind = str(submission.get("kind") or "")
    if submission.get("from") == "kernel history":
        return T("ui.graded", what=T("ui.graded.kernel"))
    if not submission.get("path") or not kind:
        return None
    path, inner = graded_place(submission)
    files = [f for f in submission.get("files") or [] if str(f).endswith(".py")]
    if inner:  # in a zip
        files_text = (", ".join(files) if submission.get("named") else T("ui.graded.files", n=len(files)))
        what: Text | str = T("ui.graded.in_zip", zip=path, inner=inner, what=files_text
                             if kind.endswith("folder") else T("ui.graded.notebook"))
    else:
        what = (T("ui.graded.named", path=path, names=", ".join(files)) if submission.get("named") and files
                else T("ui.graded.modules", path=path, n=len(files))) if kind.endswith("folder") else path
    return T("ui.graded", what=what)


def exercise_status(checks: list[CheckResult], termination: str | None) -> str:
    """An exercise's status from its checks and how its process ended.

    ``termination`` is ``None`` for a normal end, else ``"timeout"`` or ``"error"``.
    """
    total = sum(c.max_points for c in checks)
    got = sum(c.points for c in checks)
    if checks and all(c.status == "not_attempted" for c in checks):
        return "not_attempted"
    if termination in ("timeout", "error") and got < total:
        return termination
    if total and got >= total - 1e-9:
        return "passed"
    if got > 0:
        return "partial"
    return "failed"


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 4)


def _graded(submission: dict, words: Callable[[Words], str]) -> dict | None:
    """``report.json``'s ``graded``: what was graded (``path``, ``inside`` a zip, ``kind``, the
    sentence the first line ends with), and the other copies the student changed, if any."""
    text = graded_text(submission)
    if text is None:
        return None
    path, inside = graded_place(submission)
    return {"text": words(text), "path": path, "inside": inside, "kind": submission.get("kind"),
            "copies": submission.get("copies") or []}


def report_to_dict(report: Report, catalog: Catalog, lang: str) -> dict:
    """The ``grade-report/1`` object, with every sentence in ``lang``."""
    words = lambda text: catalog.render(text, lang)  # noqa: E731
    exercises = []
    for ex in report.exercises:
        exercises.append({
            "id": ex.id,
            "title": words(ex.title),
            "section": ex.section,
            "score": _number(ex.score),
            "max_score": _number(ex.max_score),
            "status": ex.status,
            "error": words(ex.error) or None,
            "duration_s": round(ex.duration_s, 3),
            "output": ex.output,
            "notes": [words(note) for note in ex.notes],
            "device": ex.device or None,
            "checks": [
                {
                    "id": c.id,
                    "title": words(c.title),
                    "category": c.category,
                    "points": _number(c.points),
                    "max_points": _number(c.max_points),
                    "status": c.status,
                    "message": words(c.message),
                    "hint": words(c.hint),
                    "hint_id": c.hint_id,
                    "measured": c.measured,
                    "checked": c.checked,
                }
                for c in ex.checks
            ],
        })
    return {
        "schema": SCHEMA,
        "title": words(headline(report)),
        "partial": report.partial,
        "graded": _graded(graded_submission(report), words),
        "preview": report.preview,
        "selected": [e.id for e in report.exercises],
        "chapter_exercises": report.chapter_exercises or None,
        "chapter": report.chapter,
        "chapter_title": words(report.chapter_title),
        "score_line": words(score_line(report)),
        "lang": lang,
        "seed": report.seed,
        "score": _number(report.score),
        "max_score": _number(report.max_score),
        "started_at": report.started_at,
        "duration_s": round(report.duration_s, 3),
        "submission": report.submission,
        "environment": report.environment,
        "device": {**report.device, **{key: words(report.device[key]) if report.device.get(key) else None
                                       for key in ("note", "version_note")}} if report.device else None,
        "sandbox": {**report.sandbox, "notes": [words(n) for n in report.sandbox.get("notes", [])]},
        "exercises": exercises,
        "integrity": [
            {**{k: v for k, v in item.items() if k != "message"}, "message": words(item.get("message"))}
            for item in report.integrity
        ],
        "timings": report.timings,
        "interrupted": report.interrupted,
    }
