"""A batch worker keeps the reference's job of a timed exercise from one student to the next
(:mod:`grader.runner.kept`): the next student is timed against the same process, in rounds
alternating with theirs, and gets the verdicts ``grade`` gives alone with that seed."""
from __future__ import annotations

import json

import pytest

from conftest import SOLUTIONS, VARIANTS, make_submission, variant

from grader.chapter import load_chapter
from grader.grading import GradeOptions, Machinery, grade
from grader.runner.job_sessions import JobOutcome
from grader.runner.kept import KeptJobs
from grader.runner.warm import WarmHosts


class _Session:
    """A job session's face, as a timing driver sees it, recording what was asked of it."""

    def __init__(self, log: list):
        self.log = log
        self.outcome = JobOutcome(end="not_started", side="reference", records={"timing/ready": {"cases": []}})
        self.channel = object()
        self.timeout_s = self.deadline = 0.0

    def renew(self, timeout_s):
        self.timeout_s = timeout_s

    def start(self):
        self.log.append("start")
        return True

    def send_inputs(self, inputs):
        self.log.append("inputs")
        return True

    def send(self, message):
        self.log.append(message["op"])
        return True

    def expect(self, ops, *, deadline=None):
        return {"op": "pong"} if "pong" in ops else None

    def run_to_end(self):
        self.log.append("run_to_end")
        self.outcome.end = "done"

    def abandon(self):
        self.log.append("abandon")
        self.outcome.end = "abandoned"

    def finish(self):
        self.log.append("finish")
        return self.outcome


def test_a_kept_job_serves_the_next_grading_of_its_seed_and_is_ended_for_another():
    made: list[list] = []

    def make():
        made.append([])
        return _Session(made[-1])

    kept = KeptJobs()
    first = kept.session("ex06", (7, "ref"), 60, make)
    assert first.start() and first.send_inputs({"x": 1})
    assert not first.send({"op": "stop"})  # kept: not stopped, nothing to wait for
    first.abandon()  # not needed by this student (a stub): kept all the same
    outcome = first.finish()
    assert outcome.end == "done" and outcome.records == {"timing/ready": {"cases": []}}
    assert outcome.records is not first.outcome.records and outcome.work == {"kept_uses": 1}
    assert made[0] == ["start", "inputs"]

    again = kept.session("ex06", (7, "ref"), 60, make)
    assert again is first and len(made) == 1
    assert again.start() and again.send_inputs({"x": 1})  # no fork, no inputs sent again: a ping, answered
    assert made[0] == ["start", "inputs", "ping"]
    assert again.finish().work == {"kept_uses": 2}

    other = kept.session("ex06", (8, "ref"), 60, make)  # another seed: a new job, the old one stopped
    assert other is not first and len(made) == 2
    assert made[0][-3:] == ["stop", "run_to_end", "finish"]

    other.start()
    other.outcome.end = "timeout"  # it failed: ended the usual way, and replaced next time
    other.abandon()
    assert other.finish().end == "abandoned" and made[1][-2:] == ["abandon", "finish"]
    assert kept.session("ex06", (8, "ref"), 60, make) is not other and len(made) == 3
    kept.close()


@pytest.mark.slow
def test_a_workers_second_student_is_timed_against_the_kept_reference_with_the_verdicts_of_grade(tmp_path):
    chapter = load_chapter("ch4")
    students = {"solutions": SOLUTIONS,
                "callback": make_submission(tmp_path / "callback",
                                            {"ex06_speedup": VARIANTS / "ex06_speedup" / "layer_norm_callback.py"})}
    warm = WarmHosts(chapter, scratch_root=tmp_path)
    seed = 424242
    try:
        graded = {name: grade(path, GradeOptions(exercises=("ex06",), seed=seed), Machinery(hosts=warm))
                  for name, path in students.items()}
    finally:
        warm.close()
    uses = [report.timings["ex06_speedup"]["reference_work"] for report in graded.values()]
    assert uses == [{"kept_uses": 1}, {"kept_uses": 2}], uses  # one reference job, timed against twice
    for name, path in students.items():
        alone = grade(path, GradeOptions(exercises=("ex06",), seed=seed))
        assert alone.timings["ex06_speedup"]["reference_work"].get("total_cpu_s")  # a job of its own, ended
        statuses = {c.id: c.status for ex in graded[name].exercises for c in ex.checks}
        assert statuses == {c.id: c.status for ex in alone.exercises for c in ex.checks}, name
    assert statuses["layer_norm.speedup"] == "failed" and statuses["fast_heavy.speedup"] == "passed"
    solutions = {c.id: c.status for ex in graded["solutions"].exercises for c in ex.checks}
    assert set(solutions.values()) == {"passed"}


@pytest.mark.slow
def test_a_class_of_host_callbacks_is_graded_to_the_end_on_one_core_each(tmp_path):
    """-j 2 on two cores: each worker's jobs have one core. A fast_heavy that calls back to NumPy
    (jax.pure_callback) read its input while that input was still being copied to the device, and the
    copy waited for the thread the callback held: on the start commit about half of such students hung
    until their ex06 timed out. Now every one is graded, each with the variant's verdicts."""
    import csv
    import os

    from grader.cli import main

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores: -j 2 gives each worker one of them")
    klass = tmp_path / "class"
    klass.mkdir()
    callback = variant("ex06_speedup", "fast_heavy_callback")
    for i in range(6):  # six students, each file their own
        make_submission(tmp_path / f"s{i}", {"ex06_speedup": f"# student {i}\n{callback}"}).rename(klass / f"s{i}")
    out = tmp_path / "results"
    assert main(["batch", str(klass), "--chapter", "ch4", "--out", str(out), "-j", "2", "-k", "6", "--seed", "5",
                 "--exercise-timeout", "40", "--lang", "en"]) == 0
    with (out / "grades.csv").open(encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["student"] != "(max points)"]
    assert [(row["status"], row["detail"]) for row in rows] == [("completed", "")] * 6
    for row in rows:
        report = json.loads((out / row["student"] / "report.partial.json").read_text(encoding="utf-8"))
        failed = {c["id"] for ex in report["exercises"] for c in ex["checks"] if c["status"] != "passed"}
        assert failed == {"fast_heavy.speedup"}, (row["student"], failed)
