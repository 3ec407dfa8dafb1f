"""What the terminal table and ``report.md`` say alike: icons, numbers, the environment
line, the one line for an exercise that could not run, and the next step."""
from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from grader.i18n import T, Text
from grader.results import ExerciseResult, Report, graded_place, is_unrunnable

ICONS = {"passed": "✓", "partial": "◐", "failed": "✗", "not_attempted": "·", "error": "!", "timeout": "⏱",
         "skipped": "↷"}
COLORS = {"passed": "green", "partial": "yellow", "failed": "red", "not_attempted": None, "error": "magenta",
          "timeout": "magenta", "skipped": None}

#: what to do about an exercise that could not run, by the key of its reason
_TODO = {
    "job.syntax_error": "todo.syntax_error",
    "job.import_error": "todo.import_error",
    "check.grader_error": "todo.grader",
    "job.reference_failed": "todo.grader",
    "job.submission_timeout": "todo.submission_timeout",
    "job.hung_import": "todo.hung_import",
    "job.out_of_memory": "todo.memory",
    "integrity.tampered": "todo.tampered",
    "integrity.no_report": "todo.tampered",
    "integrity.compiles_hidden": "todo.tampered",
}


def num(value: float) -> str:
    """A score as a student writes it: ``10``, ``7.5``."""
    return f"{value:g}"


def measured_text(measured: dict, limit: int = 220) -> str:
    """The numbers behind a verdict as one line of JSON (floats to four significant digits), cut at
    ``limit`` characters between two items, never inside a number or a name (report.json has them all)."""
    text = json.dumps(_rounded(measured), ensure_ascii=False, default=str, separators=(", ", ": "))
    if len(text) <= limit:
        return text
    cut = text.rfind(", ", 0, limit - 2)
    return (text[:cut] if cut > 0 else text[: limit - 2]) + ", …"


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def sandbox_word(report: Report) -> str:
    """``bwrap``, ``bwrap+uid``, ``process`` ..."""
    kind = report.sandbox.get("kind", "?")
    return kind + ("+uid" if report.sandbox.get("uid_isolation") else "")


def environment_text(report: Report) -> Text:
    """Device, versions, sandbox and duration; when no exercise ran, says the device is unknown."""
    env = report.environment
    if not env.get("backend"):
        return T("ui.environment_unknown", jax=env.get("jax") or "?", python=env.get("python") or "?",
                 sandbox=sandbox_word(report), duration=report.duration_s)
    return T("ui.environment", backend=env.get("backend") or "?", device=env.get("device_kind") or "?",
             jax=env.get("jax") or "?", python=env.get("python") or "?", sandbox=sandbox_word(report),
             duration=report.duration_s)


def device_notes(report: Report) -> list[Text]:
    """Where it measured, where that is not everything on one device: why an accelerator here was not
    used (held by another process, ``--device cpu``), and which exercises ran on it while the others
    ran on the CPU beside it (a TPU serves one process at a time)."""
    device = report.device or {}
    notes: list[Text] = [device[key] for key in ("note", "version_note") if isinstance(device.get(key), Text)]
    on = [ex for ex in report.exercises if (ex.device or {}).get("backend") not in (None, "cpu")]
    if on and any((ex.device or {}).get("backend") == "cpu" for ex in report.exercises):
        kind = on[0].device.get("device_kind") or on[0].device.get("backend")
        notes.append(T("device.measured", device=kind, exercises=", ".join(ex.id for ex in on)))
    return notes


def seed_text(report: Report) -> Text:
    """The seed and how to replay it: ``--seed N`` on the command line, ``check(..., seed=N)`` for
    the cells a kernel ran (checked from inside a notebook)."""
    key = "notebook.seed" if report.submission.get("from") == "kernel history" else "ui.seed"
    return T(key, seed=report.seed)


def replay_notes(report: Report, shown: int = 12) -> list[Text]:
    """For a notebook: the cells graded that no exercise replayed (nothing graded needs them)."""
    cells = report.submission.get("cells") or {}
    skipped = [str(c) for c in cells.get("not_replayed") or []]
    if not skipped:
        return []
    listed = ", ".join(skipped[:shown]) + (f" … (+{len(skipped) - shown})" if len(skipped) > shown else "")
    return [T("notebook.not_replayed", n=len(skipped), total=len(skipped) + len(cells.get("replayed") or []),
              cells=listed)]


