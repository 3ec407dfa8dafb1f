"""A class's download as the instructor has it: a folder, or the ``.zip`` a platform gave.

:class:`Download` lists every file in it as a relative POSIX path (the same whether
the download is a folder or a zip read in place, never unpacked) and reads a file's
bytes with a limit. Links are listed (so that nothing is dropped silently) but never
followed or read; a zip member whose name points outside the archive is listed as
unsafe and never read. A download that is one folder and nothing else (Gradescope's
export zip holds ``assignment_NNN_export/``) can be read from inside that folder
(:meth:`Download.enter`).
"""
from __future__ import annotations

import calendar
import os
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from grader import ziptools
from grader.i18n import T, TextError
from grader.copies import SKIPPED_FOLDERS

#: the most files a download may list (a class of 1000 students with 100 files each)
MAX_DOWNLOAD_FILES = 100_000


class DownloadError(TextError):
    """The download cannot be read at all; ``text`` is one line for the user."""


@dataclass(frozen=True)
class Entry:
    """One file of the download."""

    #: its path inside the download, POSIX style (``doejane_1_2_ex02_where.py``, ``Ann_7_assignsubmission_file_/a.py``)
    name: str
    #: its size in bytes (as the zip declares it, for a member)
    size: int
    #: ``file``, ``link`` (never followed), ``unsafe`` (a zip member named outside the archive) or
    #: ``empty`` (a folder with nothing in it)
    kind: str = "file"
    #: what a link points to, as it says
    target: str = ""
    #: when it was last changed, seconds since the epoch (a zip member's own date); 0: unknown
    mtime: float = 0.0

    @property
    def parts(self) -> tuple[str, ...]:
        return PurePosixPath(self.name).parts

    @property
    def hidden(self) -> bool:
        """A file of the system's or an editor's, not the student's (``.DS_Store``, ``__MACOSX/...``)."""
        return any(part.startswith(".") or part in SKIPPED_FOLDERS for part in self.parts)


