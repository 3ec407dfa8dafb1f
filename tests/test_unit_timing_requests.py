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


class DonatingChild(FakeChild):
    """A donating candidate's batches: its inputs, made before each batch (``candidate_setup``),
    took most of the time the grader saw pass; the calls themselves fit the rest."""

    def __init__(self, setup_s: float | None):
        super().__init__([0.015] * 3, wall_s=0.06)
        self.setup_s = setup_s

    def expect(self, ops: set[str], *, deadline: float) -> dict:
        answer = super().expect(ops, deadline=deadline)
        if self.setup_s is not None:
            answer["candidate_setup"] = [self.setup_s / REPS] * REPS
        return answer


def test_the_time_spent_making_a_donating_candidates_inputs_counts_on_the_graders_clock():
    """The setup the child reports is time the grader saw pass: with it the answer fits the
    clock at once; without it (as before issue 26) the same calls read as implausible."""
    with_setup = DonatingChild(setup_s=0.04)
    assert "error" not in ask(with_setup) and with_setup.requests == 1
    without = DonatingChild(setup_s=None)
    assert ask(without).get("implausible")
    lying = DonatingChild(setup_s=0.5)  # more setup than the request took: not believed either
    assert ask(lying).get("implausible")
