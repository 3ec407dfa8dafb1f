"""A batch's reference run for the class (:func:`grader.batch.reference.reference_outcomes`) does not
wait for its warm-up: ex05 needs no reference outcome, and its reference job runs only so that the
programs of the grader's own it compiles (its jitted function, sized to this machine) are in the
reference's cache for every student's job. That job mostly sleeps in its harness's instruments
(about a second); waited for, it kept every worker of a class waiting, the cores idle, after the
other reference jobs had ended. Now the outcomes come back as soon as the exercises that need
them are done, and the warm-up ends on its own, its host stopped and its scratch folder removed.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from grader import store
from grader.batch.reference import reference_outcomes
from grader.chapter import load_chapter
from grader.grading import GradeOptions, Machinery
from grader.outcomes import ReferenceCache


def _warm_ups() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "reference-warm-up" and t.is_alive()]


def test_the_class_reference_returns_without_waiting_for_the_warm_up(tmp_path, monkeypatch):
    """ex05's warm-up job is held, once it has run, until the outcomes are back: ex02's job once took longer than
    the warm-up's own second of sleeping on a loaded machine, the warm-up ended first and nothing told whether it
    was waited for; now it cannot end first, and a reference that waited for it returns only when it gives up."""
    from grader.batch import reference

    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    held, ran = threading.Event(), reference.run_job

    def warm_up_held(session, inputs):
        outcome = ran(session, inputs)
        if session.exercise == "ex05_timing":
            held.wait(120)
        return outcome

    monkeypatch.setattr(reference, "run_job", warm_up_held)
    chapter = load_chapter("ch4")
    programs = store.reference_dir()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # ex02's programs compiled once first (another seed, outcomes kept elsewhere): its reference job then
    # loads them (compiling them in the same run took 2.8 s once under the whole suite's load)
    reference_outcomes(chapter, 4, GradeOptions(chapter="ch4", exercises=("ex02",), seed=4),
                       Machinery(scratch_root=scratch, reference_cache=ReferenceCache()))
    options = GradeOptions(chapter="ch4", exercises=("ex02", "ex05"), seed=3)
    machinery = Machinery(scratch_root=scratch, reference_cache=ReferenceCache())
    began = time.monotonic()
    try:
        outcomes = reference_outcomes(chapter, 3, options, machinery)
        returned = time.monotonic() - began
        warming = _warm_ups()
    finally:
        held.set()
    assert set(outcomes) == {"ex02_where"}  # ex05's outcome is not kept: it is graded without one
    assert outcomes["ex02_where"].end == "done"
    assert warming, f"returned after {returned:.1f} s with no warm-up still running: it was waited for"
    for thread in warming:
        thread.join(timeout=120)
    assert not _warm_ups()
    assert list(scratch.iterdir()) == []  # the warm-up's host stopped, its scratch folder gone
    assert any(Path(programs).glob("*-cache"))  # the reference's programs written where students' jobs look