def _stubs_folder(chapter_id: str) -> Path:
    """Where the chapter's exercises as handed out live."""
    from grader.chapter import ChapterError, load_chapter

    try:
        return load_chapter(chapter_id).stubs
    except ChapterError:
        return Path("exercises") / chapter_id


def pasteable(path: object) -> str:
    """A path as it can be pasted into the shell: quoted when it holds a space or another
    character the shell reads (``'my work/ch4'``; on Windows, in double quotes)."""
    text = str(path)
    if os.name == "nt":
        return f'"{text}"' if any(c in text for c in ' &()[]{}^=;!\'+,`~') else text
    return shlex.quote(text)


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def _missing_todo(report: Report, file: str) -> Text:
    """How to get a missing exercise file back: from git when the graded folder is the
    chapter's own exercise folder, else by copying the one handed out."""
    stubs = _stubs_folder(report.chapter)
    graded = Path(str(report.submission.get("path", "")))
    try:
        own_folder = graded.resolve() == stubs.resolve()
    except OSError:
        own_folder = False
    if own_folder:
        return T("todo.file_restore", path=pasteable(_shown(stubs / file)))
    return T("todo.file_missing", stubs=pasteable(_shown(stubs / file)))


def problem_line(report: Report, ex: ExerciseResult) -> Text:
    """One line for an exercise that could not run: what happened, where, and what to do."""
    reason = ex.error
    first = reason[0] if isinstance(reason, list) and reason else reason
    key = getattr(first, "key", "")
    if key == "job.file_missing":
        todo = _missing_todo(report, first.args.get("file", f"{ex.id}.py"))
    else:
        todo = T(_TODO.get(key, "todo.other"))
    return T("ui.problem", what=reason, todo=todo)


def problem_lines(report: Report, render) -> dict[str, str]:
    """The rendered one-line problem of each exercise that could not run, by exercise id;
    a problem already told for an earlier exercise (one notebook, one error) refers to it."""
    lines: dict[str, str] = {}
    first_told: dict[str, str] = {}
    for ex in report.exercises:
        if not is_unrunnable(ex):
            continue
        line = render(problem_line(report, ex))
        if line in first_told:
            line = render(T("ui.same_problem", exercise=first_told[line]))
        else:
            first_told[line] = ex.id
        lines[ex.id] = line
    return lines


def file_to_open(report: Report, exercise: str) -> str | Text:
    """The file a student edits for ``exercise``, as the graded path names it, ready to paste (for
    the cells a kernel ran, checked from inside a notebook: that exercise's cells there)."""
    sub = report.submission
    kind = str(sub.get("kind", "folder"))
    files = sub.get("files") or []
    filename = f"{exercise}.py"
    if sub.get("from") == "kernel history":
        return T("notebook.next_cells", exercise=exercise)
    place, inside = graded_place(sub)
    path = Path(place or ".")
    if kind.startswith("zip"):
        where = f"{inside}/{filename}" if inside and kind.endswith("folder") else inside or filename
        return pasteable(path) if kind.endswith("notebook") and not inside else f"{pasteable(path)} ({where})"
    if kind == "notebook":
        return pasteable(path if path.suffix == ".ipynb" or not files else path / files[0])
    return pasteable(path / filename)


def preview_notes(report: Report) -> list[Text]:
    """What a course release's preview says of itself: graded with the public seed's records,
    and which checks final grading decides (``checked == "final"``); nothing otherwise."""
    if not report.preview:
        return []
    notes = [T("release.preview_note", seed=report.seed)]
    final = [f"{e.id} {c.id}" for e in report.exercises for c in e.checks if c.checked == "final"]
    if final:
        notes.append(T("release.final_checks", checks=", ".join(final)))
    return notes


#: what ``Next:`` names first, by the key of an exercise's reason for not running: the code
#: that does not run at all comes before the work started, which comes before a missing file
_BLOCKING = ("job.syntax_error", "job.import_error", "job.hung_import", "job.out_of_memory")


