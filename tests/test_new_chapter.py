"""A new chapter without touching the core: ``grade dev new-chapter`` scaffolds one in a
folder of its own, and it grades end to end: full marks for its solution, zero for its
stub, the check that a wrong answer breaks fails (run in CI)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from grader.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    patcher = pytest.MonkeyPatch()
    patcher.setenv("GRADER_CHAPTERS", str(root / "chapters"))
    assert main(["dev", "new-chapter", "toy", "--root", str(root), "--lang", "en"]) == 0
    yield root
    patcher.undo()
    for name in [n for n in sys.modules if n.startswith("grader.chapters.toy")]:
        del sys.modules[name]


def _grade(path: Path, out: Path, *args: str) -> dict:
    assert main([str(path), "--report-dir", str(out), "--seed", "3", "--lang", "en", *args]) == 0
    return json.loads(next(out.glob("report*.json")).read_text(encoding="utf-8"))


def test_the_scaffold_writes_a_chapter_in_its_own_folder(course, capsys):
    for path in ("chapters/toy/chapter.toml", "chapters/toy/ex01_scale/exercise.toml", "chapters/toy/ex01_scale/__init__.py",
                 "solutions/toy/ex01_scale.py", "exercises/toy/ex01_scale.py"):
        assert (course / path).is_file(), path
    assert "NotImplementedError" in (course / "exercises/toy/ex01_scale.py").read_text(encoding="utf-8")
    assert main(["dev", "new-chapter", "toy", "--root", str(course)]) == 2  # never over an existing chapter
    assert "already has" in capsys.readouterr().err


def test_its_solution_scores_full_marks_and_its_stub_zero(course, tmp_path):
    solution = _grade(course / "solutions" / "toy", tmp_path / "s")
    assert solution["chapter"] == "toy" and solution["score"] == solution["max_score"] == 10
    stub = _grade(course / "exercises" / "toy", tmp_path / "e")
    assert stub["score"] == 0 and stub["exercises"][0]["status"] == "not_attempted"


def test_a_wrong_answer_fails_its_check(course, tmp_path):
    wrong = tmp_path / "toy"
    wrong.mkdir()
    source = (course / "solutions/toy/ex01_scale.py").read_text(encoding="utf-8")
    (wrong / "ex01_scale.py").write_text(source.replace("return x * factor", "return x + factor"), encoding="utf-8")
    report = _grade(wrong, tmp_path / "w")
    checks = {c["id"]: c["status"] for c in report["exercises"][0]["checks"]}
    assert checks == {"scale.values": "failed", "scale.compiles": "skipped"}


def test_validate_passes_on_the_new_chapter(course, capsys):
    assert main(["dev", "validate", "toy", "--seed", "4"]) == 0
    assert "✓ toy: valid" in capsys.readouterr().out
