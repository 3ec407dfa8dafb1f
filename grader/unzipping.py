"""A zip submission unpacked (:func:`unzip`): its modules and notebooks only, within the limits of
:mod:`grader.submission_limits`, its links never made, the names this machine cannot hold never written,
each file given the time the zip recorded for it; then the folders that hold nothing but one folder
descended (:func:`single_folder`). What makes a zip unusable raises :class:`ZipError`, one line."""
from __future__ import annotations

import os
import stat
import time
import zipfile
from pathlib import Path, PurePosixPath

from grader import safetext, ziptools
from grader.copies import SKIPPED_FOLDERS
from grader.i18n import T, TextError
from grader.submission_limits import MAX_FILE_BYTES, MAX_FILES, MAX_TOTAL_BYTES


class ZipError(TextError):
    """The zip cannot be unpacked; ``text`` is one line for the user (a :class:`grader.submission.SubmissionError`
    once it reaches the submission)."""


def unzip(path: Path, target: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Unpack the zip's modules and notebooks into ``target``; its links (never made) and the files whose
    names cannot be held here (never written: name -> why)."""
    try:
        archive = ziptools.open_zip(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ZipError(T("error.bad_zip", path=str(path), detail=str(exc))) from None
    with archive:
        members = [m for m in archive.infolist() if not m.is_dir()]
        wanted = [m for m in members if PurePosixPath(m.filename).suffix in (".py", ".ipynb")
                  and not any(part in SKIPPED_FOLDERS for part in PurePosixPath(m.filename).parts)]
        unheld = {safetext.decoded(m.filename): why for m in wanted
                  if (why := ziptools.name_problem(m.filename)) is not None}
        wanted = [m for m in wanted if ziptools.name_problem(m.filename) is None]
        links = {m.filename: archive.read(m)[:300].decode("utf-8", errors="replace") for m in wanted
                 if stat.S_ISLNK(m.external_attr >> 16)}  # a link in the zip: never made, never followed
        wanted = [m for m in wanted if m.filename not in links]
        if len(wanted) > MAX_FILES:
            raise ZipError(T("error.too_many_files", path=str(path), n=len(wanted), limit=MAX_FILES))
        if sum(m.file_size for m in wanted) > MAX_TOTAL_BYTES:
            raise ZipError(T("error.too_large", path=str(path), limit=MAX_TOTAL_BYTES))
        for member in wanted:
            name = PurePosixPath(member.filename)
            if name.is_absolute() or ".." in name.parts:
                raise ZipError(T("error.zip_path", path=str(path), name=member.filename))
            destination = target.joinpath(*name.parts)
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source:
                data = source.read(MAX_FILE_BYTES + 1)  # never trust the declared size
            if len(data) > MAX_FILE_BYTES:
                raise ZipError(T("error.file_too_large", path=f"{path}:{member.filename}", limit=MAX_FILE_BYTES))
            destination.write_bytes(data)
            keep_time(destination, member)
    if not target.exists() and not links:
        raise ZipError(T("error.empty_zip", path=str(path)))
    target.mkdir(parents=True, exist_ok=True)
    return links, unheld


def keep_time(file: Path, member: zipfile.ZipInfo) -> None:
    """Give an unzipped file the time the zip recorded for it (which copy was saved last tells
    which one a student worked in, :mod:`grader.copies`)."""
    try:
        when = time.mktime((*member.date_time, 0, 0, -1))
        os.utime(file, (when, when))
    except (OverflowError, ValueError, OSError):
        pass


def single_folder(folder: Path) -> Path:
    """Descend through folders that hold nothing but one folder."""
    while True:
        entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
        if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
            folder = entries[0]
            continue
        return folder
