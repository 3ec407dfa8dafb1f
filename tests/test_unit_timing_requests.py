"""The grader's side of one timing request: times that do not fit its own clock are asked
for again, and a child that misreports on every attempt gets no figures."""
from __future__ import annotations

import time

import pytest

from grader.primitives import timing

REPS, BATCHES = 2, (3, 5)


class FakeChild:
    """Answers timing requests after ``wall_s`` seconds with totals of ``reported_s`` (per answer)."""

    def __init__(self, answers: list[float], wall_s: float = 0.06):
        self.answers = list(answers)
        self.wall_s = wall_s
        self.requests = 0
        self.outcome = type("Outcome", (), {"end": "done"})()

    def send(self, message: dict) -> bool:
        assert message["op"] == "time" and message["reps"] == REPS
        self.requests += 1
        return True

    def expect(self, ops: set[str], *, deadline: float) -> dict:
        time.sleep(self.wall_s)
        total = self.answers.pop(0) / (2 * REPS)  # the reported time, split over baseline and candidate reps
        per_call = [total / 10] * REPS
        return {"op": "timed", "baseline": per_call, "candidate": per_call,
                "baseline_total": [total] * REPS, "candidate_total": [total] * REPS}


def ask(child: FakeChild) -> dict:
    return timing.request_times(child, "case", reps=REPS, batches=BATCHES, deadline=time.monotonic() + 30)


def test_times_that_fit_the_clock_are_taken_at_once():
    child = FakeChild([0.055])
    got = ask(child)
    assert "error" not in got and child.requests == 1
    assert len(got["baseline"]) == REPS


def test_one_implausible_answer_under_load_is_asked_again():
    child = FakeChild([0.002, 0.055])  # the first answer claims a tenth of the time that passed
    got = ask(child)
    assert "error" not in got, got
    assert child.requests == 2


@pytest.mark.parametrize("reported", [0.002, 0.5])  # far too short, or longer than the request took
def test_a_child_that_misreports_every_time_gets_no_figures(reported):
    child = FakeChild([reported] * 3)
    got = ask(child)
    assert got.get("implausible") and got["error"] == "implausible timings"
    assert child.requests == 3
