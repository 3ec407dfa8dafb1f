"""How a learning platform lays out a class's download, and who is who in it.

* ``folders``: one child per student, a folder, a notebook or a ``.zip`` each, named
  after the student (the layout ``grade batch`` always read);
* ``canvas``: Canvas's "Download Submissions" zip: flat files named
  ``lastfirst_12345_6789012_ex02_where.py`` (user id, then the file's attachment id;
  ``lastfirst_LATE_...`` for a late one); with anonymous grading ``anon_<anonymous id>_...``
  and ``LATE_anon_...`` (``ContentZipper#get_filename``, canvas-lms ``lib/content_zipper.rb``);
  for a group assignment the group's name and one member's user id;
* ``moodle``: Moodle's "Download all submissions": a folder per student and plugin,
  ``Full Name_12345_assignsubmission_file`` (12345: the participant id; older Moodles end it
  with ``_``), or the same prefix on flat files; for a team assignment the group's name and
  id (``Team Alpha_77_...``) or ``Default group_...`` with no id
  (``mod_assign\\downloader::get_student_prefix``);
* ``gradescope``: Gradescope's "Export Submissions": ``submission_metadata.yml`` beside a
  folder per submission (``submission_NNN/``) with its submitters' names, SIDs and e-mails.

:func:`read` tells the layout (or takes the one asked for) and turns the download into
:class:`~grader.batch.roster.Student` entries, one per submission, and a
:class:`FileUse` for every file of the download: which student it belongs to and
whether it was graded, or why not. A file uploaded again is read by the platform's own
renaming rule (:mod:`grader.platform_names`): the newer is graded, the older listed as
``superseded``. Nothing is dropped silently: an entry that does not follow the layout
becomes a row that says so and what to do.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from grader.batch import claims
from grader.batch.download import SKIPPED_FOLDERS, Download, DownloadError, Entry
from grader.platform_names import version
from grader.batch.roster import RESERVED, ClassError, Person, Student
from grader.i18n import T, Text

LAYOUTS = ("folders", "canvas", "moodle", "gradescope")
#: what the grader reads of a submission; other files belong to the student but are not graded
GRADED_SUFFIXES = (".py", ".ipynb", ".zip")
SINGLE_SUFFIXES = (".ipynb", ".zip")
#: Canvas's anonymous grading: ``[LATE_]anon_<anonymous id>_<attachment id>_<file>`` (or ``_text.html``); a
#: Canvas name's readings are :func:`grader.batch.claims.canvas_readings`
CANVAS_ANON = re.compile(r"^(?P<late>LATE_)?anon_(?P<anon>[A-Za-z0-9]+)_(?:(?P<att>\d+)_(?P<file>[^/]+)|"
                         r"(?P<online>(?:text|link)\.html))$")
#: Moodle replaces ``_`` in a name by a space (``str_replace('_', ' ', ...)``): the name holds none, so
#: the first ``_<id>_assignsubmission_`` is Moodle's; the id is absent for a team's default group
MOODLE_FOLDER = re.compile(r"^(?P<name>[^_/]+?)(?:_(?P<pid>\d+))?_assignsubmission_(?P<plugin>[a-z0-9]+)_?$")
MOODLE_FILE = re.compile(r"^(?P<name>[^_/]+?)(?:_(?P<pid>\d+))?_assignsubmission_(?P<plugin>[a-z0-9]+)"
                         r"_(?P<file>[^/]+)$")
GRADESCOPE_METADATA = "submission_metadata.yml"
#: the pages Canvas writes for an online text or a URL (``ContentZipper#add_text_or_url``)
CANVAS_ONLINE = ("text.html", "link.html")


@dataclass
class FileUse:
    """What became of one file of the download."""

    #: the file, as the download names it
    file: str
    #: the student (results folder name) it belongs to; ``""``: nobody's
    student: str
    #: ``graded``, or why not: ``superseded``, ``not_graded``, ``system``, ``link``, ``unsafe``,
    #: ``unmatched`` (does not follow the layout), ``metadata`` (the platform's own file), ``ambiguous``
    #: (a Canvas name that reads as two users'), ``bad_name`` (a name no file system holds)
    use: str


@dataclass
class Klass:
    """A class as the download holds it."""

    #: the layout read (one of :data:`LAYOUTS`)
    layout: str
    #: the download itself
    download: Download
    #: one per submission, sorted by name
    students: list[Student]
    #: every file of the download, and what became of it
    files: list[FileUse]
    #: how its submissions are named: ``people`` (one person each), ``groups`` (Moodle's team
    #: submissions: one folder per group), ``anonymous`` (Canvas's anonymous grading)
    kind: str = "people"


def read(download: Download, layout: str = "auto", *, teams: bool = False) -> Klass:
    """The class in ``download``, in ``layout`` (``auto``: told from its names); ``teams``: Moodle's
    folders are groups' (the worksheet says so; a folder of the default group says so too). Raises
    :class:`DownloadError` when a layout asked for fits nothing in it."""
    layout = _settle(download, layout)
    uses: list[FileUse] = [FileUse(e.name, "", "system") for e in download.outside]
    klass = Klass(layout, download, [], uses)
    if layout == "moodle":
        klass.students = _moodle(download, uses, teams, klass)
    elif layout == "canvas":
        klass.students = _canvas(download, uses, klass)
    else:
        klass.students = {"folders": _folders, "gradescope": _gradescope}[layout](download, uses)
    klass.students.sort(key=lambda s: (s.name.lower(), s.name))
    return klass


def read_class(path: Path, results: Path | None = None, layout: str = "auto", *, teams: bool = False) -> Klass:
    """The class in the download at ``path`` (a folder or a ``.zip``), in ``layout``; ``results``
    (a folder inside it) is left out. Raises :class:`ClassError` when it holds no submission."""
    try:
        download = Download(Path(path), skip=results)
        klass = read(download, layout, teams=teams)
    except DownloadError as exc:
        raise ClassError(exc.text) from None
    if not klass.students:
        raise ClassError(T("batch.error.empty", path=str(path)))
    for student in klass.students:
        if student.key.casefold() in RESERVED and student.problem is None:
            student.problem, student.status = T("batch.row.reserved", name=student.name), "name_clash"
    claims.one_row_per_id(klass.students, klass.layout)
    claims.unique_keys(klass.students)
    return klass


# ------------------------------------------------------------------ telling the layout
def _settle(download: Download, layout: str) -> str:
    """The layout to read (``auto``: the one most names follow), looking into a download that is one
    folder alone when its own names follow no platform's."""
    scores = _scores(download.top())
    inner = download.wrapper()
    if inner is not None and not any(scores.values()):
        groups: dict[str, list[Entry]] = {}  # the same listing, one folder down
        for entry in download.entries():
            if entry.name.startswith(inner + "/"):
                rest = Entry(entry.name[len(inner) + 1:], entry.size, entry.kind, entry.target, entry.mtime)
                groups.setdefault(rest.parts[0], []).append(rest)
        inside = _scores(groups)
        if (inside.get(layout) if layout != "auto" else _best(groups, inside) != "folders"):
            download.enter(inner)
            scores = inside
    if layout == "auto":
        return _best(download.top(), scores)
    if layout != "folders" and not scores[layout]:
        raise DownloadError(T("batch.error.layout_mismatch", path=download.label, layout=layout,
                              example=T(f"batch.layout.{layout}.example")))
    return layout


