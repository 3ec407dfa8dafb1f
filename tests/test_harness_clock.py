"""ex05's checks hold a timing harness's figures against the grader's own clock: the work
its instrument says it slept must fit the time the grader saw pass. That clock must
be the grader's own and never too short, or a busy grader fails a correct harness.

A run starts at a moment the grader stamps when it *answers* the probe's mark (the
probe goes on only then); stamped when the grader *reads* a record, a run would look
shorter by however long the grader was busy elsewhere (other jobs' messages, other
gradings of a batch on two cores) and a correct harness would "claim more work than
the grader saw". Grades ex05 in this process (about 3 s per grading).
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from grader.wire import Channel
from tests.conftest import exercise, grade_to_dict, statuses

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = (ROOT / "solutions" / "ch4" / "ex05_timing.py").read_text(encoding="utf-8")
#: longer than the check's slack (0.05 s) and most of the outlier run's work (about 0.15 s)
STALL_S = 0.2

#: a harness that times correctly, then makes the instrument's record of its work three times
#: longer, and returns three times its median: its figures agree with that record, not with the clock
INFLATES = SOLUTION + '''

_time_call = time_call


def time_call(fn, *args, warmup=1, iters=20):
    took = _time_call(fn, *args, warmup=warmup, iters=iters)
    if isinstance(getattr(fn, "actual", None), list):
        fn.actual[:] = [t * 3 for t in fn.actual]
    return took * 3
'''


def _starts(message) -> bool:
    """A message that starts one of ex05's timed runs (however the probe sends it)."""
    return isinstance(message, dict) and (message.get("op") == "mark"
                                          or str(message.get("key", "")).endswith("/start"))


@pytest.fixture
def busy_grader(monkeypatch):
    """The grader reads each run's start STALL_S late, as a grader busy elsewhere does."""
    real = Channel.recv
    stalled = []

    def late(self, timeout=None):
        message = real(self, timeout)
        if _starts(message):
            stalled.append(message.get("key"))
            time.sleep(STALL_S)
        return message

    monkeypatch.setattr(Channel, "recv", late)
    return stalled


def _ex05(tmp_path: Path, source: str) -> dict:
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "ex05_timing.py").write_text(source, encoding="utf-8")
    return exercise(grade_to_dict(folder, exercises=("ex05",), seed=5), "ex05_timing")


def test_a_busy_grader_reading_late_does_not_fail_a_correct_harness(tmp_path, busy_grader):
    ex05 = _ex05(tmp_path, SOLUTION)
    assert "median/start" in busy_grader  # the grader really was late on the outlier run's start
    assert ex05["score"] == ex05["max_score"], {c["id"]: c.get("message") for c in ex05["checks"]
                                                 if c["status"] != "passed"}


def test_figures_longer_than_the_graders_clock_still_fail(tmp_path, busy_grader):
    """The clock is never too short, and still bounds what a child says: an instrument's record
    made longer than the work the grader saw fails every run it was made longer in."""
    ex05 = _ex05(tmp_path, INFLATES)
    failed = {c["id"]: c.get("message") or "" for c in ex05["checks"] if c["status"] == "failed"}
    for check in ("time_call.seconds", "time_call.warmup", "time_call.median"):
        assert check in failed and "its timings cannot be trusted" in failed[check], (check, failed)
    assert statuses(ex05)["time_call.call_count"] == "passed"  # one lie costs the checks it touches
