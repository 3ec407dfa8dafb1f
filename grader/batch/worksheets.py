"""A platform's own grading file, read as the platform wrote it (``grade batch --gradebook EXPORT.csv``).

The platforms give a file to fill and upload again: Moodle's *Download grading worksheet*
(``Grades-COURSE-ASSIGNMENT-123.csv``), Canvas's *Grades → Export*, Gradescope's roster or
grades export. :func:`read` keeps every row's text as it was (so that a row left alone is
written back byte for byte), its delimiter, line ends and byte-order mark, and finds the
columns that matter by the platform's own rules:

* **Moodle** (``assignfeedback_offline_grade_importer::init()``, mod/assign/feedback/offline/
  importgradeslib.php) finds its columns by their headers, each compared with
  ``get_string()`` in the language of the person uploading: ``recordid`` ("Identifier"),
  ``grade`` ("Grade") and ``lastmodifiedgrade`` ("Last modified (grade)"), and no upload at all
  without the three; a feedback column by its plugin's name ("Feedback comments"). The
  worksheet's headers are those strings in the language of the person who downloaded it
  (``assign_grading_table::__construct``, mod/assign/gradingtable.php). So the headers are
  kept as they are, and recognised here in English and Chinese (:data:`MOODLE_HEADERS`).
* **Canvas** (``GradebookImporter#header?``, lib/gradebook_importer.rb): the first header is
  ``Student`` and the second ``ID`` (the user id rows are matched by), the student columns end
  with ``Section``, then an assignment column per assignment, titled ``Title (id)``; a
  ``Points Possible`` row states each assignment's points.
* **Gradescope**: the columns named ``SID``, ``Email`` and the name (``Name``, or ``First Name``
  and ``Last Name``); ``Total Score`` and ``Max Points`` in an assignment's grades export.
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.i18n import T, TextError

#: the largest export read (a class of thousands)
MAX_BYTES = 32 << 20
#: Moodle's worksheet headers, by the language strings they are made of (mod/assign/lang/en/assign.php,
#: lang/en/moodle.php, assignfeedback_comments' pluginname; Chinese: the zh_cn language pack)
MOODLE_HEADERS = {
    "id": ("Identifier", "识别码"),
    "grade": ("Grade", "成绩"),
    "modified": ("Last modified (grade)", "最后修改（教师）"),
    "max": ("Maximum Grade", "Maximum grade", "最高成绩"),
    "feedback": ("Feedback comments", "评语反馈"),
    "team": ("Group", "群组"),
    "fullname": ("Full name", "全名"),
}
#: Moodle's ``hiddenuser`` string before a participant id ("Participant 12345"; zh_cn "参与者12345")
MOODLE_PARTICIPANT = ("Participant ", "参与者")
#: Canvas's columns that are no assignment's (GradebookImporter::NON_ASSIGNMENT_COLUMN_HEADERS and the
#: student columns)
CANVAS_NOT_ASSIGNMENTS = ("Current Score", "Current Points", "Current Grade", "Final Score", "Final Points",
                          "Final Grade", "Override Score", "Override Grade", "Override Status")
CANVAS_STUDENT_COLUMNS = ("Student", "LastName", "FirstName", "ID", "SIS User ID", "SIS Login ID", "Section",
                          "Integration ID", "Root Account")
CANVAS_TITLE_AND_ID = re.compile(r"^(?P<title>.*?)\s*\((?P<id>\d+)\)$")


class WorksheetError(TextError):
    """The export cannot be used; ``text`` is one line saying what is wrong and what to do."""


@dataclass
class Sheet:
    """A platform's grading file as read."""

    #: the file
    path: Path
    #: ``moodle``, ``canvas`` or ``gradescope``
    platform: str
    #: every row, the header first
    rows: list[list[str]]
    #: each row's text as it was in the file (its line end included)
    raw: list[str]
    #: the file's delimiter (``,``; ``;`` where a locale writes decimal commas)
    delimiter: str = ","
    #: the file's first line end (``\n`` or ``\r\n``); each row keeps its own
    newline: str = "\n"
    #: whether the file began with a UTF-8 byte-order mark (kept when written again)
    bom: bool = False
    #: the columns found: ``id``, ``grade``, ``max``, ``modified``, ``feedback``, ``team``, ``fullname``
    #: (Moodle); ``id``, ``name``, ``grade`` (Canvas); ``sid``, ``email``, ``name``, ``first``, ``last``,
    #: ``grade``, ``max`` (Gradescope)
    columns: dict[str, int] = field(default_factory=dict)
    #: rows that are no student's (Canvas's Points Possible and hidden-assignments rows), by index
    special: set[int] = field(default_factory=set)
    #: the maximum the file states for the assignment (Canvas: Points Possible); ``None``: per row or none
    most: float | None = None
    #: Moodle: the participant prefix of its identifiers (``Participant ``)
    prefix: str = ""
    #: a column added at the end (Gradescope's roster holds none for the grade): its header
    added: str = ""

    @property
    def header(self) -> list[str]:
        return self.rows[0]

    def cell(self, row: int, column: str) -> str:
        index = self.columns.get(column)
        line = self.rows[row]
        return line[index] if index is not None and index < len(line) else ""


