"""Which chapters a submission's contents name (:func:`chapters_in`): told from its exercise file names, or
else from the functions its single notebook defines, without running anything."""
from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath

from grader import ziptools
from grader.cell_names import defined_names
from grader.chapter import Chapter
from grader.submission_limits import MAX_TOTAL_BYTES


def chapters_in(path: Path, chapters: list[Chapter]) -> list[Chapter]:
    """The chapters whose exercises ``path`` holds, told from its contents alone.

    A folder or a zip is told by its exercise file names (``ex01_jit_forms.py``), or
    else by its single notebook; a notebook by the chapter's function names its code
    cells define. The chapters that match best are returned (several on a tie, none
    when nothing matches).
    """
    names, notebook = _contents(path)
    scores = {c.id: sum(ex.filename in names for ex in c.exercises) for c in chapters}
    if not any(scores.values()) and notebook is not None:
        defined = defined_names(notebook)
        scores = {c.id: len(defined & {f for ex in c.exercises for f in ex.functions}) for c in chapters}
    best = max(scores.values(), default=0)
    return [c for c in chapters if best and scores[c.id] == best]


def _contents(path: Path) -> tuple[set[str], bytes | None]:
    """The file names ``path`` holds and the text of its single notebook, if it has one."""
    try:
        if path.is_dir():
            files = [p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")]
            notebooks = [p for p in files if p.suffix == ".ipynb"]
            one = notebooks[0].read_bytes() if len(notebooks) == 1 and notebooks[0].stat().st_size <= MAX_TOTAL_BYTES \
                else None
            return {p.name for p in files}, one
        if path.suffix.lower() == ".ipynb":
            return set(), path.read_bytes() if path.stat().st_size <= MAX_TOTAL_BYTES else None
        if path.suffix.lower() == ".zip":
            with ziptools.open_zip(path) as archive:
                members = [m for m in archive.infolist() if not m.is_dir() and "__MACOSX" not in m.filename
                           and m.filename not in archive.bad_names]
                notebooks = [m for m in members if m.filename.endswith(".ipynb")]
                one = None
                if len(notebooks) == 1:
                    with archive.open(notebooks[0]) as member:
                        one = member.read(MAX_TOTAL_BYTES)
                return {PurePosixPath(m.filename).name for m in members}, one
    except (OSError, zipfile.BadZipFile, RuntimeError):
        pass  # unreadable: load() says so in its own words
    return set(), None
