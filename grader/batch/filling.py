"""The platform's own grading file, filled in: every row given its grade or left as it was, and why.

:func:`members` gives a Moodle team's submission its members from the worksheet (its *Group*
column, which Moodle writes for a team assignment: ``assign_grading_table::col_team``), before
the class is graded. :func:`fill` writes the grades into the file the platform gave
(:mod:`grader.batch.worksheets`), in its own column, scaled to the maximum it states when the
chapter's points differ (Moodle skips a grade above the assignment's maximum without a word:
``assign_feedback_offline::process_import_grades``); Moodle's worksheet also gets the report's
first line as its feedback comment. Every student row of the file is either filled or left as it
was with a reason, and every graded student the file does not hold is listed. A row filled keeps the
columns the platform's import reads as the platform wrote them (Moodle's Identifier and "Last modified
(grade)": its ``-`` stays ``-``); its other cells are made safe for a spreadsheet.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

from grader import safetext
from grader.platform_names import canvas_user_name, moodle_folder_name, moodle_group_folder_name
from grader.batch.gradebook import GRADED, feedback_of
from grader.batch.roster import Person
from grader.batch.worksheets import Sheet, number, participant, write
from grader.i18n import T, Text



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


def _nfc(text: str) -> str:
    """A name as a zip may hold it decomposed (macOS writes NFD): compared composed."""
    return unicodedata.normalize("NFC", text)


def members(sheet: Sheet, students: list) -> list[Text]:
    """Give each Moodle team submission (``student.group``: its folder's name) the worksheet's rows whose
    *Group* Moodle writes as that folder (:func:`grader.platform_names.moodle_group_folder_name`: "R&D" is
    the folder ``Ramp;D``). The worksheet names groups only by name and the download by name and id: two
    of the worksheet's groups that Moodle writes as one folder name ("Team_Alpha", "Team Alpha") are
    refused with a reason, never filled (either could be the folder's), and so are two folders of one
    name. A group the worksheet does not name keeps no member, and its row says so. Returns what the
    instructor should know."""
    notes: list[Text] = []
    if "team" not in sheet.columns:
        return notes
    folders: dict[str, list] = {}
    for student in students:
        if student.group:
            folders.setdefault(_nfc(student.group), []).append(student)
    by_folder: dict[str, dict[str, list[Person]]] = {}  # folder name: the worksheet's groups written so, and members
    for i in range(1, len(sheet.rows)):
        group, pid = sheet.cell(i, "team"), participant(sheet, i)
        if group and pid:
            by_folder.setdefault(_nfc(moodle_group_folder_name(group)), {}).setdefault(group, []).append(
                Person(sheet.cell(i, "fullname"), pid))
    for key, same in folders.items():
        groups = by_folder.get(key, {})
        for student in same:
            if len(same) > 1:
                student.notes.append(T("batch.sheet.group_twice", group=student.group, path=sheet.path.name))
            elif len(groups) > 1:
                student.notes.append(T("batch.sheet.group_alike", group=student.group, path=sheet.path.name,
                                       groups=", ".join(sorted(groups))))
                notes.append(T("batch.sheet.group_alike", group=student.group, path=sheet.path.name,
                               groups=", ".join(sorted(groups))))
            elif groups:
                student.people = next(iter(groups.values()))
            else:
                student.notes.append(T("batch.sheet.group_absent", group=student.group, path=sheet.path.name))
    return notes


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
        cells = list(sheet.rows[i]) + ([""] * (len(sheet.header) + 1 - len(sheet.rows[i])) if sheet.added else [])
        if many:
            done.left.append((who, T("batch.sheet.row.many", names=", ".join(many))))
        elif match is None:
            done.left.append((who, T("batch.sheet.row.no_submission")))
        else:
            seen.add(id(match[1]))
            _fill_row(sheet, i, match, cells, points, done, maxima)
        if match is not None or sheet.added:
            changed[i] = cells
    changed = {i: _safe(sheet, cells) for i, cells in changed.items()}
    if sheet.added:
        changed[0] = sheet.rows[0] + [safetext.csv_cell(sheet.added)]
        done.notes.append(T("batch.sheet.added_column", column=sheet.added, path=sheet.path.name))
    _notes(sheet, graded, seen, changed, maxima, points, done)
    done.text = write(sheet, changed)
    return done


def _fill_row(sheet: Sheet, i: int, match: tuple, cells: list[str], points: float, done: Filled,
              maxima: set[str]) -> None:
    """Row ``i`` of the sheet, matched to a graded ``(student, row, person)``: its grade (scaled to the
    sheet's maximum) and feedback written into ``cells``, or why it is left as it was."""
    student, row, person = match
    who = _who(sheet, i)
    reason = _short(sheet, i) or _not_fillable(sheet, i, row) or _not_the_same(sheet, i, student, person)
    if reason is not None:
        done.left.append((who, reason))
        return
    most = sheet.most if sheet.most is not None else number(sheet.cell(i, "max"))
    value = row.total if most is None or abs(most - points) < 1e-9 else row.total * most / points
    if most is not None and abs(most - points) >= 1e-9:
        maxima.add(_num(most, ","))
    cells[sheet.columns["grade"]] = _num(value, sheet.delimiter)
    if "feedback" in sheet.columns and row.report is not None:
        cells[sheet.columns["feedback"]] = safetext.csv_cell(feedback_of(row))
    done.filled += 1
    if sheet.platform == "canvas" and person.name and canvas_user_name(sheet.cell(i, "name")) != person.name:
        done.notes.append(T("batch.sheet.canvas_group", name=person.name, id=person.id, student=who))


def _notes(sheet: Sheet, graded: list[tuple[object, object]], seen: set[int], changed: dict[int, list[str]],
           maxima: set[str], points: float, done: Filled) -> None:
    """What the instructor should know of the filled sheet: rows kept with their formulas, graded students
    with no row, grades scaled to the sheet's maximum, a Moodle sheet without a feedback column."""
    kept = [_who(sheet, i) for i in range(1, len(sheet.rows)) if i not in changed
            and any(safetext.formula(cell) and cell.strip() != "-" for cell in sheet.rows[i])]  # Moodle's "-": no date
    if kept:  # the platform's own rows, kept byte for byte: the instructor should know before opening the file
        listed = ", ".join(kept[:5]) + (" …" if len(kept) > 5 else "")
        done.notes.append(T("batch.sheet.formulas", n=len(kept), rows=listed, path=sheet.path.name))
    for _student, row in graded:
        if id(row) not in seen and row.status in GRADED:
            ids = ", ".join(p.id or p.email or p.name for p in row.people) or "–"
            done.missing.append((row.name, T("batch.sheet.missing", ids=ids, path=sheet.path.name)))
    if maxima:
        done.notes.append(T("batch.sheet.scaled", most=" / ".join(sorted(maxima)), points=_num(points, ","),
                            path=sheet.path.name))
    if sheet.platform == "moodle" and "feedback" not in sheet.columns:
        done.notes.append(T("batch.sheet.no_feedback", path=sheet.path.name))


#: the columns a platform's import reads of a row: written back exactly as the platform gave them (Moodle's
#: importer finds its row by the Identifier and keeps a grade changed in Moodle after "Last modified
#: (grade)": ``assign_feedback_offline::process_import_grades``; a "-" there made "'-" is another date)
_KEY_COLUMNS = {"moodle": ("id", "modified"), "canvas": ("id",), "gradescope": ("sid", "email")}
_CANVAS_KEY_HEADERS = ("SIS User ID", "SIS Login ID", "Integration ID")


def _safe(sheet: Sheet, cells: list[str]) -> list[str]:
    """A row written again: every cell a spreadsheet would run as a formula neutralised
    (:func:`grader.safetext.csv_cell`: a student's name or e-mail as the platform holds it), but the grade
    (a number), the feedback (made safe already) and the columns the platform's import reads (changed, the
    row would match no one, or hold another date)."""
    keep = {sheet.columns[k] for k in ("grade", "feedback", *_KEY_COLUMNS.get(sheet.platform, ()))
            if k in sheet.columns}
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


def _short(sheet: Sheet, i: int) -> Text | None:
    """A row with fewer cells than the columns written (a line the file cut short): left as it was."""
    needed = max(sheet.columns[k] for k in ("grade", "feedback") if k in sheet.columns) + 1
    have = len(sheet.rows[i])
    if sheet.added and have >= len(sheet.header):  # the added column comes after the row's own
        return None
    return T("batch.sheet.row.short", cells=have, needed=needed) if have < needed else None


def _not_fillable(sheet: Sheet, i: int, row) -> Text | None:
    """Why a matched row keeps its cell: not graded to the end, or the platform shows it cannot take one."""
    if row.status not in GRADED or row.report is None:  # no grade: blank, never a 0 the platform would record
        return T("batch.sheet.row.not_graded", status=row.status, detail=row.detail or "–")
    current = sheet.cell(i, "grade").strip()
    if sheet.platform == "canvas" and current == "N/A":  # GradebookExporter: not assigned, or anonymous and hidden
        return T("batch.sheet.row.canvas_na")
    return None


def _not_the_same(sheet: Sheet, i: int, student, person: Person) -> Text | None:
    """Moodle: a folder's name that is not the worksheet's name for its participant id, as Moodle writes
    it into a folder's (:func:`grader.platform_names.moodle_folder_name`: "Bob O'Brien" is ``Bob OBrien``):
    a team's folder read as a participant's, its group id taken for a participant's; that row is not
    someone else's to fill. Anonymous submissions (``Participant``) name no one."""
    if sheet.platform != "moodle" or student.group or "fullname" not in sheet.columns:
        return None
    named = _nfc(person.name)
    if named in ("Participant", "参与者") or named == _nfc(moodle_folder_name(sheet.cell(i, "fullname"))):
        return None
    return T("batch.sheet.row.other_name", name=person.name, id=person.id, sheet=sheet.cell(i, "fullname"))


def _num(value: float, delimiter: str) -> str:
    """A grade as the file writes numbers: two decimals at most, a decimal comma in a ``;`` file."""
    text = f"{round(value, 2):.2f}".rstrip("0").rstrip(".")
    return text.replace(".", ",") if delimiter == ";" else text
