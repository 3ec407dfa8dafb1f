"""The first `grade` of a chapter on a machine builds the programs every grading needs, once
(grader.batch.warmup.build_once), so that a student's first real grading costs what a second does."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import FULL, ROOT, STUBS


def _grade(tmp_path, env_extra, *args):
    env = {**os.environ, "GRADER_CACHE_DIR": str(tmp_path / "cache"), **env_extra}
    env.pop("GRADER_BUILD", None) if "GRADER_BUILD" not in env_extra else None
    return subprocess.run([sys.executable, "-m", "grader", str(STUBS), "--report-dir", str(tmp_path / "out"),
                           "--lang", "en", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_the_first_grading_on_a_machine_builds_the_programs_once(tmp_path):
    first = _grade(tmp_path, {"GRADER_SEEDS_AHEAD": "2"})
    assert first.returncode in (0, 1), first.stderr[-2000:]
    assert "First grading of ch4 on this machine" in first.stderr
    assert "Built " in first.stderr
    markers = list((tmp_path / "cache").glob("jaxlib-*/built/ch4-*.json"))
    assert len(markers) == 1
    built = json.loads(markers[0].read_text())
    assert built["score"] == built["max_score"] and built["programs"] > 20, built
    programs = list((tmp_path / "cache").glob("jaxlib-*/xla/reference/*-cache"))
    assert len(programs) == built["programs"]
    # the reference's grading timed every candidate size of ex06: the one chosen is kept for the next
    (cases,) = list((tmp_path / "cache").glob("jaxlib-*/timing-cases.json"))
    assert json.loads(cases.read_text())["ch4"]["ex06_speedup"]["cases"]
    assert f"0 / {FULL:g}" in first.stdout  # the stubs' grading itself, after the build
    # the build drew the student's next seeds (grader.ahead): the stubs' grading took the first of them
    (drawn,) = list((tmp_path / "cache").glob("jaxlib-*/seeds-ahead/ch4.json"))
    seeds = json.loads(drawn.read_text())["seeds"]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert len(seeds) == 2 and report["seed"] not in seeds
    second = _grade(tmp_path, {})
    assert "First grading" not in second.stderr and "Built " not in second.stderr


def test_no_build_when_turned_off(tmp_path):
    run = _grade(tmp_path, {"GRADER_BUILD": "0"})
    assert "First grading" not in run.stderr
    assert not list((tmp_path / "cache").glob("jaxlib-*/built/*"))


def test_a_batch_on_a_machine_never_built_builds_first(tmp_path):
    import shutil

    klass = tmp_path / "class" / "alice"
    shutil.copytree(STUBS, klass, ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "GRADER_BUILD"}
    env["GRADER_CACHE_DIR"] = str(tmp_path / "cache")
    run = subprocess.run([sys.executable, "-m", "grader", "batch", str(tmp_path / "class"), "--chapter", "ch4",
                          "--out", str(tmp_path / "out"), "-j", "1", "-k", "2", "--lang", "en"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "First grading of ch4 on this machine" in run.stderr
    assert len(list((tmp_path / "cache").glob("jaxlib-*/built/ch4-*.json"))) == 1
    assert (tmp_path / "out" / "grades.csv").is_file()


def test_ctrl_c_during_the_build_stops_the_command_and_notes_nothing(tmp_path, monkeypatch):
    """Ctrl-C while the first run builds: the command stops (no grading goes on, no failed build is noted
    for good); the next run builds again."""
    from grader.batch import warmup
    from grader.chapter import load_chapter
    from grader.grading import Interrupted

    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GRADER_BUILD", raising=False)

    def interrupted(chapter, **_):
        raise Interrupted(None, [])

    monkeypatch.setattr(warmup, "build", interrupted)
    chapter = load_chapter("ch4")
    try:
        warmup.build_once(chapter)
        raise AssertionError("the build's Ctrl-C was swallowed")
    except KeyboardInterrupt:
        pass
    assert not warmup.built_marker(chapter).exists()
