"""A timed exercise prepares and times only the case chosen when every candidate was last timed here.

ex06 times ``fast_heavy`` on the input size where the reference's gain is clearest on the
grading device. Each grading prepared all three candidate sizes on both sides (their
programs, their warm-up) and calibrated all three, alone on the machine, to time one. Now
the first grading on a machine times every candidate and keeps the one chosen, with the
device (``grader.store.timing_cases``); the next gradings prepare and time only that one.
Sent to another device, it is forgotten after that grading.
"""
from __future__ import annotations

import shutil

import pytest

from conftest import SOLUTIONS

from grader import store
from grader.chapters.ch4.ex06_speedup import HEAVY_SIZES


def _ex06(tmp_path, name: str, *, compile_cache: bool = True):
    from grader.grading import GradeOptions, grade

    folder = tmp_path / name / "ch4"
    shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    report = grade(folder, GradeOptions(exercises=("ex06",), seed=11, compile_cache=compile_cache))
    (ex,) = report.exercises
    speedup = next(c for c in ex.checks if c.id == "fast_heavy.speedup")
    return ex, speedup.measured, report.timings["ex06_speedup"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "caches"))
    return tmp_path


def test_the_first_grading_times_every_size_and_the_next_only_the_one_chosen(cache):
    assert store.timing_cases("ch4", "ex06_speedup") is None
    first, measured, timings = _ex06(cache, "first")
    assert sorted(measured["calibration"]) == sorted(f"fast_heavy/{size}" for size in HEAVY_SIZES)
    kept = store.timing_cases("ch4", "ex06_speedup")
    assert kept["cases"] == sorted([f"fast_heavy/{measured['case']}", "layer_norm/16x64"])
    assert kept["device"] == {"backend": "cpu", "device_kind": "cpu"}

    second, again, timings_again = _ex06(cache, "second")
    assert list(again["calibration"]) == [f"fast_heavy/{measured['case']}"] and again["case"] == measured["case"]
    fewer = 2 * (len(HEAVY_SIZES) - 1)  # per size left out: its jitted program, and at least one eager op
    assert timings_again["student_work"]["programs"] <= timings["student_work"]["programs"] - fewer
    assert timings_again["reference_work"]["programs"] <= timings["reference_work"]["programs"] - fewer
    assert [(c.id, c.status) for c in second.checks] == [(c.id, c.status) for c in first.checks]
    assert second.score == second.max_score


def test_cases_chosen_on_another_device_are_timed_once_then_forgotten(cache):
    store.keep_timing_cases("ch4", "ex06_speedup", {"cases": ["fast_heavy/128x256x256", "layer_norm/16x64"],
                                                     "device": {"backend": "gpu", "device_kind": "H100"}})
    ex, measured, _ = _ex06(cache, "moved")
    assert list(measured["calibration"]) == ["fast_heavy/128x256x256"]  # what was sent is what both prepared
    assert ex.score == ex.max_score  # the bar is a fraction of the reference's gain on that same size
    assert store.timing_cases("ch4", "ex06_speedup") is None  # the next grading times every size again


def test_a_grading_without_the_machines_caches_times_every_size_and_keeps_nothing(cache):
    store.keep_timing_cases("ch4", "ex06_speedup", {"cases": ["fast_heavy/32x64x128", "layer_norm/16x64"],
                                                     "device": {"backend": "cpu", "device_kind": "cpu"}})
    _, measured, _ = _ex06(cache, "plain", compile_cache=False)
    assert len(measured["calibration"]) == len(HEAVY_SIZES)
    assert store.timing_cases("ch4", "ex06_speedup")["cases"][0] == "fast_heavy/32x64x128"  # untouched