class Download:
    """The files of a class's download, by relative path; ``skip`` (a folder inside it: the results) is left out."""

    def __init__(self, path: Path, skip: Path | None = None):
        self.path = Path(path)
        self._zip: zipfile.ZipFile | None = None
        self._root = ""
        if not self.path.exists():
            raise DownloadError(T("batch.error.no_such_path", path=str(self.path)))
        if self.path.is_file():
            if self.path.suffix.lower() != ".zip":
                raise DownloadError(T("batch.error.not_a_folder", path=str(self.path)))
            try:
                self._zip = ziptools.open_zip(self.path)  # a member named in bytes of no UTF-8: listed, never read
            except (zipfile.BadZipFile, OSError) as exc:
                raise DownloadError(T("batch.error.bad_download", path=str(self.path), detail=str(exc))) from None
        self._skip = Path(skip).resolve() if skip is not None and self._zip is None else None
        self._entries = self._list()
        #: entries left outside the folder :meth:`enter` entered (hidden files: a ``__MACOSX`` beside it)
        self.outside: list[Entry] = []

    def wrapper(self) -> str | None:
        """The one folder that holds everything (hidden files aside), if the download is that folder alone."""
        shown = [e for e in self._entries if not e.hidden]
        if not shown or any(len(e.parts) < 2 for e in shown) or len({e.parts[0] for e in shown}) != 1:
            return None
        return shown[0].parts[0]

    def enter(self, folder: str) -> None:
        """Read the download from inside ``folder`` (a top-level folder) from now on; what lies
        outside it is left out."""
        cut = len(folder) + 1
        self.outside += [e for e in self._entries if not e.name.startswith(folder + "/")]
        self._root = f"{self._root}/{folder}" if self._root else folder
        self._entries = [Entry(e.name[cut:], e.size, e.kind, e.target, e.mtime) for e in self._entries
                         if e.name.startswith(folder + "/")]

    @property
    def label(self) -> str:
        """The download as the user named it (for messages and reports)."""
        return str(self.path)

    def where(self, name: str) -> str:
        """A file of the download as the user finds it: ``submissions.zip:doejane_1_2_a.py`` or a path."""
        inner = f"{self._root}/{name}" if self._root else name
        return f"{self.path}:{inner}" if self._zip is not None else str(self.path / inner)

    def entries(self) -> list[Entry]:
        """Every file, link and unsafe member of the download, sorted by name."""
        return list(self._entries)

    def top(self) -> dict[str, list[Entry]]:
        """The entries grouped by their first path part (a top-level file is its own group)."""
        groups: dict[str, list[Entry]] = {}
        for entry in self._entries:
            groups.setdefault(entry.parts[0], []).append(entry)
        return groups

    def read(self, name: str, limit: int) -> bytes:
        """The bytes of a file (at most ``limit`` + 1, so that a caller can tell it is too large)."""
        inner = f"{self._root}/{name}" if self._root else name
        try:
            if self._zip is not None:
                with self._zip.open(inner) as member:
                    return member.read(limit + 1)  # never trust the size a zip declares
            with open(self.path / inner, "rb") as handle:
                return handle.read(limit + 1)
        except (OSError, KeyError, zipfile.BadZipFile, RuntimeError) as exc:
            raise DownloadError(T("batch.row.unreadable_file", path=self.where(name), detail=str(exc))) from None

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()

    # ------------------------------------------------------------------ listing
    def _list(self) -> list[Entry]:
        found = self._list_zip() if self._zip is not None else self._list_folder()
        if len(found) > MAX_DOWNLOAD_FILES:
            raise DownloadError(T("batch.error.too_many_files", path=str(self.path), n=len(found),
                                  limit=MAX_DOWNLOAD_FILES))
        return sorted(found, key=lambda e: e.name)

    def _list_zip(self) -> list[Entry]:
        found = []
        infos = self._zip.infolist()  # type: ignore[union-attr]
        files = [i.filename for i in infos if not i.is_dir()]
        for info in infos:
            if info.is_dir():
                if not any(name.startswith(info.filename) for name in files):
                    found.append(Entry(info.filename.rstrip("/"), 0, "empty"))
                continue
            name = PurePosixPath(info.filename.replace("\\", "/"))
            if name.is_absolute() or ".." in name.parts:
                found.append(Entry(info.filename, info.file_size, "unsafe"))
            elif stat.S_ISLNK(info.external_attr >> 16):
                target = self._zip.read(info)[:300].decode("utf-8", errors="replace")  # type: ignore[union-attr]
                found.append(Entry(str(name), info.file_size, "link", target))
            else:
                found.append(Entry(str(name), info.file_size, mtime=_zip_time(info)))
            if len(found) > MAX_DOWNLOAD_FILES:
                break
        return found

    def _list_folder(self) -> list[Entry]:
        found = []
        try:
            walk = os.walk(self.path, followlinks=False)
            for folder, dirs, files in walk:
                here = Path(folder)
                for name in sorted(dirs):
                    if (here / name).is_symlink():  # os.walk lists a link to a folder as a folder
                        found.append(Entry(_relative(here / name, self.path), 0, "link", _target(here / name)))
                dirs[:] = [d for d in dirs if not (here / d).is_symlink()
                           and not (self._skip is not None and (here / d).resolve() == self._skip)]
                if not dirs and not files and here != self.path:
                    found.append(Entry(_relative(here, self.path), 0, "empty"))
                for name in files:
                    path = here / name
                    if path.is_symlink():
                        found.append(Entry(_relative(path, self.path), path.lstat().st_size, "link", _target(path)))
                    else:
                        stat_ = path.stat()
                        found.append(Entry(_relative(path, self.path), stat_.st_size, mtime=stat_.st_mtime))
                if len(found) > MAX_DOWNLOAD_FILES:
                    break
        except OSError as exc:
            raise DownloadError(T("batch.error.unreadable_folder", path=str(self.path),
                                  detail=exc.strerror or str(exc))) from None
        return found


def _zip_time(info: zipfile.ZipInfo) -> float:
    """A zip member's date (the zip keeps local time without a zone: read as UTC, only to order files)."""
    try:
        return float(calendar.timegm((*info.date_time, 0, 0, 0)))
    except (ValueError, OverflowError):
        return 0.0


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def _target(path: Path) -> str:
    """What a link points to, as it says (never followed)."""
    try:
        return os.readlink(path)
    except OSError:
        return "?"
