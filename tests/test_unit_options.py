"""What a user says of how to grade becomes GradeOptions in one place (grader/options.py), and the
command line hands its options to the grading grouped (grader.cli.app.gather)."""
from __future__ import annotations

import pytest

from grader import grading
from grader.cli import main
from grader.gradescope import Config
from grader.options import LimitOptions
from grader.submission import SubmissionError


def test_limit_options_become_grade_options_in_the_gradings_units():
    options = LimitOptions(sandbox="process", timeout_s=30.0, exercise_timeout_s=7.0, memory_mb=512) \
        .grade_options(chapter="ch4", seed=3)
    assert (options.sandbox, options.submission_timeout_s, options.exercise_timeout_s) == ("process", 30.0, 7.0)
    assert options.limits.memory_bytes == 512 << 20
    assert (options.chapter, options.seed) == ("ch4", 3)
    default = LimitOptions().grade_options()
    assert default == grading.GradeOptions(), "the user's defaults are the grading's"
    assert LimitOptions.from_dict(LimitOptions(timeout_s=5.0).to_dict()) == LimitOptions(timeout_s=5.0)


def test_a_gradescope_autograder_grades_under_the_limits_it_was_built_with():
    config = Config(chapter="ch4", sandbox="bwrap", timeout_s=60.0, exercise_timeout_s=9.0, memory_mb=1024)
    assert config.limits == LimitOptions("bwrap", 60.0, 9.0, 1024)


@pytest.fixture
def handed(monkeypatch):
    """The options ``grade PATH`` hands the grading (which then finds nothing to grade)."""
    seen = []

    def grade(path, options, machinery=None):
        seen.append(options)
        seen.append(machinery)
        raise SubmissionError(grading.T("error.no_reference", chapter="ch4", path=str(path)))

    monkeypatch.setattr(grading, "grade", grade)
    return seen


def test_grade_path_hands_every_option_to_the_grading(handed, tmp_path, capsys):
    (tmp_path / "ch4").mkdir()
    code = main([str(tmp_path / "ch4"), "--chapter", "ch4", "-k", "2", "--seed", "11", "--sandbox", "process",
                 "--timeout", "30", "--exercise-timeout", "7", "--memory-limit", "512", "--inside", "x.ipynb"])
    assert code == 2 and len(handed) == 2
    options, machinery = handed
    assert machinery.hosts is None and machinery.reference_cache is None  # a student's own grading: its own
    assert (options.chapter, options.exercises, options.seed, options.inside) == ("ch4", ("2",), 11, "x.ipynb")
    assert (options.sandbox, options.submission_timeout_s, options.exercise_timeout_s) == ("process", 30.0, 7.0)
    assert options.limits.memory_bytes == 512 << 20