def _scores(groups: dict[str, list[Entry]]) -> dict[str, int]:
    """How many top-level names follow each platform's layout."""
    names = [name for name, entries in groups.items() if not all(e.hidden for e in entries)]
    return {"gradescope": int(GRADESCOPE_METADATA in groups),
            "moodle": sum(bool(MOODLE_FOLDER.match(n) or MOODLE_FILE.match(n)) for n in names),
            "canvas": sum(bool(claims.canvas_readings(n) or CANVAS_ANON.match(n)) and _is_file(groups[n])
                          for n in names)}


def _best(groups: dict[str, list[Entry]], scores: dict[str, int]) -> str:
    """Gradescope's when its metadata is there, else the platform at least half the names follow."""
    if scores["gradescope"]:
        return "gradescope"
    names = sum(not all(e.hidden for e in entries) for entries in groups.values())
    for layout in ("moodle", "canvas"):
        if scores[layout] and scores[layout] * 2 >= names:
            return layout
    return "folders"


def _is_file(entries: list[Entry]) -> bool:
    return len(entries) == 1 and len(entries[0].parts) == 1 and entries[0].kind != "empty"


# ------------------------------------------------------------------ one student's files
def _collect(student: Student, entries: list[tuple[str, Entry]], uses: list[FileUse], layout: str) -> Student:
    """Give ``student`` the files it is graded on (``(name inside the submission, entry)``), and
    account for every entry. One notebook or zip alone is the submission itself. Two versions of
    a file (``layout``'s platform renamed the second upload): the newer is graded (the platform's
    number, then the file's time), the other is ``superseded``; a renamed file alone is graded
    under its first name, with a note."""
    versions: dict[str, list[tuple[int, float, str, Entry]]] = {}
    for inner, entry in entries:
        if entry.kind == "empty":
            continue
        if entry.hidden:
            uses.append(FileUse(entry.name, student.key, "system"))
        elif entry.kind == "link":
            uses.append(FileUse(entry.name, student.key, "link"))
            student.notes.append(T("batch.note.link", file=inner))
            student.links[inner] = entry.target  # made again as a link where it is graded: said so in its report
        elif entry.kind == "unsafe":
            uses.append(FileUse(entry.name, student.key, "unsafe"))
            student.notes.append(T("batch.note.unsafe", file=inner))
        elif PurePosixPath(inner).suffix.lower() not in GRADED_SUFFIXES:
            uses.append(FileUse(entry.name, student.key, "not_graded"))
        elif (why := claims.unholdable(inner)) is not None:  # never written: the rest is graded
            uses.append(FileUse(entry.name, student.key, "bad_name"))
            student.notes.append(why)
        else:
            base, number = version(inner, layout)
            versions.setdefault(base, []).append((number, entry.mtime, inner, entry))
    for base, found in versions.items():
        found.sort(key=lambda item: item[:3])
        number, _, inner, newest = found[-1]
        for older in found[:-1]:
            uses.append(FileUse(older[3].name, student.key, "superseded"))
            student.notes.append(T("batch.note.superseded", old=PurePosixPath(older[3].name).name,
                                   new=PurePosixPath(newest.name).name))
        if number and len(found) == 1:
            student.notes.append(_renamed_note(layout, PurePosixPath(inner).name, PurePosixPath(base).name))
        student.files[base] = newest.name
        uses.append(FileUse(newest.name, student.key, "graded"))
    if len(student.files) == 1 and PurePosixPath(next(iter(student.files))).suffix.lower() in SINGLE_SUFFIXES:
        student.single = True
    if not student.files and student.problem is None:
        others = [PurePosixPath(inner).name for inner, entry in entries if entry.kind != "empty" and not entry.hidden]
        if student.online and not [name for name in others if name not in CANVAS_ONLINE]:
            student.problem = T("batch.row.online_text_only", name=student.name, kinds=", ".join(student.online))
        else:
            student.problem = T("batch.row.nothing_to_grade", name=student.name,
                                files=", ".join(others[:5]) + (" …" if len(others) > 5 else "") or "–")
        student.status = "unreadable"
    return student


