"""The platform's own grading file, filled in: every row given its grade or left as it was, and why.

:func:`members` gives a Moodle team's submission its members from the worksheet (its *Group*
column, which Moodle writes for a team assignment: ``assign_grading_table::col_team``), before
the class is graded. :func:`fill` writes the grades into the file the platform gave
(:mod:`grader.batch.worksheets`), in its own column, scaled to the maximum it states when the
chapter's points differ (Moodle skips a grade above the assignment's maximum without a word:
``assign_feedback_offline::process_import_grades``); Moodle's worksheet also gets the report's
first line as its feedback comment. Every student row of the file is either filled or left as it
was with a reason, and every graded student the file does not hold is listed.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from grader import safetext
from grader.batch.roster import Person
from grader.batch.worksheets import Sheet, number, participant, write
from grader.i18n import T, Text

#: statuses whose points are a grade (a crash or a timeout costs that exercise only)
GRADED = ("completed", "timeout", "crash")


@dataclass
class Filled:
    """What :func:`fill` did."""

    #: the file's new text
    text: str
    #: rows given a grade
    filled: int = 0
    #: rows left as they were: (who, why)
    left: list[tuple[str, Text]] = field(default_factory=list)
    #: graded submissions the file does not hold: (who, why)
    missing: list[tuple[str, Text]] = field(default_factory=list)
    #: what the instructor should know (the grades scaled, a group's submission, no feedback column)
    notes: list[Text] = field(default_factory=list)


def moodle_clean(name: str) -> str:
    """A name as Moodle makes it part of a folder's (``str_replace('_', ' ', ...)`` then
    ``clean_filename``), compared without case."""
    text = unicodedata.normalize("NFC", name.replace("_", " "))
    text = "".join(ch for ch in text if ch not in '/\\:*?"<>|' and unicodedata.category(ch)[0] != "C")
    return " ".join(text.split()).casefold()


def canvas_clean(name: str) -> str:
    """A name as Canvas puts it in a download's file names (``ContentZipper#sanitize_user_name``, then
    ``#sanitize_file_name``: lower case, word characters only)."""
    name = re.sub(r"_(\d+)_", r"\1", name).lower()
    return re.sub(r"[^\w]", "", name)


def members(sheet: Sheet, students: list) -> None:
    """Give each Moodle team submission (``student.group``) the worksheet's rows whose *Group* is it;
    a group the worksheet does not name keeps no member, and its row says so."""
    if "team" not in sheet.columns:
        return
    names: dict[str, list] = {}
    for student in students:
        if student.group:
            names.setdefault(moodle_clean(student.group), []).append(student)
    for key, same in names.items():
        found = [Person(sheet.cell(i, "fullname"), participant(sheet, i)) for i in range(1, len(sheet.rows))
                 if moodle_clean(sheet.cell(i, "team")) == key and participant(sheet, i)]
        for student in same:
            if len(same) > 1:
                student.notes.append(T("batch.sheet.group_twice", group=student.group, path=sheet.path.name))
            elif found:
                student.people = found
            else:
                student.notes.append(T("batch.sheet.group_absent", group=student.group, path=sheet.path.name))


