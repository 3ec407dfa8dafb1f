"""A zip read even when one of its members' names is not what the zip says it is.

A zip member whose header says its name is UTF-8 (flag bit 11) but whose bytes are not makes
:class:`zipfile.ZipFile` refuse the whole archive (``UnicodeDecodeError``), so one file a student
named with bytes of another encoding would cost every other file beside it. :func:`open_zip`
reads such an archive all the same: those members are listed under their bytes as
``surrogateescape`` text (``b'\\xff'`` is ``'\\udcff'``), named in :attr:`ZipFile.bad_names`,
and never opened; every other member reads as usual. Nothing is unpacked or copied: the
archive's central directory is read through a view that clears that one flag of those members.

:func:`name_problem` says whether a member's (or any file's) path can be written here at all:
a part longer than a file system holds, or bytes that are no UTF-8.
"""
from __future__ import annotations

import io
import struct
import zipfile
from typing import Any
from pathlib import Path, PurePosixPath

_CENTRAL = b"PK\x01\x02"
_UTF8_FLAG = 0x800
#: the longest name part (NAME_MAX on Linux's and macOS's file systems), and a whole path inside a submission
NAME_BYTES = 255
PATH_BYTES = 1024


def name_problem(name: str) -> str | None:
    """Why a relative path cannot be written on this machine: ``not_utf8`` (bytes that are no UTF-8, as
    ``surrogateescape`` text), ``too_long`` (a part over :data:`NAME_BYTES` bytes, or the whole over
    :data:`PATH_BYTES`); ``None``: it can."""
    try:
        parts = [part.encode("utf-8") for part in PurePosixPath(name).parts]
    except UnicodeEncodeError:
        return "not_utf8"
    if any(len(part) > NAME_BYTES for part in parts) or sum(len(part) + 1 for part in parts) > PATH_BYTES:
        return "too_long"
    return None


def open_zip(path: Path | str) -> zipfile.ZipFile:
    """The zip at ``path``; ``bad_names`` (a set, often empty): members whose names are not the UTF-8
    their header claims. Raises what :class:`zipfile.ZipFile` raises for a broken archive."""
    try:
        archive = zipfile.ZipFile(path)
    except UnicodeDecodeError:
        archive = _lenient(Path(path))
    archive.bad_names = getattr(archive, "bad_names", set())  # type: ignore[attr-defined]
    return archive


def _lenient(path: Path) -> zipfile.ZipFile:
    handle = open(path, "rb")
    try:
        patches, bad = _bad_entries(handle)
        archive = zipfile.ZipFile(_Patched(handle, patches))
    except Exception:
        handle.close()
        raise
    names = set()
    for info in archive.infolist():
        raw = bad.get(info.orig_filename)
        if raw is not None:  # read as cp437 through the view: shown as its bytes, never opened by name
            info.filename = raw.decode("utf-8", "surrogateescape")
            names.add(info.filename)
    archive.bad_names = names  # type: ignore[attr-defined]
    return archive


def _bad_entries(handle) -> tuple[dict[int, bytes], dict[str, bytes]]:
    """Where to clear the UTF-8 flag (file offset: the two flag bytes) and each such member's raw name
    (by the name zipfile reads once the flag is cleared: the bytes as cp437)."""
    zf: Any = zipfile  # its private reading of the end record, which typeshed does not describe
    end = zf._EndRecData(handle)  # noqa: SLF001 - the same reading of the end record zipfile makes
    if end is None:
        raise zipfile.BadZipFile("File is not a zip file")
    size = end[zf._ECD_SIZE]  # noqa: SLF001
    start = end[zf._ECD_LOCATION] - size  # noqa: SLF001
    if end[zf._ECD_SIGNATURE] == zf.stringEndArchive64:  # noqa: SLF001
        start -= zf.sizeEndCentDir64 + zf.sizeEndCentDir64Locator
    handle.seek(start)
    data = handle.read(size)
    patches: dict[int, bytes] = {}
    bad: dict[str, bytes] = {}
    at = 0
    while at + 46 <= len(data) and data[at:at + 4] == _CENTRAL:
        flags, = struct.unpack_from("<H", data, at + 8)
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, at + 28)
        raw = data[at + 46:at + 46 + name_len]
        if flags & _UTF8_FLAG:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                patches[start + at + 8] = struct.pack("<H", flags & ~_UTF8_FLAG)
                bad[raw.decode("cp437")] = raw
        at += 46 + name_len + extra_len + comment_len
    return patches, bad


class _Patched(io.RawIOBase):
    """A read-only view of a file with a few bytes replaced (``patches``: offset -> bytes)."""

    def __init__(self, handle, patches: dict[int, bytes]):
        self._handle, self._patches = handle, patches

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._handle.seek(offset, whence)

    def tell(self) -> int:
        return self._handle.tell()

    def read(self, size: int = -1) -> bytes:
        where = self._handle.tell()
        data = self._handle.read(size)
        if not any(where <= at < where + len(data) for at in self._patches):
            return data
        out = bytearray(data)
        for at, value in self._patches.items():
            for i, byte in enumerate(value):
                if where <= at + i < where + len(out):
                    out[at + i - where] = byte
        return bytes(out)

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self._handle.close()
        super().close()
