"""Pairs of students alike across a class (``grade batch --similarity``, ``grade similarity RESULTS``).

A batch with ``--similarity`` has each student's jobs record what their graded functions trace to
(:mod:`grader.child.programs`, in the sandbox, as every other record) beside the exercise files' text, and
keeps both in ``RESULTS/.similarity/programs/<student>.json`` (:func:`keep_programs`): the instructor's
alone, never in a student's folder. :func:`similarity_report` then reads them back (:func:`collect`), takes
the baseline every student shares by construction (the chapter's stubs; the reference solutions' source and
programs, graded once with the same seed), ranks the pairs of each exercise with :mod:`grader.similarity`
(the source's fingerprints the MOSS way and the traced program canonicalised, side by side), and writes
``similarity.csv`` and ``similarity.html`` (both submissions side by side, the matching lines marked).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader.batch.gradebook import write_text

#: the folder, in a batch's results, of what the class's similarity reads (a student's key never starts with a dot)
FOLDER = ".similarity"


def programs_path(out: Path, name: str) -> Path:
    return Path(out) / FOLDER / "programs" / f"{name}.json"


def keep_programs(out: Path, name: str, programs: dict[str, Any]) -> None:
    """Keep one student's programs and exercise files' text (``Report.programs``) for the class's similarity."""
    write_text(programs_path(out, name), json.dumps(programs, ensure_ascii=False, sort_keys=True))


def has_programs(out: Path, name: str) -> bool:
    """Whether a student's programs are kept (a batch resumed with ``--similarity`` grades again one without)."""
    return programs_path(out, name).is_file()


def collect(out: Path) -> dict[str, dict[str, Any]]:
    """Every student's programs kept in ``out``, by student: ``{exercise: {"file", "source", "functions"}}``;
    a file that cannot be read is left out."""
    found: dict[str, dict[str, Any]] = {}
    folder = Path(out) / FOLDER / "programs"
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            found[path.stem] = data
    return found
