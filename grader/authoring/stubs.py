"""Generate the student's stubs from the reference solutions.

A solution module marks what the student writes with two kinds of blocks::

    # BEGIN SOLUTION
    return x * factor
    # END SOLUTION
    # BEGIN STUB
    #| # TODO(ex01): multiply x by factor.
    #| raise NotImplementedError("ex01: scale")
    # END STUB

The stub keeps everything else, drops every SOLUTION block and un-comments every
STUB block (each of its lines starts with ``#|`` after the indentation). In the
solution module the STUB blocks are comments, so the solution runs as written.
Every SOLUTION block must be followed by a STUB block (it may be empty), so that no
answer disappears without an instruction in its place.

Writing stubs never destroys work: a stub file that differs from what would be
written is replaced only when it is an old stub (what the solution as committed at
git HEAD generates); any other file is someone's work, replaced only when forced, and
then copied to a backup beside it first.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Callable, Sequence

_MARKER = re.compile(r"^\s*# (BEGIN|END) (SOLUTION|STUB)\s*$")
_STUB_LINE = re.compile(r"^(\s*)#\|(?: (.*))?$")


class StubFormatError(ValueError):
    """A solution module whose markers do not follow the format above."""


@dataclass(frozen=True)
class StubDiff:
    """One stub file that differs from what its solution generates."""

    #: the stub's file name
    name: str
    #: ``missing`` (no such file) or ``differs`` (the file holds something else)
    reason: str
    #: True when the file that differs is not an old stub (the one generated from its
    #: solution as committed at git HEAD), so it may hold someone's work
    edited: bool = False
    #: where the file was copied before it was replaced (only for an edited file, forced)
    backup: Path | None = None
    #: where the file is
    path: Path | None = None


@dataclass(frozen=True)
class Generated:
    """A file generated from the solutions (a stub, the chapter's notebook)."""

    #: where it goes
    path: Path
    #: what it should hold
    text: str
    #: what the solutions as committed at git HEAD generate for it (``None`` when that is
    #: not known): a file holding that is an old generated file, never someone's work
    old: Callable[[], str | None]


class StubsInTheWay(Exception):
    """Stub files hold work of their own and were not forced: nothing was written."""

    def __init__(self, diffs: list[StubDiff]):
        super().__init__(", ".join(d.name for d in diffs))
        self.diffs = diffs


def make_stub(source: str, *, filename: str = "<solution>") -> str:
    """Return the stub text for one solution module's text."""
    out: list[str] = []
    state = "code"  # code | solution | stub
    last_closed = None
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        marker = _MARKER.match(line)
        where = f"{filename}:{number}"
        if marker:
            edge, kind = marker.groups()
            expected = {
                ("code", "BEGIN", "SOLUTION"): "solution",
                ("code", "BEGIN", "STUB"): "stub",
                ("solution", "END", "SOLUTION"): "code",
                ("stub", "END", "STUB"): "code",
            }.get((state, edge, kind))
            if expected is None:
                raise StubFormatError(f"{where}: unexpected '# {edge} {kind}' here")
            if (edge, kind) == ("BEGIN", "STUB") and last_closed != "SOLUTION":
                raise StubFormatError(f"{where}: a STUB block must follow a SOLUTION block")
            if edge == "BEGIN" and kind == "SOLUTION" and last_closed == "SOLUTION":
                raise StubFormatError(f"{where}: the SOLUTION block above has no STUB block")
            last_closed = kind if edge == "END" else None
            state = expected
            continue
        if state == "code":
            if last_closed == "SOLUTION" and line.strip():
                raise StubFormatError(f"{where}: a SOLUTION block must be followed by a STUB block")
            if line.strip():
                last_closed = None
            out.append(line)
        elif state == "stub":
            match = _STUB_LINE.match(line.rstrip("\n"))
            if not match:
                raise StubFormatError(f"{where}: a line inside a STUB block must start with '#|'")
            indent, text = match.groups()
            out.append(f"{indent}{text}\n" if text else "\n")
    if state != "code":
        raise StubFormatError(f"{filename}: the file ends inside a {state.upper()} block")
    if last_closed == "SOLUTION":
        raise StubFormatError(f"{filename}: the last SOLUTION block has no STUB block")
    return "".join(out)


def committed_text(path: Path) -> str | None:
    """The text of ``path`` as committed at git HEAD; None without git, outside a
    repository, or when the file is not committed."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(path.parent), *args], capture_output=True, timeout=30, check=False)

    try:
        top = git("rev-parse", "--show-toplevel")
        if top.returncode != 0:
            return None
        relative = path.resolve().relative_to(Path(top.stdout.decode().strip()).resolve())
        shown = git("show", f"HEAD:{relative.as_posix()}")
        return shown.stdout.decode("utf-8") if shown.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, UnicodeDecodeError):
        return None


def _old_stub(solution: Path) -> str | None:
    """The stub the solution as committed at git HEAD generates, if there is one."""
    committed = committed_text(solution)
    if committed is None:
        return None
    try:
        return make_stub(committed, filename=f"HEAD:{solution.name}")
    except StubFormatError:
        return None


def _backup(target: Path, stamp: str) -> Path:
    """Copy ``target`` to ``<name>.bak-<stamp>`` beside it (never over an earlier backup)."""
    backup = target.with_name(f"{target.name}.bak-{stamp}")
    number = 1
    while backup.exists():
        number += 1
        backup = target.with_name(f"{target.name}.bak-{stamp}-{number}")
    shutil.copy2(target, backup)
    return backup


def generate(solutions: Path, exercises: Path, *, write: bool, force: bool = False,
             more: Sequence[Generated] = ()) -> list[StubDiff]:
    """Compare (or, with ``write``, rewrite) every stub of a chapter with its solution, and
    ``more`` files generated from the solutions (the chapter's notebook): see :func:`sync`."""
    stubs = [Generated(exercises / solution.name,
                       make_stub(solution.read_text(encoding="utf-8"), filename=str(solution)),
                       partial(_old_stub, solution))
             for solution in sorted(solutions.glob("*.py"))]
    return sync([*stubs, *more], write=write, force=force)


def sync(files: Sequence[Generated], *, write: bool, force: bool = False) -> list[StubDiff]:
    """Compare (or, with ``write``, rewrite) generated files with what they should hold.

    Everything is generated before anything is written, so a format error writes
    nothing. With ``write``, a file that holds work of its own (``edited``: neither what
    is generated now nor an old generated file) stops the whole write with
    :class:`StubsInTheWay`, unless ``force``: then it is copied to a backup beside it
    (``<name>.bak-<date>-<time>``) and replaced.
    """
    diffs: list[StubDiff] = []
    texts: dict[Path, str] = {}
    for file in files:
        current = file.path.read_text(encoding="utf-8") if file.path.exists() else None
        if current == file.text:
            continue
        edited = current is not None and current != file.old()
        diffs.append(StubDiff(file.path.name, "missing" if current is None else "differs", edited, path=file.path))
        texts[file.path] = file.text
    if not write:
        return diffs
    in_the_way = [d for d in diffs if d.edited]
    if in_the_way and not force:
        raise StubsInTheWay(in_the_way)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    written = []
    for diff in diffs:
        diff.path.parent.mkdir(parents=True, exist_ok=True)
        backup = _backup(diff.path, stamp) if diff.edited else None
        diff.path.write_text(texts[diff.path], encoding="utf-8")
        written.append(replace(diff, backup=backup))
    return written
