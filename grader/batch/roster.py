"""A class: who is in ``SUBMISSIONS/``, and each submission as bytes that can travel.

Each child of the folder is one student: a folder, a notebook or a ``.zip``, named by
its folder's name or its file's stem. What is not a submission (another kind of
file), and two students whose names differ only in case (their results would share a
folder on a case-insensitive disk), become a :class:`Student` with a ``problem``:
a row of the gradebook saying why, never a crash. Hidden files (``.DS_Store``) and the
results folder itself, when it lies inside, are passed over.

:func:`pack` reads a submission into plain data (its files' bytes): a worker on
another machine grades it without a shared disk, and its digest keys the batch's
resume manifest.
"""
from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path

from grader.i18n import T, Text, TextError
from grader.submission import MAX_FILES, MAX_TOTAL_BYTES

SUBMISSION_SUFFIXES = (".zip", ".ipynb")
#: names of the batch's own files in the results folder: no student's folder may take one
RESERVED = ("grades.csv", "junit.xml", "summary.md", "summary.html", "manifest.json")


@dataclass
class Student:
    """One entry of ``SUBMISSIONS/``."""

    #: the student's name: the folder's name, or the file's name without its suffix
    name: str
    #: the submission: a folder, a ``.ipynb`` or a ``.zip`` file
    path: Path
    #: why it is not graded (not a submission, a name clash); ``None``: it is graded
    problem: Text | None = None
    #: the gradebook status that goes with ``problem`` (``not_a_submission``, ``name_clash``, ``unreadable``)
    status: str | None = None


class ClassError(TextError):
    """``SUBMISSIONS/`` itself, or one submission in it, cannot be used; ``text`` is one line for the user."""


def read_class(folder: Path, results: Path | None = None) -> list[Student]:
    """The students of ``folder``, sorted by name; raises :class:`ClassError` when there are none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ClassError(T("batch.error.not_a_folder", path=str(folder)))
    try:
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError as exc:
        raise ClassError(T("batch.error.unreadable_folder", path=str(folder), detail=exc.strerror or str(exc))) \
            from None
    skip = Path(results).resolve() if results is not None else None
    students = []
    for entry in entries:
        if entry.name.startswith(".") or (skip is not None and entry.resolve() == skip):
            continue
        if entry.is_symlink():
            students.append(Student(entry.name, entry, T("batch.row.symlink", name=entry.name), "not_a_submission"))
        elif entry.is_dir():
            students.append(Student(entry.name, entry))
        elif entry.suffix.lower() in SUBMISSION_SUFFIXES:
            students.append(Student(entry.stem, entry))
        else:
            students.append(Student(entry.name, entry, T("batch.row.not_a_submission", name=entry.name),
                                    "not_a_submission"))
    if not students:
        raise ClassError(T("batch.error.empty", path=str(folder)))
    for student in students:
        if student.name.casefold() in RESERVED and student.problem is None:
            student.problem, student.status = T("batch.row.reserved", name=student.path.name), "name_clash"
    _mark_clashes(students)
    return sorted(students, key=lambda s: (s.name.lower(), s.name))


def _mark_clashes(students: list[Student]) -> None:
    """Students whose names are equal but for case are not graded: each row names the others."""
    by_key: dict[str, list[Student]] = {}
    for student in students:
        by_key.setdefault(student.name.casefold(), []).append(student)
    for same in by_key.values():
        if len(same) < 2:
            continue
        names = ", ".join(s.path.name for s in same)
        for student in same:
            student.problem = T("batch.row.name_clash", names=names)
            student.status = "name_clash"


def pack(student: Student) -> dict:
    """The submission as plain data: ``files`` (name: base64 bytes), ``dirs`` and its ``digest``.

    A folder gives its top-level files (those ``grade`` reads; links are left out: they
    could point at a classmate's files) and the names of its subfolders; a file gives
    itself. Raises :class:`ClassError` for a submission too large to send.
    """
    files: dict[str, bytes] = {}
    dirs: list[str] = []
    if student.path.is_dir():
        try:
            entries = sorted(student.path.iterdir(), key=lambda p: p.name)
        except OSError as exc:
            raise ClassError(T("batch.row.unreadable_file", path=str(student.path), detail=exc.strerror or str(exc))) \
                from None
        for entry in entries:
            if entry.is_symlink() or entry.name.startswith("."):
                continue
            if entry.is_dir():
                dirs.append(entry.name)
            elif entry.is_file():
                files[entry.name] = _read(entry)
            if len(files) > MAX_FILES:
                raise ClassError(T("error.too_many_files", path=str(student.path), n=len(files), limit=MAX_FILES))
    else:
        files[student.path.name] = _read(student.path)
    if sum(len(data) for data in files.values()) > MAX_TOTAL_BYTES:
        raise ClassError(T("error.too_large", path=str(student.path), limit=MAX_TOTAL_BYTES))
    digest = hashlib.sha256()
    for name, data in sorted(files.items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    for name in dirs:
        digest.update(name.encode() + b"/\0")
    return {"kind": "folder" if student.path.is_dir() else "file", "digest": digest.hexdigest(), "dirs": dirs,
            "files": {name: base64.b64encode(data).decode("ascii") for name, data in files.items()}}


def _read(path: Path) -> bytes:
    """A file's bytes, at most the total a submission may hold (one more byte tells it is over)."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_TOTAL_BYTES + 1)
    except OSError as exc:
        raise ClassError(T("batch.row.unreadable_file", path=str(path), detail=exc.strerror or str(exc))) from None
    if len(data) > MAX_TOTAL_BYTES:
        raise ClassError(T("error.too_large", path=str(path), limit=MAX_TOTAL_BYTES))
    return data


def unpack(packed: dict, name: str, where: Path) -> Path:
    """Lay a packed submission out again under ``where``; returns the path to grade."""
    if packed["kind"] == "folder":
        target = where / name
        target.mkdir(parents=True)
        for sub in packed["dirs"]:
            (target / Path(sub).name).mkdir()
    else:
        target = where
        target.mkdir(parents=True, exist_ok=True)
    for file_name, data in packed["files"].items():
        (target / Path(file_name).name).write_bytes(base64.b64decode(data))
    return target if packed["kind"] == "folder" else target / Path(next(iter(packed["files"]))).name
