"""Seeds drawn ahead (grader.ahead): a student's next grading takes a seed whose reference outcomes its
last one computed, those outcomes are the ones a fresh reference run gives, and a seed is handed out once."""
from __future__ import annotations

import threading
import time

import pytest

from conftest import SOLUTIONS, VARIANTS, make_submission
from grader import ahead
from grader.child.job import AHEAD_CPU_S, probe_ahead
from grader.child.probe import ProbeContext
from grader.protocol import FromJob, word_of


# ------------------------------------------------------------------ the seeds
def test_a_seed_is_handed_out_once_in_the_order_drawn(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path))
    taken, seeds = ahead.draw("ch4", 3, take=True)
    assert taken is None and len(set(seeds)) == 3  # nothing drawn yet: the grading draws its own
    handed = []
    for _ in range(20):
        before = seeds
        taken, seeds = ahead.draw("ch4", 3, take=True)
        assert taken == before[0] and seeds[:2] == before[1:] and taken not in seeds
        handed.append(taken)
    assert len(set(handed)) == 20
    assert ahead.draw("ch4", 3, take=False) == (None, seeds)  # a replay takes none
    assert ahead.draw("ch5", 2, take=True)[0] is None  # each chapter its own


def test_gradings_at_once_never_take_the_same_seed(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path))
    ahead.draw("ch4", 4, take=False)
    taken: list[int | None] = []

    def grading() -> None:
        for _ in range(10):
            taken.append(ahead.draw("ch4", 4, take=True)[0])

    threads = [threading.Thread(target=grading) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(taken) == 60 and None not in taken and len(set(taken)) == 60


def test_a_cache_that_cannot_be_written_draws_nothing(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "file"))
    assert ahead.draw("ch4", 4, take=True) == (None, [])


@pytest.mark.parametrize("value, wanted", [("0", 0), ("7", 7), ("many", ahead.DEFAULT), ("99", ahead.MOST),
                                           (None, ahead.DEFAULT)])
def test_how_many_comes_from_the_environment(monkeypatch, value, wanted):
    if value is None:
        monkeypatch.delenv(ahead.ENV, raising=False)
    else:
        monkeypatch.setenv(ahead.ENV, value)
    assert ahead.count() == wanted


# ------------------------------------------------------------------ the job's probe, again
class _Channel:
    def __init__(self):
        self.said = []

    def send(self, message):
        self.said.append(message)


def _ahead(probe, inputs, budget_s=0.0):
    channel = _Channel()
    probe_ahead(channel, probe, inputs, budget_s)
    assert all(word_of(m, FromJob) is FromJob.AHEAD for m in channel.said)
    return {m["index"]: m["records"] for m in channel.said}


def _probe(inputs, sink):
    ctx = ProbeContext(sink, None, inputs, "/nowhere", "/tmp", side="reference")
    ctx.announce("f")  # said to the grader in a main run; dropped here
    ctx.record("v", inputs["x"] * 2)
    if inputs.get("raise"):
        raise ValueError("the reference's probe failed")
    if inputs.get("mark"):
        ctx.mark("start")  # a probe that waits on the grader's clock cannot run ahead
    spent = time.process_time() + inputs.get("cpu", 0.0)
    while time.process_time() < spent:
        pass
    ctx.record("w", inputs["x"] + 1)


def test_each_seed_drawn_ahead_is_probed_and_its_records_sent():
    assert _ahead(_probe, [{"x": 1}, {"x": 5}]) == {0: {"v": 2, "w": 2}, 1: {"v": 10, "w": 6}}
    assert _ahead(_probe, None) == {} and _ahead(_probe, "junk") == {}


def test_seeds_that_compile_programs_of_their_own_cost_at_most_what_the_job_s_probe_did():
    """Their programs were new (ex08 draws its shapes per seed): each next one would compile as much."""
    costly = AHEAD_CPU_S * 1.5
    said = _ahead(_probe, [{"x": 1}, {"x": 2, "cpu": costly}, {"x": 3}])
    assert sorted(said) == [0, 1]  # at least one
    many = [{"x": i, "cpu": costly} for i in range(6)]
    assert sorted(_ahead(_probe, many, budget_s=costly * 2.5)) == [0, 1, 2]  # the third goes past the budget
    cheap = [{"x": i} for i in range(12)]
    assert sorted(_ahead(_probe, cheap, budget_s=0.0)) == list(range(12))  # cheap ones: every one


