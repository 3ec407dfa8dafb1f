"""The programs every grading of a chapter compiles, built once before the first submission: :func:`build`.

A grading compiles (or loads from JAX's persistent cache, :mod:`grader.store`) the
reference's programs and the programs of the grader's own code that every submission
runs (JAX's own operations on the hidden inputs' shapes, the timing exercises'
instruments and baselines). On a machine where nothing was built, the first grading
compiles them all, on both sides at once: it took about 2.7 times as long as the
second. A Gradescope autograder gives every submission a fresh container made from the
image its ``setup.sh`` built, so every submission would pay that first grading.

:func:`build` grades the reference solutions once, as a student's submission, with a
fixed seed: the reference's jobs put their programs in the reference's cache, as any
grading does, and the programs the student's side compiled of the reference's code
(the calls only a student's job makes: compile windows, purity, tracing) are added to
it. They are programs of the trusted code, and a student's job loads one only when
its own code lowers to exactly the same program (the key is a digest of the program):
nothing is given away. The student's side compiles into a folder of its own that only
this grading's jobs know, and the programs are copied from it as files of the grader's
own (never the jobs' uids'), then it is removed.

``setup.sh`` runs it (``python -m grader.gradescope --build``), and so can anyone
before a first grading: ``grade dev build``.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from grader import store
from grader.chapter import Chapter
from grader.grading import GradeOptions, Interrupted, Machinery, grade
from grader.runner import devices

#: the seed of the building grading (any seed gives the same programs but ex08's drawn shapes)
SEED = 20240501


def build(chapter: Chapter, *, reference_dir: Path | None = None, sandbox: str = "auto", ahead: int = 0) -> dict:
    """Build ``chapter``'s programs into this machine's cache (:func:`grader.store.reference_dir`); returns
    ``programs`` (how many the reference's cache holds now), ``added`` (copied from the student's side),
    ``score`` and ``max_score`` of the reference's grading (the reference gets full marks), ``seconds``."""
    started = time.monotonic()
    reference_dir = Path(reference_dir or chapter.solutions)
    target = store.reference_dir()
    if target is None:
        raise OSError(f"the grader's cache cannot be written: {store.root()}")
    with tempfile.TemporaryDirectory(prefix="grade-build-") as tmp:
        os.chmod(tmp, 0o700)
        copy = Path(tmp) / chapter.id  # a path of its own: its student's cache is a folder nobody else knows
        shutil.copytree(reference_dir, copy, ignore=shutil.ignore_patterns("__pycache__", ".*"))
        own = store.student_dir(copy)
        try:
            # on a device that serves one process at a time (a TPU) the build runs on the CPU: what every
            # grading compiles there is the CPU's (the device's exercises compile at their first grading)
            found = devices.accelerator()
            # the course's own solutions: trusted code, graded in any sandbox the gradings to come will use
            report = grade(copy, GradeOptions(chapter=chapter.id, seed=SEED, sandbox=sandbox, allow_weak_sandbox=True,
                                              reference_dir=reference_dir,
                                              device="cpu" if found is not None and found.exclusive else "auto"),
                           Machinery(ahead=ahead))
            added = _adopt(own, target) if own is not None else 0
        finally:
            if own is not None:
                shutil.rmtree(own, ignore_errors=True)
    programs = sum(1 for entry in target.iterdir() if entry.name.endswith("-cache"))
    built = {"programs": programs, "added": added, "score": report.score, "max_score": report.max_score,
             "seconds": round(time.monotonic() - started, 1)}
    _note(built_marker(chapter, reference_dir), built)  # a first grading need not build them again
    return built


def _note(marker: Path, built: dict) -> None:
    import json

    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(built), encoding="utf-8")
    except OSError:  # a read-only cache: a later first grading builds again
        pass


def _adopt(source: Path, target: Path) -> int:
    """Copy the programs of ``source`` that ``target`` lacks, as files of this process (mode 0644, the
    reference's cache's own: readable by key from a sandbox, written by nobody else); how many."""
    added = 0
    for entry in sorted(source.iterdir()):
        if not entry.name.endswith("-cache") or not entry.is_file() or entry.is_symlink():
            continue
        path = target / entry.name
        if path.exists():
            continue
        tmp = target / f".{entry.name}.{os.getpid()}.tmp"
        try:
            tmp.write_bytes(entry.read_bytes())
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
            added += 1
        except OSError:
            tmp.unlink(missing_ok=True)
    return added


#: ``GRADER_BUILD=0`` turns the first run's build off (the test suite's default, and for anyone who wants it)
BUILD_ENV = "GRADER_BUILD"


def built_marker(chapter: Chapter, reference_dir: Path | None = None) -> Path:
    """Where a machine notes that ``chapter``'s programs were built (or could not be): in the cache of this
    JAX version, keyed by the reference's code (new solutions are built again), by how programs are keyed
    and by which exercises compile with which options (programs kept otherwise are built again)."""
    import hashlib

    from grader.child.jax_setup import KEYS
    from grader.child.quick_compile import QUICK
    from grader.outcomes import folder_digest

    digest = folder_digest(Path(reference_dir or chapter.solutions))[:16]
    compiled = repr((QUICK, sorted(ex.id for ex in chapter.exercises if ex.quick_compile),
                     sorted(ex.id for ex in chapter.exercises if ex.quick_until_timed)))
    options = hashlib.sha256(compiled.encode()).hexdigest()[:8]
    return store.root() / "built" / f"{chapter.id}-{digest}-{KEYS}-{options}.json"


def build_once(chapter: Chapter, *, sandbox: str = "auto", say=None, ahead: int = 0) -> dict | None:
    """Before the first grading of ``chapter`` on this machine, :func:`build` its programs (``say(T)``
    is told before and after), so that the first grading of a student's work costs what a second one
    does; ``None`` (and nothing said) when they were built already, when the chapter has no reference
    solutions here (a released chapter grades from its records) or with ``GRADER_BUILD=0``. A build
    that fails is noted as tried (its reason logged) and not tried again: gradings then compile as they
    did before."""
    import logging

    from grader.i18n import T

    if os.environ.get(BUILD_ENV, "1") == "0" or not chapter.solutions.is_dir():
        return None
    try:
        marker = built_marker(chapter)
        if marker.exists():
            return None
        marker.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only cache: nothing can be kept, nothing built
        return None
    if say:
        say(T("build.first", chapter=chapter.id))
    try:
        built = build(chapter, sandbox=sandbox, ahead=ahead)
    except Interrupted:  # Ctrl-C: the command stops (nothing noted: the next run builds)
        raise KeyboardInterrupt from None
    except Exception as exc:  # noqa: BLE001 - the grading itself goes on and says what is wrong
        logging.getLogger("grader").warning("the first run's build failed: %s", exc)
        built = {"failed": str(exc)[:300]}
        _note(marker, built)  # not tried at every grading
    if say and "failed" not in built:
        say(T("build.done", **built))
    return built
