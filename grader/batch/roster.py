"""A class: who is in the download, and each submission as bytes that can travel.

A download (a folder, or a platform's ``.zip``) is read in its layout by
:mod:`grader.batch.layouts`: one :class:`Student` per submission, named by the
platform's name and id (``doejane_12345``, ``Jane Doe_12345``) or by its folder's or
file's name. What cannot be graded (a file that is not a submission, an entry that does
not follow the layout, two students whose results folders would be one on a
case-insensitive disk) is a :class:`Student` with a ``problem``: a row of the gradebook
saying why, never a crash.

A student's name is kept as the download gives it (spaces, any script, a leading
dash); the folder of their results is :attr:`Student.key`, the same name made safe to
use as one folder under ``--out`` (no separator, no ``..``, no leading dot).

:func:`pack` reads a submission into plain data (its files' bytes): a worker on
another machine grades it without a shared disk, and its digest keys the batch's
resume manifest.
"""
from __future__ import annotations

import base64
import hashlib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from grader import safetext
from grader.batch.download import DownloadError
from grader.i18n import T, Text, TextError
from grader.submission_limits import MAX_FILES, MAX_TOTAL_BYTES

if TYPE_CHECKING:
    from grader.batch.download import Download

#: names of the batch's own files in the results folder: no student's folder may take one
RESERVED = ("grades.csv", "junit.xml", "summary.md", "summary.html", "manifest.json", "canvas.csv", "moodle.csv",
            "download.csv", "canvas-anonymous.csv")
#: the longest results folder name, in characters, and in UTF-8 bytes (file systems allow 255 bytes)
MAX_KEY = 80
MAX_KEY_BYTES = 200


@dataclass
class Person:
    """Someone a submission belongs to, as the platform names them."""

    #: the name the platform gives (``doejane``, ``Jane Doe``)
    name: str
    #: the platform's id for them (Canvas user id, Moodle participant id, Gradescope SID); ``""``: none
    id: str = ""
    #: their e-mail, when the platform gives it
    email: str = ""


@dataclass
class Student:
    """One submission of the class: graded once; a gradebook row for each person in it."""

    #: the name it is known by (the platform's name and id, or the folder's or file's name)
    name: str
    #: the download that holds its files
    download: "Download | None" = None
    #: the files it is graded on: path inside the submission -> file in the download
    files: dict[str, str] = field(default_factory=dict)
    #: links in it, never followed: path inside the submission -> what the link points to
    links: dict[str, str] = field(default_factory=dict)
    #: the submission is one file (a notebook or a zip), not a folder
    single: bool = False
    #: who it belongs to (a group submission has several)
    people: list[Person] = field(default_factory=list)
    #: the platform marked it late
    late: bool = False
    #: when it was submitted, as the platform says it
    submitted_at: str = ""
    #: why it is not graded (not a submission, a name clash); ``None``: it is graded
    problem: Text | None = None
    #: the gradebook status that goes with ``problem`` (``not_a_submission``, ``name_clash``, ``unreadable``)
    status: str | None = None
    #: what the instructor should know of its files (a version superseded, a link not followed)
    notes: list[Text] = field(default_factory=list)
    #: the folder of its results under ``--out``: its name made safe (see :func:`safe_key`)
    key: str = ""
    #: what of the download it came from, as the download names it (``Bo/``, ``bo.zip``,
    #: ``doejane_12345_*``); ``""``: its name
    origin: str = ""
    #: a group's submission: the group's name as the platform gives it (Moodle's team folder,
    #: Canvas's group download); ``""``: one person's
    group: str = ""
    #: the platform's id of that group (Moodle's group id; ``""``: none, as Moodle's default group)
    group_id: str = ""
    #: Canvas's anonymous id (anonymous grading names no student); ``""``: not anonymous
    anonymous: str = ""
    #: what it handed in besides files (Moodle's ``assignsubmission_onlinetext``, Canvas's ``text.html``): said
    #: when that is all it handed in
    online: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # a name the download gave in bytes that are no UTF-8: shown as those bytes (``\\xff``)
        self.name, self.origin = safetext.decoded(self.name), safetext.decoded(self.origin)
        self.key = self.key or safe_key(self.name)

    @property
    def display(self) -> str:
        """Where it is, as the instructor finds it in the download."""
        origin = self.origin or self.name
        return self.download.where(origin) if self.download is not None else origin


class ClassError(TextError):
    """The download itself, or one submission in it, cannot be used; ``text`` is one line for the user."""


def safe_key(name: str) -> str:
    """``name`` as one folder's name on any disk: Unicode composed (NFC), no separator or control
    character, no leading dot, dash or space, no ``..``, at most :data:`MAX_KEY` characters and
    :data:`MAX_KEY_BYTES` bytes."""
    text = unicodedata.normalize("NFC", name)
    text = "".join("_" if ch in '/\\:*?"<>|' or unicodedata.category(ch).startswith("C") else ch for ch in text)
    text = text.strip().lstrip(".-").rstrip(". ")
    text = text[:MAX_KEY].rstrip(". ")
    while len(text.encode("utf-8")) > MAX_KEY_BYTES:
        text = text[:-1].rstrip(". ")
    return text or "student"


def pack(student: Student) -> dict:
    """The submission as plain data: ``kind`` (``folder`` or ``file``), ``files`` (path: base64
    bytes) and its ``digest``. Raises :class:`ClassError` for a submission too large to send."""
    if len(student.files) > MAX_FILES:
        raise ClassError(T("error.too_many_files", path=student.display, n=len(student.files), limit=MAX_FILES))
    files: dict[str, bytes] = {}
    total = 0
    for inner, name in sorted(student.files.items()):
        try:
            data = student.download.read(name, MAX_TOTAL_BYTES)  # type: ignore[union-attr]
        except DownloadError as exc:
            raise ClassError(exc.text) from None
        total += len(data)
        if total > MAX_TOTAL_BYTES:
            raise ClassError(T("error.too_large", path=student.display, limit=MAX_TOTAL_BYTES))
        files[inner] = data
    digest = hashlib.sha256()
    for name, data in sorted(files.items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    for name, target in sorted(student.links.items()):
        digest.update(name.encode() + b"\0link\0" + target.encode())
    return {"kind": "file" if student.single else "folder", "digest": digest.hexdigest(),
            "files": {name: base64.b64encode(data).decode("ascii") for name, data in files.items()},
            "links": dict(student.links)}


def unpack(packed: dict, key: str, where: Path) -> Path:
    """Lay a packed submission out again under ``where``; returns the path to grade (a folder
    named ``key``, or the one file)."""
    target = where / safe_key(key) if packed["kind"] == "folder" else where
    target.mkdir(parents=True, exist_ok=True)
    written = target
    for name, data in packed["files"].items():
        place = _inside(target, name)
        if place is not None:
            place.parent.mkdir(parents=True, exist_ok=True)
            place.write_bytes(base64.b64decode(data))
            written = place
    if packed["kind"] == "folder":  # as links again, so that the grading says so (it never follows one)
        for name, link in packed.get("links", {}).items():
            place = _inside(target, name)
            if place is not None and not place.exists():
                place.parent.mkdir(parents=True, exist_ok=True)
                place.symlink_to(link)
    return target if packed["kind"] == "folder" else written


def _inside(folder: Path, name: str) -> Path | None:
    """Where ``name`` goes under ``folder``; ``None`` for a name that would leave it."""
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
        return None
    return folder.joinpath(*parts)