@pytest.mark.parametrize("failing", [{"raise": True}, {"mark": True}])
def test_a_probe_that_fails_or_asks_the_grader_ends_it(failing):
    said = _ahead(_probe, [{"x": 1}, {"x": 2, **failing}, {"x": 3}])
    assert said == {0: {"v": 2, "w": 2}}


# ------------------------------------------------------------------ gradings
EXERCISES = ("ex01_jit_forms", "ex04_cache_keys", "ex07_pitfalls")
MISTAKES = {"ex01_jit_forms": VARIANTS / "ex01_jit_forms" / "unstable_softmax.py",
            "ex04_cache_keys": VARIANTS / "ex04_cache_keys" / "mean_over_padding.py",
            "ex07_pitfalls": VARIANTS / "ex07_pitfalls" / "ema_wrong_start.py"}


def _grade(path, **options):
    from grader.grading import GradeOptions, Machinery, grade

    drawn = options.pop("ahead", 0)
    return grade(path, GradeOptions(chapter="ch4", exercises=EXERCISES, **options), Machinery(ahead=drawn))


def _checks(report) -> dict:
    """Every check's verdict, its points, its message and what it measured, by exercise."""
    return {ex.id: [(c.id, c.status, c.points, repr(c.message), repr(c.measured)) for c in ex.checks]
            for ex in report.exercises}


@pytest.mark.slow
def test_the_next_grading_takes_a_seed_whose_reference_outcomes_were_computed_ahead(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    first = _grade(SOLUTIONS, ahead=2)
    assert first.score == first.max_score
    _, drawn = ahead.draw("ch4", 2, take=False)
    assert first.seed not in drawn
    # each reference job computed the outcomes of both seeds drawn ahead, beside its own
    assert first.timings["reference_ahead"] == dict.fromkeys(EXERCISES, 2)
    assert all(first.timings[ex]["reference_work"] for ex in EXERCISES)

    mistaken = make_submission(tmp_path / "student", MISTAKES)
    second = _grade(mistaken, ahead=2)
    assert second.seed == drawn[0]  # the first seed drawn: its reference outcomes known, no reference job ran
    assert all(second.timings[ex]["reference_work"] is None for ex in EXERCISES)
    assert "reference_ahead" not in second.timings
    failed = {ex.id: {c.id for c in ex.checks if c.status == "failed"} for ex in second.exercises}
    assert failed == {"ex01_jit_forms": {"softmax.values"}, "ex04_cache_keys": {"masked_mean_sq.values"},
                      "ex07_pitfalls": {"ema.values"}}
    _, after = ahead.draw("ch4", 2, take=False)
    assert second.seed not in after and after[0] == drawn[1]  # handed out once

    # the same submission and seed where nothing was computed ahead: the reference runs, the verdicts,
    # messages and measured values are the same
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "fresh"))
    replay = _grade(mistaken, seed=second.seed)
    assert all(replay.timings[ex]["reference_work"] for ex in EXERCISES)
    assert _checks(replay) == _checks(second)
    correct = _grade(SOLUTIONS, seed=drawn[1], ahead=0)  # the other seed drawn ahead, graded afresh: full marks
    assert correct.score == correct.max_score


@pytest.mark.slow
def test_a_replay_takes_no_seed_drawn_ahead(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    _, drawn = ahead.draw("ch4", 2, take=False)
    replay = _grade(SOLUTIONS, seed=1234, ahead=2)
    assert replay.seed == 1234 and ahead.draw("ch4", 2, take=False) == (None, drawn)
    assert _grade(SOLUTIONS, ahead=0).seed not in drawn  # nor does a grading that keeps none (a batch's)