def _renamed_note(layout: str, file: str, name: str) -> Text:
    """A renamed file graded under its first name, by whose rule it was renamed."""
    if layout == "canvas":
        return T("batch.note.renamed.canvas", file=file, name=name)
    if layout == "moodle":
        return T("batch.note.renamed.moodle", file=file, name=name)
    return T("batch.note.renamed.browser", file=file, name=name)


def _inside(entry: Entry) -> str:
    """An entry's path inside its top-level folder (``""`` for that folder itself, when empty)."""
    return entry.name.split("/", 1)[1] if "/" in entry.name else ""


def _unmatched(download: Download, name: str, entries: list[Entry], layout: str, uses: list[FileUse]) -> Student:
    """A top-level entry that does not follow the layout: a row that says so, never graded."""
    student = Student(name, download, problem=T(f"batch.row.unmatched.{layout}", name=name), status="not_a_submission",
                      people=[Person(name)], origin=name)
    uses += [FileUse(e.name, student.key, "unmatched") for e in entries]
    return student


def _system(name: str, entries: list[Entry], uses: list[FileUse]) -> bool:
    """Whether a top-level name is the system's (``.DS_Store``, ``__MACOSX``): then it is no student."""
    if name.startswith(".") or name in SKIPPED_FOLDERS:
        uses += [FileUse(e.name, "", "system") for e in entries if e.kind != "empty"]
        return True
    return False


