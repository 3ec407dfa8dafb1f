"""The reference's outcomes, computed once for the class and shipped to every grading.

The reference is trusted and deterministic for a seed, so the batch runs it once per
exercise (:func:`reference_outcomes`, on a reference host of its own) and gives the
outcomes, as plain JSON-ready data (:mod:`grader.wire` encodes the arrays), to every
grading: a worker subprocess on this machine, or a Dask worker on another. A worker
uses them only when its chapter, reference solutions and grader code, its jaxlib and
its kind of machine are those the outcomes came from (the same :func:`content_digest`,
what :class:`~grader.outcomes.ReferenceCache` keys its disk layer by); otherwise it runs
its own reference. Timed exercises (ex06) are never shipped: their reference is
measured beside the student's, in the same run.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grader import chapters as chapter_folders, store, wire
from grader.outcomes import ReferenceCache, content_digest as folder_digest, grader_digest, machine
from grader.chapter import Chapter
from grader.grading import GradeOptions
from grader.runner import sandbox as sandboxes
from grader.runner.hosts import HostProcess
from grader.runner.jobs import JobOutcome, run_job


def content_digest(chapter: Chapter, reference_dir: Path | None = None) -> str:
    """A fingerprint of what the reference's outcomes depend on: the chapter's code and its reference
    solutions (by content), the grader's code, jaxlib's version and the kind of machine."""
    parts = [chapter.id, folder_digest(chapter.folder), folder_digest(reference_dir or chapter.solutions),
             grader_digest(), store.root().name, machine()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def reference_outcomes(chapter: Chapter, seed: int, options: GradeOptions | None = None) -> dict[str, JobOutcome]:
    """The reference's outcome of every selected exercise that a cache can hold, by exercise id.

    Outcomes already in ``options.reference_cache`` (else the on-disk cache) are not
    computed again. Timed exercises are left out, and so is an exercise whose reference
    run failed (each grading then runs it itself).
    """
    options = options or GradeOptions()
    references = options.reference_cache or ReferenceCache(store.outcomes_dir() if options.compile_cache else None)
    reference_dir = Path(options.reference_dir or chapter.solutions)
    selected = chapter.select(options.exercises)
    wanted = [ex for ex in selected if ex.needs_reference and not ex.timed]
    keys = {ex.id: ReferenceCache.key(chapter, ex, seed, reference_dir) for ex in wanted}
    found = {ex.id: references.get(keys[ex.id]) for ex in wanted}
    missing = [ex for ex in wanted if found[ex.id] is None]
    # An exercise graded without the reference's outcome still compiles programs of the grader's own
    # in every student's job (ex05's jitted function, sized to this machine): run once here, they are
    # in the reference's cache, where each student's job loads them by key.
    warm = [ex for ex in selected if not ex.needs_reference and not ex.timed] if options.compile_cache else []
    if missing or warm:
        scratch = Path(tempfile.mkdtemp(prefix="grade-reference-", dir=options.scratch_root))
        os.chmod(scratch, 0o755)
        host = _reference_host(chapter, options, reference_dir, scratch)
        pool = ThreadPoolExecutor(max_workers=options.workers or (os.cpu_count() or 1))
        try:
            host.start()
            jobs = list(pool.map(lambda ex: run_job(host.exercise_session(ex, ex.timeout_s * 2), ex.inputs(seed)),
                                 missing + warm))
            for ex, outcome in zip(missing, jobs):  # the warm-up's outcomes are not kept
                if outcome.end == "done":
                    references.put(keys[ex.id], outcome)
                    found[ex.id] = outcome
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            host.stop()
            if host.compile_cache is not None:
                store.prune(host.compile_cache)
            shutil.rmtree(scratch, ignore_errors=True)
    return {ex_id: outcome for ex_id, outcome in found.items() if outcome is not None}


def _reference_host(chapter: Chapter, options: GradeOptions, reference_dir: Path, scratch: Path) -> HostProcess:
    """A host for the reference alone, started as a grading's is (trusted code: the plain process sandbox)."""
    folders = [] if chapter.search_folder == chapter_folders.BUILT_IN else [chapter.search_folder]
    return HostProcess(side="reference", module_dir=reference_dir, scratch=scratch / "reference",
                       plan=sandboxes.SandboxPlan("process", False), modules=chapter.child_modules,
                       limits=options.limits, chapter_folders=folders,
                       compile_cache=store.reference_dir() if options.compile_cache else None)


def compute(chapter: Chapter, seed: int, options: GradeOptions) -> dict:
    """Run the reference once for the class: ``{"digest": ..., "seed": ..., "outcomes": {id: data}}``."""
    outcomes = reference_outcomes(chapter, seed, options)
    return {"digest": content_digest(chapter, options.reference_dir), "seed": seed,
            "outcomes": {ex_id: wire.encode(dataclasses.asdict(outcome)) for ex_id, outcome in outcomes.items()}}


def seed_cache(shipped: dict | None, chapter: Chapter, seed: int, reference_dir: Path | None) -> tuple[ReferenceCache, bool]:
    """A cache holding the shipped outcomes when they fit this chapter, reference and seed.

    Returns the cache and whether the shipped outcomes were used. Without them, the
    cache is the on-disk one: a worker that runs its own reference keeps it for the next.
    """
    if not shipped or shipped.get("seed") != seed or shipped.get("digest") != content_digest(chapter, reference_dir):
        return ReferenceCache(store.outcomes_dir()), False
    references = ReferenceCache()
    folder = Path(reference_dir or chapter.solutions)
    fields = {f.name for f in dataclasses.fields(JobOutcome)}
    for ex in chapter.exercises:
        data = shipped["outcomes"].get(ex.id)
        if data is not None and not ex.timed:
            outcome = JobOutcome(**{k: v for k, v in wire.decode(data).items() if k in fields})
            references.put(ReferenceCache.key(chapter, ex, seed, folder), outcome)
    return references, True
