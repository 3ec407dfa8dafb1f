"""What the terminal table and ``report.md`` say alike: icons, numbers, the environment
line, the one line for an exercise that could not run, and the next step."""
from __future__ import annotations

import json
from pathlib import Path

from grader.i18n import T, Text
from grader.report.data import ExerciseResult, Report, is_unrunnable

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
    "integrity.tampered": "todo.tampered",
    "integrity.no_report": "todo.tampered",
    "integrity.compiles_hidden": "todo.tampered",
}


def num(value: float) -> str:
    """A score as a student writes it: ``10``, ``7.5``."""
    return f"{value:g}"


def measured_text(measured: dict, limit: int = 220) -> str:
    """The numbers behind a verdict as one line of JSON, cut at ``limit`` characters."""
    text = json.dumps(measured, ensure_ascii=False, default=str, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


def _stubs_folder(chapter_id: str) -> Path:
    """Where the chapter's exercises as handed out live."""
    from grader.chapter import ChapterError, load_chapter

    try:
        return load_chapter(chapter_id).stubs
    except ChapterError:
        return Path("exercises") / chapter_id


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
        return T("todo.file_restore", path=_shown(stubs / file))
    return T("todo.file_missing", stubs=_shown(stubs / file))


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


def file_to_open(report: Report, ex: ExerciseResult) -> str | Text:
    """The file a student edits for ``ex``, as the graded path names it (for the cells a
    kernel ran, checked from inside a notebook: that exercise's cells there)."""
    sub = report.submission
    path = Path(str(sub.get("path", ".")))
    kind = str(sub.get("kind", "folder"))
    files = sub.get("files") or []
    filename = f"{ex.id}.py"
    if sub.get("from") == "kernel history":
        return T("notebook.next_cells", exercise=ex.id)
    if kind == "notebook":
        return str(path if path.suffix == ".ipynb" or not files else path / files[0])
    if kind.startswith("zip"):
        return str(path) if kind.endswith("notebook") else f"{path} ({filename})"
    return str(path / filename)


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


def next_step(report: Report) -> Text | None:
    """What to do next: all passed, or the first exercise still to do and the file to open."""
    if report.score >= report.max_score and report.max_score > 0:
        return T("ui.all_passed")
    nxt = next((e for e in report.exercises if e.status != "passed"), None)
    if nxt is None:
        return None
    return T("ui.next", exercise=nxt.id, title=nxt.title, file=file_to_open(report, nxt))