# ------------------------------------------------------------------ folders
def _folders(download: Download, uses: list[FileUse]) -> list[Student]:
    students = []
    for name, entries in download.top().items():
        if _system(name, entries, uses):
            continue
        if _is_file(entries):
            entry = entries[0]
            suffix = PurePosixPath(name).suffix.lower()
            if entry.kind == "link":
                student = Student(name, download, problem=T("batch.row.symlink", name=name), status="not_a_submission",
                                  origin=name)
                uses.append(FileUse(name, student.key, "link"))
            elif suffix in SINGLE_SUFFIXES and entry.kind == "file":
                student = _collect(Student(PurePosixPath(name).stem, download, origin=name), [(name, entry)], uses,
                                   "folders")
            else:
                student = Student(name, download, problem=T("batch.row.not_a_submission", name=name),
                                  status="not_a_submission", origin=name)
                uses.append(FileUse(name, student.key, "unmatched"))
        else:
            student = _collect(Student(name, download, origin=name), [(_inside(e), e) for e in entries], uses,
                               "folders")
        student.people = student.people or [Person(student.name)]
        students.append(student)
    return students


# ------------------------------------------------------------------ Canvas
def _canvas(download: Download, uses: list[FileUse], klass: Klass) -> list[Student]:
    """Canvas's names: ``login_[LATE_]uid_att_file``, or with anonymous grading ``[LATE_]anon_<id>_att_file``
    (``ContentZipper#get_filename``). The download is anonymous when every Canvas name in it is
    (one student's Canvas name ``anon_x`` makes no one else anonymous), and one of them shows it (late,
    or an id that is no number: a student whose Canvas name is Anon has a number there). A name that
    reads as more than one user's is nobody's (:func:`grader.batch.claims.canvas_readings`)."""
    top = {name: entries for name, entries in download.top().items() if not _system(name, entries, uses)}
    files = [name for name, entries in top.items() if _is_file(entries)]
    canvas = [name for name in files if claims.canvas_readings(name) or CANVAS_ANON.match(name)]
    anonymous = bool(canvas) and all(CANVAS_ANON.match(name) for name in canvas) and any(
        found["late"] or not found["anon"].isdigit() for found in map(CANVAS_ANON.match, canvas))
    by_student: dict[tuple[str, str, str], list[tuple[str, Entry]]] = {}
    unsure: dict[tuple, list[tuple[str, list[dict], Entry]]] = {}
    late: set[tuple[str, str, str]] = set()
    online: dict[tuple[str, str, str], list[str]] = {}
    students = []
    for name, entries in top.items():
        anon = CANVAS_ANON.match(name) if anonymous and _is_file(entries) else None
        readings = [] if anonymous or not _is_file(entries) else claims.canvas_readings(name)
        if anon is None and not readings:
            students.append(_unmatched(download, name, entries, "canvas", uses))
            continue
        if len(readings) > 1:
            unsure.setdefault(tuple(sorted((r["login"], r["uid"]) for r in readings)), []).append(
                (name, readings, entries[0]))
            continue
        found = anon.groupdict() if anon else readings[0]
        who = ("", "", found["anon"]) if anon else (found["login"], found["uid"], "")
        by_student.setdefault(who, []).append((found["file"] or found["online"], entries[0]))
        if found.get("online") or found["file"] in CANVAS_ONLINE:
            online.setdefault(who, []).append(found.get("online") or found["file"])
        if found["late"]:
            late.add(who)
    for (login, uid, anon), files_of in by_student.items():
        is_late = (login, uid, anon) in late
        if anon:
            student = Student(f"anon_{anon}", download, people=[Person(f"anon_{anon}")], late=is_late,
                              origin=f"{'LATE_' if is_late else ''}anon_{anon}_*", anonymous=anon)
        else:
            student = Student(f"{login}_{uid}", download, people=[Person(login, uid)], late=is_late,
                              origin=f"{login}{'_LATE' if is_late else ''}_{uid}_*")
        student.online = online.get((login, uid, anon), [])
        students.append(_collect(student, files_of, uses, "canvas"))
    for found in unsure.values():  # graded for no one: which user's it is, only Canvas knows
        student = claims.ambiguous_row(download, found[0][0], found[0][1])
        uses += [FileUse(entry.name, student.key, "ambiguous") for _, _, entry in found]
        students.append(student)
    if anonymous:
        klass.kind = "anonymous"
    return students