def read(path: Path, platform: str, *, assignment: str = "", chapter_names: tuple[str, ...] = ()) -> Sheet:
    """The export at ``path`` for a download of ``platform`` (``moodle``, ``canvas``, ``gradescope``);
    ``assignment`` names Canvas's or Gradescope's column, else the one of ``chapter_names``. Raises
    :class:`WorksheetError`."""
    path = Path(path)
    try:
        data = path.read_bytes()[: MAX_BYTES + 1]
    except OSError as exc:
        raise WorksheetError(T("batch.sheet.unreadable", path=str(path), detail=exc.strerror or str(exc))) from None
    if len(data) > MAX_BYTES or b"\0" in data[:4096]:
        raise WorksheetError(T("batch.sheet.not_csv", path=str(path)))
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise WorksheetError(T("batch.sheet.not_utf8", path=str(path))) from None
    sheet = _parse(path, text, bom)
    if len(sheet.rows) < 1 or len(sheet.header) < 2:
        raise WorksheetError(T("batch.sheet.not_csv", path=str(path)))
    {"moodle": _moodle, "canvas": _canvas, "gradescope": _gradescope}.get(platform, _unknown)(
        sheet, assignment, chapter_names)
    sheet.platform = platform
    return sheet


def _parse(path: Path, text: str, bom: bool) -> Sheet:
    """Every row and its text as it was; the delimiter the header is written with (``,``, or ``;`` where
    a locale writes decimal commas, as Canvas's export may: GradebookImporter#identify_delimiter)."""
    # the csv module's own line handling: a line ends at \n, \r\n or \r only (str.splitlines also ends
    # one at U+2028, \x1c, \x85 ...: a roster name holding U+2028 split its row, and the filling crashed)
    lines = io.StringIO(text, newline="").readlines()
    fields = {sep: len(next(csv.reader(lines[:1], delimiter=sep), [])) for sep in (",", ";")}
    delimiter = ";" if fields[";"] > fields[","] else ","
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    consumed: list[str] = []

    def feed():
        for line in lines:
            consumed.append(line)
            yield line

    rows, raw = [], []
    try:
        reader = csv.reader(feed(), delimiter=delimiter)
        for row in reader:
            raw.append("".join(consumed))
            consumed.clear()
            rows.append(row)
    except csv.Error as exc:
        raise WorksheetError(T("batch.sheet.bad_csv", path=str(path), detail=str(exc))) from None
    if consumed and raw:  # text after the last row (a blank line): kept with it
        raw[-1] += "".join(consumed)
    return Sheet(path, "", rows, raw, delimiter=delimiter, newline=newline, bom=bom)


def _find(header: list[str], names: tuple[str, ...]) -> int | None:
    wanted = {name.casefold() for name in names}
    return next((i for i, h in enumerate(header) if h.strip().casefold() in wanted), None)


def _unknown(sheet: Sheet, assignment: str, chapter_names: tuple[str, ...]) -> None:
    raise WorksheetError(T("batch.sheet.no_platform", path=str(sheet.path)))


# ------------------------------------------------------------------ Moodle
def _moodle(sheet: Sheet, assignment: str, chapter_names: tuple[str, ...]) -> None:
    header = sheet.header
    for key, names in MOODLE_HEADERS.items():
        index = _find(header, names)
        if index is not None:
            sheet.columns[key] = index
    missing = [MOODLE_HEADERS[key][0] for key in ("id", "grade", "modified") if key not in sheet.columns]
    if not missing and "max" not in sheet.columns:  # a scale instead of points (gradingtable.php: col_scale)
        raise WorksheetError(T("batch.sheet.moodle_scale", path=str(sheet.path)))
    if missing:
        raise WorksheetError(T("batch.sheet.moodle_columns", path=str(sheet.path), missing=", ".join(missing),
                               header=", ".join(header[:12])))
    ids = [row[sheet.columns["id"]] for row in sheet.rows[1:] if len(row) > sheet.columns["id"]]
    sheet.prefix = next((p for p in MOODLE_PARTICIPANT if ids and all(i.startswith(p) for i in ids if i)),
                        _common_prefix(ids))


def _common_prefix(ids: list[str]) -> str:
    """What every identifier has before its digits (Moodle's ``hiddenuser`` string in some language)."""
    prefixes = {re.sub(r"\d+$", "", i) for i in ids if i}
    return prefixes.pop() if len(prefixes) == 1 else ""


def participant(sheet: Sheet, row: int) -> str:
    """A Moodle row's participant id, as the importer reads it (the identifier after ``hiddenuser``)."""
    value = sheet.cell(row, "id")
    rest = value[len(sheet.prefix):] if value.startswith(sheet.prefix) else value
    return rest.strip() if rest.strip().isdigit() else ""


