"""Judging kept apart from making it fast (docs/architecture.md, layer 7): where the reference's outcome comes
from is one interface chosen once (grader.reference_source), which exercise runs when and on which cores is one
object (grader.scheduling.Schedule), and what the user said (GradeOptions) is apart from what a front end brings
(Machinery). These tests hold each piece to its word with stand-ins for what it is handed; the gradings that use
them are the end-to-end tests' (test_seeds_ahead: outcomes known ahead; test_exclusive_device: a preview;
test_timed_beside: the rounds alone on a core)."""
from __future__ import annotations

import dataclasses
import os
import threading
import time

import pytest

from grader.checks import GraderError
from grader.grading import GradeOptions, Machinery
from grader.outcomes import ReferenceCache
from grader.reference_source import LiveReference, RecordedReference, reference_source
from grader.runner import devices
from grader.scheduling import Schedule


class _Records:
    seed = 7

    def __init__(self):
        self.asked: list[tuple] = []

    def recorded(self, exercise_id, seed, inputs):
        self.asked.append((exercise_id, seed))
        return f"recorded {exercise_id} {seed}"


class _Exercise:
    id = "ex02_where"
    device = None


class _Host:
    kept = None
    module_dir = "/nowhere"

    def __init__(self):
        self.sessions: list[tuple] = []

    def exercise_session(self, ex, timeout_s):
        self.sessions.append((ex.id, timeout_s))
        return f"session {ex.id}"


def _source(records=None, host=None):
    return reference_source(None, host, ReferenceCache(), 7, records=records, ahead=[7, 8],
                            device=devices.default_plan(), note=lambda outcome: None,
                            on_ahead=lambda exercise, seeds: None)


def test_the_source_is_chosen_once_from_what_the_grading_has():
    records = _Records()
    preview = _source(records=records, host=_Host())
    assert isinstance(preview, RecordedReference) and preview.preview
    live = _source(host=_Host())
    assert isinstance(live, LiveReference) and not live.preview
    assert live.ahead == [8]  # the grading's own seed is not one drawn ahead
    with pytest.raises(GraderError, match="reference's host"):
        _source()


def test_a_preview_answers_from_its_records_and_runs_no_reference_job():
    records, host = _Records(), _Host()
    preview = _source(records=records, host=host)
    assert preview.recorded(_Exercise(), {}) == "recorded ex02_where 7"
    assert preview.early(_Exercise(), 30) is None and not preview.ran("ex02_where")
    with pytest.raises(GraderError, match="no reference process"):
        preview.session(_Exercise(), 30)
    assert host.sessions == []


def test_the_live_source_gives_a_driver_its_job_and_says_which_exercises_it_ran():
    host = _Host()
    live = _source(host=host)
    assert live.recorded(_Exercise(), {}) is None  # a driver then asks for the job
    assert live.session(_Exercise(), 30) == "session ex02_where"
    assert live.early(_Exercise(), 40)() == "session ex02_where"
    assert host.sessions == [("ex02_where", 30), ("ex02_where", 40)]
    assert live.ran("ex02_where")
    live.known.add("ex02_where")  # its outcome was known already: no job of it ran
    assert not live.ran("ex02_where")


def test_options_hold_what_the_user_says_and_machinery_the_rest():
    user = {f.name for f in dataclasses.fields(GradeOptions)}
    machinery = {f.name for f in dataclasses.fields(Machinery)}
    assert not user & machinery
    assert {"hosts", "reference_cache", "on_progress", "at_once", "scratch_root", "ahead", "preview",
            "programs", "service"} == machinery
    assert {"chapter", "exercises", "seed", "sandbox", "device", "limits", "submission_timeout_s"} <= user


class _Movable:
    def __init__(self, moves: bool):
        self.moves = moves
        self.told: list[list[int]] = []

    def set_cores(self, cpus, apart, /):
        self.told.append(list(cpus))
        return self.moves


TWO_CORES = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the rounds' core needs two or more")


def test_a_schedule_not_beside_leaves_every_process_where_it_is():
    process = _Movable(True)
    with Schedule(beside=False).alone("ex06_speedup", [process], ["ex06-student"], wait_until=None):
        pass
    assert process.told == []


@TWO_CORES
def test_the_rounds_get_the_last_core_and_the_rest_comes_back(monkeypatch):
    from grader import affinity as cores

    monkeypatch.setattr(cores, "busy", lambda cpu, seconds=0.05: 0.0)
    cpus = cores.available()
    process, schedule = _Movable(True), Schedule(beside=True)
    with schedule.alone("ex06_speedup", [process], ["ex06-student"], wait_until=None):
        assert process.told == [cpus[:-1]]
    assert process.told == [cpus[:-1], cpus] and schedule.timed_beside == {"ex06_speedup": True}
    cores.pin(os.getpid(), cpus)


@TWO_CORES
@pytest.mark.parametrize("wait", [True, False])
def test_a_process_that_cannot_move_makes_the_rounds_wait_for_the_untimed_ones_unless_told_never(monkeypatch, wait):
    from grader import affinity as cores

    cpus = cores.available()
    schedule = Schedule(beside=True)
    threading.Timer(0.4, schedule.untimed_done.set).start()
    began = time.monotonic()
    with schedule.alone("ex06_speedup", [_Movable(False)], ["ex06-student"],
                        wait_until=time.monotonic() + 30 if wait else None):
        waited = time.monotonic() - began
    cores.pin(os.getpid(), cpus)
    assert schedule.timed_beside == {"ex06_speedup": False}
    assert (waited >= 0.35) if wait else (waited < 0.35), waited
