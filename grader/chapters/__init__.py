"""The chapters: one folder each, ``<id>/chapter.toml`` beside one folder per exercise.

A chapter outside this package (a course's own, or one made by ``grade dev
new-chapter --root DIR``) is found through the ``GRADER_CHAPTERS`` environment variable
(folders holding chapter folders, separated by ``os.pathsep``); :func:`extend` adds
such a folder to this package's path, so that its modules import as
``grader.chapters.<id>.<module>`` in the grader and in the sandboxed child alike.
"""
from __future__ import annotations

import os
from pathlib import Path

BUILT_IN = Path(__file__).resolve().parent


def search_path() -> list[Path]:
    """Folders that hold chapter folders: ``GRADER_CHAPTERS`` first, then the built-in ones."""
    extra = [Path(p).resolve() for p in os.environ.get("GRADER_CHAPTERS", "").split(os.pathsep) if p]
    return [p for p in extra if p.is_dir()] + [BUILT_IN]


def extend(folders: list[str] | list[Path]) -> None:
    """Make the chapters in ``folders`` importable as ``grader.chapters.<id>``."""
    for folder in folders:
        text = str(Path(folder).resolve())
        if text not in __path__:
            __path__.append(text)