# ------------------------------------------------------------------ Canvas
def _canvas(sheet: Sheet, assignment: str, chapter_names: tuple[str, ...]) -> None:
    header = sheet.header
    if not (len(header) > 3 and "Student" in header[0] and "ID" in header[1]):  # GradebookImporter#header?
        raise WorksheetError(T("batch.sheet.canvas_header", path=str(sheet.path), header=", ".join(header[:6])))
    sheet.columns.update(name=0, id=1)
    for i, row in enumerate(sheet.rows[1:], 1):
        if row and "Points Possible" in row[0]:
            sheet.special.add(i)
        elif row and all(re.match(r"^\s*(Muted|Manual Posting.*)?\s*$", c or "", re.I) for c in row):
            sheet.special.add(i)
    candidates = [i for i, h in enumerate(header) if i > 1 and h not in CANVAS_STUDENT_COLUMNS
                  and not any(word in h for word in CANVAS_NOT_ASSIGNMENTS)]
    sheet.columns["grade"] = _assignment_column(sheet, candidates, assignment, chapter_names, "canvas")
    possible = next((i for i in sorted(sheet.special) if "Points Possible" in sheet.rows[i][0]), None)
    if possible is not None:
        sheet.most = number(sheet.rows[possible][sheet.columns["grade"]])


def _assignment_column(sheet: Sheet, candidates: list[int], assignment: str, chapter_names: tuple[str, ...],
                       platform: str) -> int:
    """The assignment's column: the one ``--assignment`` names (its whole header, or its title without
    Canvas's id), else the only one whose title names the chapter."""
    header = sheet.header

    def title(h: str) -> str:
        found = CANVAS_TITLE_AND_ID.match(h.strip())
        return (found["title"] if found else h).strip().casefold()

    if assignment:
        chosen = [i for i in candidates if header[i].strip() == assignment.strip()] or \
            [i for i in candidates if title(header[i]) == title(assignment)]
    else:
        names = [n.casefold() for n in chapter_names if n]
        chosen = [i for i in candidates if any(title(header[i]) == n or re.search(rf"\b{re.escape(n)}\b",
                                                                                  title(header[i])) for n in names)]
    if len(chosen) == 1:
        return chosen[0]
    listed = ", ".join(header[i] for i in candidates[:15]) or "–"
    key = "batch.sheet.no_assignment" if not chosen else "batch.sheet.many_assignments"
    raise WorksheetError(T(key, path=str(sheet.path), assignment=assignment or " / ".join(chapter_names),
                           columns=listed))


# ------------------------------------------------------------------ Gradescope
def _gradescope(sheet: Sheet, assignment: str, chapter_names: tuple[str, ...]) -> None:
    header = sheet.header
    for key, names in {"sid": ("SID", "Student ID"), "email": ("Email", "E-mail", "Email Address"),
                       "name": ("Name", "Full Name"), "first": ("First Name",), "last": ("Last Name",),
                       "max": ("Max Points",)}.items():
        index = _find(header, names)
        if index is not None:
            sheet.columns[key] = index
    if "sid" not in sheet.columns and "email" not in sheet.columns:
        raise WorksheetError(T("batch.sheet.gradescope_header", path=str(sheet.path), header=", ".join(header[:8])))
    if assignment and _find(header, (assignment,)) is not None:
        sheet.columns["grade"] = _find(header, (assignment,))
    elif _find(header, ("Total Score",)) is not None and not assignment:
        sheet.columns["grade"] = _find(header, ("Total Score",))
    else:  # a roster: the grade goes in a column of its own, at the end
        sheet.added = assignment or (chapter_names[0] if chapter_names else "grade")
        sheet.columns["grade"] = len(header)


# ------------------------------------------------------------------ numbers and writing
def number(text: str) -> float | None:
    """A number as the platforms write it (``80``, ``80.00``, ``80,00`` with a decimal comma)."""
    text = (text or "").strip()
    if re.fullmatch(r"-?\d+([.,]\d+)?", text):
        return float(text.replace(",", "."))
    return None


def write(sheet: Sheet, changed: dict[int, list[str]]) -> str:
    """The file again: every row as it was, but those in ``changed`` (index: new cells), each written
    in the file's own delimiter and line end, every cell quoted when every cell was."""
    out = io.StringIO()
    if sheet.bom:
        out.write("\ufeff")
    for i, raw in enumerate(sheet.raw):
        cells = changed.get(i)
        if cells is None:
            out.write(raw)
            continue
        ending = "\r\n" if raw.endswith("\r\n") else "\n" if raw.endswith("\n") else ""
        quoted = raw.startswith('"') and raw.count('"') >= 2 * len(sheet.rows[i])  # every cell was quoted
        quoting = csv.QUOTE_ALL if quoted else csv.QUOTE_MINIMAL
        line = io.StringIO()
        csv.writer(line, delimiter=sheet.delimiter, lineterminator="", quoting=quoting).writerow(cells)
        out.write(line.getvalue() + ending)
    return out.getvalue()