# ------------------------------------------------------------------ Moodle
def _moodle(download: Download, uses: list[FileUse], teams: bool, klass: Klass) -> list[Student]:
    """Moodle's names: a participant's ``Full Name_<participant id>_assignsubmission_<plugin>``, or for a
    team assignment a group's ``Group name_<group id>_...`` and ``Default group_...`` (no id)."""
    by_student: dict[tuple[str, str], list[tuple[str, Entry]]] = {}
    other: dict[tuple[str, str], list[Entry]] = {}
    plugins: dict[tuple[str, str], set[str]] = {}
    students = []
    for name, entries in download.top().items():
        if _system(name, entries, uses):
            continue
        folder = MOODLE_FOLDER.match(name) if not _is_file(entries) else None
        flat = MOODLE_FILE.match(name) if _is_file(entries) else None
        found = folder or flat
        if found is None:
            students.append(_unmatched(download, name, entries, "moodle", uses))
            continue
        who = (found["name"], found["pid"] or "")
        by_student.setdefault(who, [])
        if found["plugin"] != "file":  # online text, comments: the student's, not graded
            other.setdefault(who, []).extend(entries)
            plugins.setdefault(who, set()).add(f"assignsubmission_{found['plugin']}")
        elif folder is not None:
            by_student[who] += [(_inside(e), e) for e in entries]
        else:
            by_student[who].append((found["file"], entries[0]))
    teams = teams or any(not pid for _, pid in by_student)  # only a team's default group has no id
    for (full_name, pid), files in by_student.items():
        key = f"{full_name}_{pid}" if pid else full_name
        if teams:  # a group's id is never a participant's: its members come from the worksheet
            student = Student(key, download, people=[], origin=f"{key}_assignsubmission_*", group=full_name,
                              group_id=pid)
            student.notes.append(T("batch.note.moodle_group", group=full_name, id=pid or "–"))
        else:
            student = Student(key, download, people=[Person(full_name, pid)], origin=f"{key}_assignsubmission_*")
        uses += [FileUse(e.name, student.key, "not_graded") for e in other.get((full_name, pid), [])]
        student.online = sorted(plugins.get((full_name, pid), set()))
        students.append(_collect(student, files, uses, "moodle"))
    if teams:
        klass.kind = "groups"
    return students


# ------------------------------------------------------------------ Gradescope
def _gradescope(download: Download, uses: list[FileUse]) -> list[Student]:
    metadata = _gradescope_metadata(download)
    uses.append(FileUse(GRADESCOPE_METADATA, "", "metadata"))
    students = []
    for name, entries in download.top().items():
        if name == GRADESCOPE_METADATA or _system(name, entries, uses):
            continue
        info = metadata.get(name)
        if info is None or _is_file(entries):
            students.append(_unmatched(download, name, entries, "gradescope", uses))
            continue
        people = [Person(*(_text(_field(p, key)) for key in ("name", "sid", "email")))
                  for p in _field(info, "submitters") or [] if isinstance(p, dict)] or [Person(name)]
        label = people[0].name or people[0].id or name
        student = Student(f"{label}_{name.removeprefix('submission_')}", download, people=people,
                          submitted_at=str(_field(info, "created_at") or ""), origin=name)
        students.append(_collect(student, [(_inside(e), e) for e in entries], uses, "gradescope"))
    return students


def _gradescope_metadata(download: Download) -> dict:
    import yaml

    try:
        data = yaml.safe_load(download.read(GRADESCOPE_METADATA, 16 << 20))
    except yaml.YAMLError as exc:
        raise DownloadError(T("batch.error.bad_metadata", path=download.where(GRADESCOPE_METADATA),
                              detail=" ".join(str(exc).split())[:200])) from None
    if not isinstance(data, dict):
        raise DownloadError(T("batch.error.bad_metadata", path=download.where(GRADESCOPE_METADATA),
                              detail="not a mapping of submission folders"))
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}


def _field(data: dict, key: str):
    """A field of Gradescope's metadata, whose keys are Ruby symbols (``:name``) or plain."""
    value = data.get(f":{key}", data.get(key))
    return value if not isinstance(value, (int, float)) or isinstance(value, bool) else str(value)


def _text(value) -> str:
    """A submitter's field as text (YAML may give none, a number, or a list where text belongs)."""
    return value.strip() if isinstance(value, str) else ""


def describe(klass: Klass) -> Text:
    """One line on what the download held, for the batch's plan and the summary."""
    counts: dict[str, int] = {}
    for use in klass.files:
        counts[use.use] = counts.get(use.use, 0) + 1
    return T("batch.layout.read", layout=T(f"batch.layout.{klass.layout}.name"), files=len(klass.files),
             students=len(klass.students), graded=counts.get("graded", 0),
             left=len(klass.files) - counts.get("graded", 0))
