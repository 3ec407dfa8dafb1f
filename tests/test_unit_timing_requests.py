"""The grader's side of one timing request: times that do not fit its own clock are asked
for again, and a child that misreports on every attempt gets no figures."""
from __future__ import annotations

import re
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


@pytest.mark.parametrize("error", ["implausible timings", "calibration failed", "the process is gone", "bad request",
                                   "host_lost", "import_error", "timeout", "crashed", "disk_limit", None])
def test_the_graders_own_reason_for_no_timing_is_a_sentence_in_both_languages(error):
    """Why a function could not be timed reaches the student: the grader's own reasons (the figures'
    ``error``) were English words inside Chinese messages ("无法为 fast_heavy 计时：implausible timings")."""
    from grader.checks import Fail
    from grader.i18n import grader_catalog
    from grader.primitives import timing

    figures = {"speedup": None} if error is None else {"speedup": None, "error": error}
    with pytest.raises(Fail) as failed:
        timing.expect_speedup(figures, {"speedup": 3.0}, fraction=0.25, what="fast_heavy")
    catalog = grader_catalog()
    en, zh = (catalog.render(failed.value.message, lang) for lang in ("en", "zh"))
    assert "fast_heavy" in en and "fast_heavy" in zh
    if error is not None:
        assert error not in en and error not in zh
    assert not re.search(r"[A-Za-z]{4,}", zh.replace("fast_heavy", "")), zh  # no English words left in Chinese
    assert "?" not in en and "?" not in zh


def test_a_students_exception_is_quoted_as_it_was_raised():
    from grader.checks import Fail
    from grader.i18n import grader_catalog
    from grader.primitives import timing

    with pytest.raises(Fail) as failed:
        timing.expect_speedup({"speedup": None, "error": "TypeError: bad operand"}, {"speedup": 3.0},
                              fraction=0.25, what="layer_norm")
    assert "TypeError: bad operand" in grader_catalog().render(failed.value.message, "zh")
