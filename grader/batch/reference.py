"""The reference's outcomes, computed once for the class and shipped to every grading.

The reference is trusted and deterministic for a seed, so the batch runs it once per
exercise (:func:`grader.grading.reference_outcomes`) and gives the outcomes, as plain
JSON-ready data (:mod:`grader.wire` encodes the arrays), to every grading: a worker
subprocess on this machine, or a Dask worker on another. A worker uses them only when
its own reference solutions and chapter are those the outcomes came from (the same
:func:`content_digest`); otherwise it runs its own reference. Timed exercises (ex06)
are never shipped: their reference is measured beside the student's, in the same run.
"""
from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from grader import wire
from grader.chapter import Chapter
from grader.grading import GradeOptions, ReferenceCache, reference_outcomes
from grader.runner.jobs import JobOutcome


def content_digest(chapter: Chapter, reference_dir: Path | None = None) -> str:
    """A fingerprint of the chapter's code and its reference solutions, by content (machine-independent)."""
    digest = hashlib.sha256(chapter.id.encode())
    for folder in (chapter.folder, Path(reference_dir or chapter.solutions)):
        for file in sorted(folder.glob("*")):
            if file.is_file() and file.suffix in (".py", ".toml"):
                digest.update(file.name.encode() + b"\0" + hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def compute(chapter: Chapter, seed: int, options: GradeOptions) -> dict:
    """Run the reference once for the class: ``{"digest": ..., "seed": ..., "outcomes": {id: data}}``."""
    outcomes = reference_outcomes(chapter, seed, options)
    return {"digest": content_digest(chapter, options.reference_dir), "seed": seed,
            "outcomes": {ex_id: wire.encode(dataclasses.asdict(outcome)) for ex_id, outcome in outcomes.items()}}


def seed_cache(shipped: dict | None, chapter: Chapter, seed: int, reference_dir: Path | None) -> tuple[ReferenceCache, bool]:
    """A cache holding the shipped outcomes when they fit this chapter, reference and seed.

    Returns the cache and whether the shipped outcomes were used.
    """
    cache = ReferenceCache()
    if not shipped or shipped.get("seed") != seed or shipped.get("digest") != content_digest(chapter, reference_dir):
        return cache, False
    folder = Path(reference_dir or chapter.solutions)
    fields = {f.name for f in dataclasses.fields(JobOutcome)}
    for ex in chapter.exercises:
        data = shipped["outcomes"].get(ex.id)
        if data is not None and not ex.timed:
            outcome = JobOutcome(**{k: v for k, v in wire.decode(data).items() if k in fields})
            cache.put(ReferenceCache.key(chapter, ex, seed, folder), outcome)
    return cache, True