def _urgency(ex: ExerciseResult) -> int | None:
    """0: its code does not run (a syntax or import error) or does not end (it ran past its time limit: an
    endless loop is where the student is stuck); 1: attempted, not full; 2: its file is missing; 3: not
    attempted; ``None``: passed."""
    if ex.status == "passed":
        return None
    if ex.status == "not_attempted":
        return 3
    if ex.status == "timeout":
        return 0
    if is_unrunnable(ex):
        first = ex.error[0] if isinstance(ex.error, list) and ex.error else ex.error
        key = getattr(first, "key", "")
        return 0 if key in _BLOCKING else 2 if key in ("job.file_missing", "job.file_is_link") else 1
    return 1


def next_exercise(report: Report, earlier: dict[str, str] | None = None, *,
                  scope: list[str] | None = None) -> str | None:
    """The exercise to work on next: where the work is (:func:`_urgency`), in the chapter's order.

    A partial run (``-k``) knows only its exercises: ``earlier`` holds the others' statuses
    from the last full report (``{id: status}``), and an exercise neither graded now nor
    known counts as not full, the one after the run's exercises first. ``scope``: only these
    exercises are considered (watch mode's, with ``-k``). ``None``: all full.
    """
    ranked: list[tuple[int, int, str]] = []
    graded = {ex.id: ex for ex in report.exercises}
    order = _chapter_order(report) or list(graded)
    last = max((order.index(i) for i in graded if i in order), default=-1)
    for place, exercise in enumerate(order):
        if scope is not None and exercise not in scope:
            continue
        if exercise in graded:
            tier = _urgency(graded[exercise])
        elif not report.partial:  # a report of every exercise there is: nothing else to point at
            continue
        elif earlier and exercise in earlier:
            status = earlier[exercise]
            tier = None if status == "passed" else 3 if status == "not_attempted" else 1
        else:
            tier = 4
        if tier is not None:
            ranked.append((tier, (place - last - 1) % len(order) if tier == 4 else place, exercise))
    return min(ranked)[2] if ranked else None


def _chapter_order(report: Report) -> list[str]:
    from grader.chapter import ChapterError, load_chapter

    try:
        return [ex.id for ex in load_chapter(report.chapter).exercises]
    except ChapterError:
        return []


def next_step(report: Report, earlier: dict[str, str] | None = None) -> Text | None:
    """What to do next: all passed, or the exercise to work on (:func:`next_exercise`) and the file
    to open; for an exercise this run did not grade, said so."""
    exercise = next_exercise(report, earlier)
    if exercise is None:
        return T("ui.all_passed") if report.max_score > 0 else None
    graded = next((e for e in report.exercises if e.id == exercise), None)
    if graded is not None:
        return T("ui.next", exercise=exercise, title=graded.title, file=file_to_open(report, exercise))
    return T("ui.next_ungraded", exercise=exercise, title=_title(report, exercise),
             file=file_to_open(report, exercise))


def _title(report: Report, exercise: str):
    from grader.chapter import ChapterError, load_chapter

    try:
        return load_chapter(report.chapter).exercise(exercise).title
    except (ChapterError, KeyError, LookupError):
        return exercise


def copies_note(report: Report) -> Text | None:
    """When the submission held the chapter more than once with work in more than one copy: which
    were found, which was graded and why, and the command that grades the other."""
    copies = report.submission.get("copies") or []
    if len(copies) < 2:
        return None
    total = report.submission.get("functions") or "?"
    graded, other = copies[0], copies[1]
    path = str(report.submission.get("path", "."))
    in_zip = str(report.submission.get("kind", "")).startswith("zip")
    shown = (lambda c: c["inner"]) if in_zip else (lambda c: str(Path(path) / c["inner"]))  # noqa: E731
    listed = [T("ui.copy", inner=shown(c), written=c["written"], total=total) for c in copies]
    why = T("ui.copies.why.written") if graded["written"] > other["written"] else \
        T("ui.copies.why.edited") if graded["edited"] > other["edited"] else T("ui.copies.why.saved")
    command = f"grade {pasteable(path)} --inside {pasteable(other['inner'])}" if in_zip else \
        f"grade {pasteable(shown(other))}"
    return T("ui.copies", n=len(copies), copies=listed, graded=shown(graded), why=why,
             command=command)