def fill(sheet: Sheet, graded: list[tuple[object, object]], points: float, words) -> Filled:
    """``sheet`` filled with ``graded`` (``(student, row)`` pairs of the batch); ``points``: the chapter's
    maximum; ``words`` renders a text in the batch's language (the feedback comments)."""
    by_id: dict[str, list[tuple]] = {}
    for student, row in graded:
        for person in row.people:
            for key in _keys(sheet.platform, person):
                by_id.setdefault(key, []).append((student, row, person))
    changed: dict[int, list[str]] = {}
    done = Filled("")
    seen: set[int] = set()
    maxima: set[str] = set()
    for i in range(1, len(sheet.rows)):
        if i in sheet.special:
            if sheet.added:
                changed[i] = sheet.rows[i] + [""]
            continue
        who = _who(sheet, i)
        match, many = _match(sheet, i, by_id)
        cells = list(sheet.rows[i]) + ([""] if sheet.added else [])
        if many:
            done.left.append((who, T("batch.sheet.row.many", names=", ".join(many))))
        elif match is None:
            done.left.append((who, T("batch.sheet.row.no_submission")))
        else:
            student, row, person = match
            seen.add(id(row))
            reason = _not_fillable(sheet, i, row) or _not_the_same(sheet, i, student, person)
            if reason is not None:
                done.left.append((who, reason))
            else:
                most = sheet.most if sheet.most is not None else number(sheet.cell(i, "max"))
                value = row.total if most is None or abs(most - points) < 1e-9 else row.total * most / points
                if most is not None and abs(most - points) >= 1e-9:
                    maxima.add(_num(most, ","))
                cells[sheet.columns["grade"]] = _num(value, sheet.delimiter)
                if "feedback" in sheet.columns and row.report is not None:
                    cells[sheet.columns["feedback"]] = row.report.get("title", "")
                done.filled += 1
                if sheet.platform == "canvas" and person.name and canvas_clean(sheet.cell(i, "name")) != person.name:
                    done.notes.append(T("batch.sheet.canvas_group", name=person.name, id=person.id, student=who))
        if match is not None or sheet.added:
            changed[i] = cells
    changed = {i: _safe(sheet, cells) for i, cells in changed.items()}
    if sheet.added:
        changed[0] = sheet.rows[0] + [safetext.csv_cell(sheet.added)]
        done.notes.append(T("batch.sheet.added_column", column=sheet.added, path=sheet.path.name))
    kept = [_who(sheet, i) for i in range(1, len(sheet.rows)) if i not in changed
            and any(safetext.formula(cell) for cell in sheet.rows[i])]
    if kept:  # the platform's own rows, kept byte for byte: the instructor should know before opening the file
        listed = ", ".join(kept[:5]) + (" …" if len(kept) > 5 else "")
        done.notes.append(T("batch.sheet.formulas", n=len(kept), rows=listed, path=sheet.path.name))
    for student, row in graded:
        if id(row) not in seen and row.status in GRADED:
            ids = ", ".join(p.id or p.email or p.name for p in row.people) or "–"
            done.missing.append((row.name, T("batch.sheet.missing", ids=ids, path=sheet.path.name)))
    if maxima:
        done.notes.append(T("batch.sheet.scaled", most=" / ".join(sorted(maxima)), points=_num(points, ","),
                            path=sheet.path.name))
    if sheet.platform == "moodle" and "feedback" not in sheet.columns:
        done.notes.append(T("batch.sheet.no_feedback", path=sheet.path.name))
    done.text = write(sheet, changed)
    return done


#: the columns a platform's import finds its student by: written back exactly as the platform gave them
_KEY_COLUMNS = {"moodle": ("id",), "canvas": ("id",), "gradescope": ("sid", "email")}
_CANVAS_KEY_HEADERS = ("SIS User ID", "SIS Login ID", "Integration ID")


def _safe(sheet: Sheet, cells: list[str]) -> list[str]:
    """A row written again: every cell a spreadsheet would run as a formula neutralised
    (:func:`grader.safetext.csv_cell`), but the grade (a number) and the columns the platform's import
    matches its student by (changed, the row would match no one)."""
    keep = {sheet.columns[k] for k in ("grade", *_KEY_COLUMNS.get(sheet.platform, ())) if k in sheet.columns}
    if sheet.platform == "canvas":
        keep |= {i for i, header in enumerate(sheet.header) if header.strip() in _CANVAS_KEY_HEADERS}
    return [cell if i in keep else safetext.csv_cell(cell) for i, cell in enumerate(cells)]


