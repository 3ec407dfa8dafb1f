"""Seeds drawn ahead: the reference's outcomes for a student's next gradings, computed while it runs.

A grading with a fresh seed runs the reference's job of every exercise the student attempted,
and each pays what a new process pays for a program: tracing, lowering, loading it (most of
its ~0.15 CPU seconds); running the programs on the inputs is a few milliseconds. So when a
student grades their own work (``grade`` without ``--seed``), the grader keeps a few seeds
drawn ahead for the chapter, in its cache, shown to nobody (:func:`draw`); each reference job
that runs probes the reference again on the hidden inputs of each of them, with the programs
it has compiled already (:func:`grader.child.job.probe_ahead`), and the grader keeps those
outcomes as it keeps any (:class:`grader.outcomes.ReferenceCache`). The next grading takes the
first of those seeds as its own fresh seed (and draws another), and finds the reference's
outcomes known: no reference job runs for them (only a timed exercise's, which is measured in
the same run, always).

A seed is handed out once: taken from the list under a lock, never put back; the report shows
it as any fresh seed (a replay, ``--seed``, takes none). Where the seeds cannot be kept private
to one machine's gradings, none is drawn ahead: a Gradescope image is built once and copied
into every submission's container (its ``setup.sh`` builds with none), and a batch grades a
class on one seed of its own. ``GRADER_SEEDS_AHEAD=0`` turns it off; ``=N`` keeps ``N``.
"""
from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from grader import store

#: how many seeds a student's gradings keep drawn ahead (``$GRADER_SEEDS_AHEAD`` to change, 0: none)
ENV = "GRADER_SEEDS_AHEAD"
DEFAULT = 8
#: the most one grading keeps drawn
MOST = 16


def count() -> int:
    """How many seeds to keep drawn ahead (:data:`ENV`, else :data:`DEFAULT`)."""
    try:
        wanted = int(os.environ.get(ENV, DEFAULT))
    except ValueError:
        wanted = DEFAULT
    return max(0, min(MOST, wanted))


def new_seed() -> int:
    """A fresh seed (the report's ``seed``): never 0."""
    return secrets.randbelow(2**31 - 1) + 1


def _file(chapter: str) -> Path:
    return store.root() / "seeds-ahead" / f"{chapter}.json"


def draw(chapter: str, keep: int, *, take: bool) -> tuple[int | None, list[int]]:
    """The seed this grading takes (``None`` when ``take`` is false or none is drawn yet) and the
    ``keep`` seeds drawn ahead after it (new ones drawn to make up the number), in one step under
    the file's lock: two gradings at once never take the same seed. ``(None, [])`` where the
    cache cannot be written."""
    path = _file(chapter)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)  # the next gradings' hidden inputs: the grader's alone, no job's uid
        with open(os.open(path.with_suffix(".lock"), os.O_CREAT | os.O_RDWR, 0o600), "a+") as lock:
            import fcntl  # here: native Windows has none, and is told so before any grading

            fcntl.flock(lock, fcntl.LOCK_EX)
            seeds = _read(path)
            taken = seeds.pop(0) if take and seeds else None
            while len(seeds) < keep:
                seed = new_seed()
                if seed != taken and seed not in seeds:
                    seeds.append(seed)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            with open(os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600), "w", encoding="utf-8") as out:
                out.write(json.dumps({"seeds": seeds}))
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
            return taken, seeds[:keep]
    except OSError:  # a read-only cache: every grading draws its own seed, and nothing is drawn ahead
        return None, []


def _read(path: Path) -> list[int]:
    try:
        seeds = json.loads(path.read_text(encoding="utf-8")).get("seeds")
    except (OSError, ValueError, AttributeError):
        return []
    if not isinstance(seeds, list):
        return []
    return [s for s in seeds if type(s) is int and 0 < s < 2**31]
