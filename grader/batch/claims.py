"""What a student's names may claim: only what the platform wrote, one row per platform id, a
results folder each, and only files the system can hold.

A platform builds a file's name from its own part (who, which attachment) and the student's
part (their name as the platform cleaned it, their file's name). Only the platform's part says
whose a file is:

* :func:`canvas_readings`: every way a Canvas name splits into a Canvas user's part and a
  file's (``ContentZipper#get_filename`` and ``#add_upload_submission``, canvas-lms
  ``lib/content_zipper.rb``: ``<name>[_LATE]_<user id>_<attachment id>_<file>``, the name
  lower case and Ruby's word characters only: :func:`grader.platform_names.canvas_word`). A name
  read more than one way (a student's Canvas
  name that ends in digits, or a file named like Canvas's ids) is nobody's: graded for no one,
  and said so.
* :func:`one_row_per_id`: two submissions that claim one platform id (a Canvas user id, a
  Moodle participant or group id, a Gradescope SID or e-mail) are both refused and named:
  which of them is the platform's own cannot be told from the download, and neither may give
  its grade to that id.
* :func:`unique_keys`: students whose results folders would be one (names equal once made
  safe for a folder, or but for case) each get a folder of their own, their names kept.
* :func:`unholdable`: a file whose name no file system here can hold (a part longer than
  255 bytes, bytes that are no UTF-8) is not graded, with a one-line reason; the rest of that
  student's files are.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath

from grader import safetext, ziptools
from grader.platform_names import is_canvas_name
from grader.batch.roster import MAX_KEY, MAX_KEY_BYTES, Person, Student
from grader.i18n import T, Text

#: the platform's part after a Canvas name: ``[_LATE]_<user id>_<attachment id>_<file>``, or the page
#: Canvas writes for an online text or URL submission (``..._<user id>_text.html``, no attachment)
_CANVAS_TAIL = re.compile(r"(?P<late>_LATE)?_(?P<uid>\d+)_"
                          r"(?:(?P<att>\d+)_(?P<file>[^/]+)|(?P<online>(?:text|link)\.html))")
#: what each layout's platform calls its ids, for the row that says two submissions claim one
ID_WORDS = {"canvas": "Canvas user id", "moodle": "Moodle participant id", "gradescope": "Gradescope SID or e-mail"}


def canvas_readings(name: str) -> list[dict]:
    """Every reading of a Canvas file name as ``login``, ``late``, ``uid``, ``file`` (the file's own name)."""
    found = []
    for cut in re.finditer(r"_(?=(?:LATE_)?\d+_)", name):
        login = name[:cut.start()]
        if not is_canvas_name(login) or login.endswith("_LATE"):  # Canvas's late mark is no name's
            continue
        tail = _CANVAS_TAIL.fullmatch(name, cut.start())
        if tail is not None:
            found.append({"login": login, "late": bool(tail["late"]), "uid": tail["uid"],
                          "file": tail["file"] or tail["online"]})
    return found


def ambiguous_row(download, name: str, readings: list[dict]) -> Student:
    """A row for Canvas files whose names read as more than one user's: graded for no one."""
    ids = ", ".join(dict.fromkeys(r["uid"] for r in readings))
    longest = max(readings, key=lambda r: len(r["login"]))
    key = f"{longest['login']}_{longest['uid']}"
    return Student(key, download, problem=T("batch.row.ambiguous.canvas", name=name, ids=ids),
                   status="not_a_submission", people=[Person(key)], origin=f"{key}_*")


# ------------------------------------------------------------------ one id, one row
def one_row_per_id(students: list[Student], layout: str) -> None:
    """Every submission claiming a platform id another also claims is refused, and says who else does;
    the id is taken from its people (no import file gives that id a grade from either)."""
    claims: dict[str, list[Student]] = {}
    for student in students:
        for claim in _claims(student, layout):
            claims.setdefault(claim, []).append(student)
    clashing: dict[int, tuple[Student, list[str]]] = {}
    for claim, claimants in claims.items():
        if len({id(s) for s in claimants}) > 1:
            for student in claimants:
                clashing.setdefault(id(student), (student, []))[1].append(claim.split(":", 1)[1])
    for student, ids in clashing.values():
        others = sorted({s.origin or s.name for claim in _claims(student, layout) for s in claims[claim]
                         if s is not student})
        student.problem = T("batch.row.id_clash", what=ID_WORDS.get(layout, layout), ids=", ".join(ids),
                            others=", ".join(others))
        student.status = "id_clash"
        student.people = [Person(p.name) for p in student.people]
        student.group_id = ""


def _claims(student: Student, layout: str) -> list[str]:
    if layout == "gradescope":
        return [c for p in student.people for c in (f"sid:{p.id.strip()}" if p.id.strip() else "",
                                                   f"email:{p.email.strip().casefold()}" if p.email.strip() else "")
                if c]
    if layout == "moodle" and student.group:
        return [f"group:{student.group_id}"] if student.group_id else []
    if student.anonymous:
        return [f"anon:{student.anonymous}"]
    return [f"id:{p.id}" for p in student.people if p.id] if layout in ("canvas", "moodle") else []


# ------------------------------------------------------------------ a results folder each
def unique_keys(students: list[Student]) -> None:
    """Students whose results folders would be one (equal once made safe, or but for case) each get a
    folder of their own: the safe name and a few characters of their own name's digest; a note says so."""
    by_key: dict[str, list[Student]] = {}
    for student in students:
        by_key.setdefault(student.key.casefold(), []).append(student)
    for same in by_key.values():
        if len(same) < 2:
            continue
        names = ", ".join(s.origin or s.name for s in same)
        for student in same:
            digest = hashlib.sha256((student.origin or student.name).encode("utf-8", "surrogateescape")).hexdigest()
            base = student.key[: MAX_KEY - 7].rstrip(". ")
            while len(base.encode("utf-8")) > MAX_KEY_BYTES - 7:
                base = base[:-1]
            student.key = f"{base}-{digest[:6]}"
            student.notes.append(T("batch.note.name_clash", names=names, folder=student.key))


# ------------------------------------------------------------------ names a file system can hold
def unholdable(inner: str) -> Text | None:
    """Why a file's path inside a submission cannot be written here (``None``: it can)."""
    problem = ziptools.name_problem(inner)
    if problem == "not_utf8":
        return T("batch.note.name_not_utf8", file=safetext.decoded(inner))
    if problem == "too_long":
        longest = max(len(part.encode("utf-8")) for part in PurePosixPath(inner).parts)
        return T("batch.note.name_too_long", file=_short(inner), bytes=longest, limit=ziptools.NAME_BYTES)
    return None


def _short(name: str, keep: int = 60) -> str:
    return name if len(name) <= keep else f"{name[:keep // 2]}…{name[-keep // 2:]}"