def _match(sheet: Sheet, i: int, by_id: dict[str, list[tuple]]) -> tuple[tuple | None, list[str]]:
    """The graded ``(student, row, person)`` the sheet's row ``i`` is, and the names of all when more than
    one could be. Gradescope's rows match on the strongest key both sides hold: a SID or an e-mail that
    differs is another person, whatever the name says; the name is compared only where neither holds one
    (a student cannot take another's row by taking their name)."""
    row_keys = _row_keys(sheet, i)
    if sheet.platform != "gradescope":
        return next((by_id[k][0] for k in row_keys if k in by_id), None), []
    held = dict(key.split(":", 1) for key in row_keys)
    found: dict[int, tuple] = {}
    for key in row_keys:
        for candidate in by_id.get(key, []):
            theirs = dict(k.split(":", 1) for k in _keys("gradescope", candidate[2]))
            strong = [kind for kind in ("sid", "email") if kind in theirs and kind in held]
            if any(theirs[kind] != held[kind] for kind in strong) or (key.startswith("name:") and strong):
                continue
            found.setdefault(id(candidate[1]), candidate)
    if len(found) > 1:
        return None, sorted(candidate[1].name for candidate in found.values())
    return next(iter(found.values()), None), []


def _keys(platform: str, person: Person) -> list[str]:
    if platform == "gradescope":
        return [k for k in (f"sid:{person.id}" if person.id else "", f"email:{person.email.casefold()}"
                            if person.email else "", f"name:{person.name.casefold()}" if person.name else "") if k]
    return [f"id:{person.id}"] if person.id else []


def _row_keys(sheet: Sheet, i: int) -> list[str]:
    if sheet.platform == "moodle":
        pid = participant(sheet, i)
        return [f"id:{pid}"] if pid else []
    if sheet.platform == "canvas":
        uid = sheet.cell(i, "id").strip()
        return [f"id:{uid}"] if uid else []
    name = sheet.cell(i, "name") or " ".join(filter(None, (sheet.cell(i, "first"), sheet.cell(i, "last"))))
    return [k for k in (f"sid:{sheet.cell(i, 'sid').strip()}" if sheet.cell(i, "sid").strip() else "",
                        f"email:{sheet.cell(i, 'email').strip().casefold()}" if sheet.cell(i, "email").strip() else "",
                        f"name:{name.strip().casefold()}" if name.strip() else "") if k]


def _who(sheet: Sheet, i: int) -> str:
    """A row as the instructor finds it in the file."""
    if sheet.platform == "moodle":
        return " ".join(filter(None, (sheet.cell(i, "id"), sheet.cell(i, "fullname"))))
    if sheet.platform == "canvas":
        return f"{sheet.cell(i, 'name')} ({sheet.cell(i, 'id')})"
    name = sheet.cell(i, "name") or " ".join(filter(None, (sheet.cell(i, "first"), sheet.cell(i, "last"))))
    return " ".join(filter(None, (name, sheet.cell(i, "sid"), sheet.cell(i, "email")))) or f"row {i + 1}"


def _not_fillable(sheet: Sheet, i: int, row) -> Text | None:
    """Why a matched row keeps its cell: not graded to the end, or the platform shows it cannot take one."""
    if row.status not in GRADED:
        return T("batch.sheet.row.not_graded", status=row.status, detail=row.detail or "–")
    current = sheet.cell(i, "grade").strip()
    if sheet.platform == "canvas" and current == "N/A":  # GradebookExporter: not assigned, or anonymous and hidden
        return T("batch.sheet.row.canvas_na")
    return None


def _not_the_same(sheet: Sheet, i: int, student, person: Person) -> Text | None:
    """Moodle: a folder's name that is not the worksheet's name for its participant id (a team's folder
    read as a participant's, its group id taken for a participant's): that row is not someone else's
    to fill. Anonymous submissions (``Participant``) name no one."""
    if sheet.platform != "moodle" or student.group or "fullname" not in sheet.columns:
        return None
    named = moodle_clean(person.name)
    if named in ("participant", "参与者") or named == moodle_clean(sheet.cell(i, "fullname")):
        return None
    return T("batch.sheet.row.other_name", name=person.name, id=person.id, sheet=sheet.cell(i, "fullname"))


def _num(value: float, delimiter: str) -> str:
    """A grade as the file writes numbers: two decimals at most, a decimal comma in a ``;`` file."""
    text = f"{round(value, 2):.2f}".rstrip("0").rstrip(".")
    return text.replace(".", ",") if delimiter == ";" else text
