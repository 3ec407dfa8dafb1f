"""The reference's outcomes, computed once for the class and shipped to every grading.

The reference is trusted and deterministic for a seed, so the batch runs it once per
exercise (:func:`reference_outcomes`, on a reference host of its own) and gives the
outcomes, as plain JSON-ready data (:mod:`grader.wire` encodes the arrays), to every
grading: a worker subprocess on this machine, or a Dask worker on another. A worker
uses them only when its chapter, reference solutions and grader code, its jaxlib and
its kind of machine are those the outcomes came from (the same :func:`outcomes_digest`,
what :class:`~grader.outcomes.ReferenceCache` keys its disk layer by); otherwise it runs
its own reference. Timed exercises (ex06) are never shipped: their reference is
measured beside the student's, in the same run.
"""
from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from grader import store, wire
from grader.outcomes import ReferenceCache, folder_digest, grader_digest, machine
from grader.chapter import Chapter
from grader.grading import GradeOptions, Machinery
from grader.runner.job_sessions import JobOutcome, run_job
from grader.runner.reference_host import reference_jobs
from grader.scheduling import at_once_default, longest_first


def outcomes_digest(chapter: Chapter, reference_dir: Path | None = None) -> str:
    """A fingerprint of what the reference's outcomes depend on: the chapter's code and its reference
    solutions (by content), the grader's code, jaxlib's version and the kind of machine."""
    parts = [chapter.id, folder_digest(chapter.folder), folder_digest(reference_dir or chapter.solutions),
             grader_digest(), store.root().name, machine()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def reference_outcomes(chapter: Chapter, seed: int, options: GradeOptions | None = None,
                       machinery: Machinery | None = None) -> dict[str, JobOutcome]:
    """The reference's outcome of every selected exercise that a cache can hold, by exercise id.

    Outcomes already in ``machinery.reference_cache`` (else the on-disk cache) are not
    computed again. Timed exercises are left out, and so is an exercise whose reference
    run failed (each grading then runs it itself).
    """
    options, machinery = options or GradeOptions(), machinery or Machinery()
    references = machinery.reference_cache or ReferenceCache(store.outcomes_dir() if options.compile_cache else None)
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
        # The warm-up is not waited for, and one job more than the cores runs at once, as in a grading:
        # ex05's harness mostly sleeps in its instruments, and waited for, it kept a class's workers
        # waiting with the cores idle (about 0.7 s of a batch's start here) after the other jobs ended
        ran = reference_jobs(chapter, longest_first(missing, store.durations(chapter.id)),
                             lambda host, ex: run_job(host.exercise_session(ex, ex.timeout_s * 2), ex.inputs(seed)),
                             reference_dir=reference_dir, at_once=machinery.at_once or at_once_default(),
                             scratch_root=machinery.scratch_root, limits=options.limits,
                             compile_cache=store.reference_dir() if options.compile_cache else None, warm_up=warm)
        for ex in missing:
            if ran[ex.id].end == "done":
                references.put(keys[ex.id], ran[ex.id])
                found[ex.id] = ran[ex.id]
    return {ex_id: outcome for ex_id, outcome in found.items() if outcome is not None}


def compute(chapter: Chapter, seed: int, options: GradeOptions) -> dict:
    """Run the reference once for the class: ``{"digest": ..., "seed": ..., "outcomes": {id: data}}``."""
    outcomes = reference_outcomes(chapter, seed, options)
    return {"digest": outcomes_digest(chapter, options.reference_dir), "seed": seed,
            "outcomes": {ex_id: wire.encode(outcome.fields()) for ex_id, outcome in outcomes.items()}}


def seed_cache(shipped: dict | None, chapter: Chapter, seed: int,
               reference_dir: Path | None) -> tuple[ReferenceCache, bool]:
    """A cache holding the shipped outcomes when they fit this chapter, reference and seed.

    Returns the cache and whether the shipped outcomes were used. Without them, the
    cache is the on-disk one: a worker that runs its own reference keeps it for the next.
    """
    if not shipped or shipped.get("seed") != seed or shipped.get("digest") != outcomes_digest(chapter, reference_dir):
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
