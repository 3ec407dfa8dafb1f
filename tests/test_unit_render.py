"""Unit tests of grader/report/render.py and results.report_to_dict on a hand-made report."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from grader.chapter import load_chapter
from grader.i18n import Bilingual, T
from grader.primitives import numeric
from grader.report.render import render_json, render_markdown, render_terminal, write_reports
from grader.results import SCHEMA, CheckResult, ExerciseResult, Report

ANSI = re.compile(r"\x1b\[")
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def catalog():
    return load_chapter("ch4").catalog


def check(cid, status, points, max_points, message=None, hint=None, measured=None):
    return CheckResult(id=cid, title=Bilingual(en=f"{cid} works", zh=f"{cid} 正确"), category="numeric",
                       points=points, max_points=max_points, status=status,
                       message=message or T("check.passed"),
                       hint=hint or Bilingual(en=f"Reread section 1 for {cid}.", zh=f"重读第一节：{cid}。"),
                       measured=measured or {})


@pytest.fixture
def report() -> Report:
    passed = ExerciseResult(
        id="ex01_jit_forms", title=Bilingual("The two ways to write @jit", "@jit 的两种写法"), section="1",
        checks=[check("softmax.values", "passed", 2.5, 2.5), check("softmax.jitted", "passed", 1, 1)],
        status="passed", duration_s=1.25)
    failed = ExerciseResult(
        id="ex02_where", title=Bilingual("A Python if becomes jnp.where", "把 Python 的 if 换成 jnp.where"),
        section="1",
        checks=[
            check("piecewise.values", "failed", 0, 1.5,
                  message=T("numeric.shape", what="piecewise(x: f32[4])", expected="(4,)", got="(3,)"),
                  hint=Bilingual("Use jnp.where(x > 0, x * x, 0.5 * x).", "使用 jnp.where(x > 0, x * x, 0.5 * x)。"),
                  measured={"expected_shape": [4], "shape": [3]}),
            check("piecewise.traceable", "passed", 0.5, 0.5),
            check("compiles", "skipped", 0, 2.5, message=T("check.skipped", depends=[
                Bilingual("piecewise values", "piecewise 的数值")])),
        ],
        status="partial", output="debug: x = 1\n", duration_s=2.0)
    stub = ExerciseResult(
        id="ex03_static_args", title=Bilingual("Static versus dynamic arguments", "静态参数与动态参数"),
        section="3", checks=[check("poly.values", "not_attempted", 0, 1,
                                   message=T("check.not_attempted", function="poly"))],
        status="not_attempted")
    timed_out = ExerciseResult(
        id="ex04_cache_keys", title=Bilingual("Shape recompiles and buckets", "形状重编译与分桶"), section="2",
        checks=[check("bucket_length.values", "timeout", 0, 2, message=T("job.timeout", seconds=90))],
        status="timeout", error=T("job.timeout", seconds=90))
    return Report(
        chapter="ch4", chapter_title=Bilingual("Chapter 4: JIT basics", "第 4 章：即时编译（jit）基础"),
        seed=1234, started_at="2024-01-01T00:00:00+00:00", duration_s=12.5,
        submission={"path": "exercises/ch4", "kind": "folder", "sha256": "0" * 64, "files": ["ex01_jit_forms.py"]},
        environment={"backend": "cpu", "device_kind": "cpu", "jax": "0.4.30", "python": "3.12.0"},
        exercises=[passed, failed, stub, timed_out],
        integrity=[{"file": "ex02_where.py", "line": 3, "code": "import", "detail": "os",
                    "message": T("integrity.import", module="os")}],
        sandbox={"kind": "process", "uid_isolation": False},
    )


# ------------------------------------------------------------------ the report's numbers
def test_scores_add_up(report):
    assert report.score == 4.0
    assert report.max_score == 11.0
    assert report.exercises[1].score == 0.5 and report.exercises[1].max_score == 4.5


# ------------------------------------------------------------------ terminal
def test_terminal_without_color_has_no_ansi(report, catalog):
    text = render_terminal(report, catalog, "en", color=False, width=100)
    assert not ANSI.search(text)


def test_terminal_with_color_has_ansi(report, catalog):
    assert ANSI.search(render_terminal(report, catalog, "en", color=True, width=100))


def test_terminal_lists_every_exercise_and_the_failure(report, catalog):
    text = render_terminal(report, catalog, "en", color=False, width=160)
    assert "Chapter 4: JIT basics: 4 / 11" in text
    for ex in report.exercises:
        assert ex.id in text
    assert "piecewise(x: f32[4]): expected shape (4,), got (3,)" in text
    assert "Hint: Use jnp.where(x > 0, x * x, 0.5 * x)." in text
    assert "skipped: it needs “piecewise values” to pass first" in text
    assert "the exercise's code ran past its time limit of 90 s" in text
    assert "debug: x = 1" in text  # the printed output of a partial exercise
    # the exercise that ran past its time limit is where the student is stuck: before ex02's partial work
    assert "Next: ex04_cache_keys (Shape recompiles and buckets)" in text
    assert "seed 1234 (replay with --seed 1234)" in text
    assert "ex02_where.py:3 imports os" in text


def test_terminal_hides_checks_of_passed_exercises(report, catalog):
    text = render_terminal(report, catalog, "en", color=False, width=160)
    assert "softmax.values" not in text
    assert "piecewise.traceable" not in text  # a passed check of a partial exercise


def test_terminal_all_passed(report, catalog):
    report.exercises = report.exercises[:1]
    text = render_terminal(report, catalog, "en", color=False, width=100)
    assert "All checks passed. Well done!" in text
    assert "Next:" not in text


def test_terminal_wraps_long_hints_to_width(report, catalog):
    words = " ".join(f"word{i}" for i in range(40))
    report.exercises[1].checks[0].hint = Bilingual(words, words)
    lines = render_terminal(report, catalog, "en", color=False, width=60).splitlines()
    start = next(i for i, line in enumerate(lines) if "Hint: word0" in line)
    hint_lines = [line for line in lines[start:] if "word" in line]
    assert len(hint_lines) >= 5 and max(len(line) for line in hint_lines) <= 60
    assert " ".join(line.strip() for line in hint_lines) == f"Hint: {words}"


def test_terminal_in_chinese(report, catalog):
    text = render_terminal(report, catalog, "zh", color=False, width=120)
    assert "第 4 章：即时编译（jit）基础：4 / 11" in text
    assert "piecewise(x: f32[4])：期望形状 (4,)，实际为 (3,)" in text
    assert "提示: 使用 jnp.where" in text
    assert "部分通过" in text and "未作答" in text and "超时" in text
    assert "expected shape" not in text


# ------------------------------------------------------------------ markdown
def test_markdown_has_one_table_row_per_exercise(report, catalog):
    text = render_markdown(report, catalog, "en")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`ex0" in line and " / " in line
            and line.count("|") == 4]
    assert [re.search(r"`(ex\w+)`", row).group(1) for row in rows] == [ex.id for ex in report.exercises]
    assert "| ◐ `ex02_where` A Python if becomes jnp.where | 0.5 / 4.5 | partial |" in rows
    assert text.startswith("# Chapter 4: JIT basics: 4 / 11 — graded exercises/ch4 (")  # and what was graded


def test_markdown_details_failed_checks(report, catalog):
    text = render_markdown(report, catalog, "en")
    assert "- **piecewise.values**: piecewise(x: f32[4]): expected shape (4,), got (3,)" in text
    assert '  - Measured: `{"expected_shape": [4], "shape": [3]}`' in text
    assert "## For the instructor" in text and "`ex02_where.py:3` imports os" in text
    assert "**the exercise's code ran past its time limit of 90 s and was stopped**" in text


def test_markdown_escapes_pipes(report, catalog):
    report.exercises[1].checks[0].message = T("numeric.not_array", what="f", type="a|b")
    text = render_markdown(report, catalog, "en")
    assert "a\\|b" in text


def test_markdown_in_chinese(report, catalog):
    text = render_markdown(report, catalog, "zh")
    assert "| 练习 | 得分 | 状态 |" in text
    assert "@jit 的两种写法" in text
    assert "The two ways to write @jit" not in text


# ------------------------------------------------------------------ json
def test_json_follows_the_contract(report, catalog):
    data = json.loads(render_json(report, catalog, "en"))
    for key in ("schema", "chapter", "seed", "score", "max_score", "started_at", "duration_s", "submission",
                "environment", "exercises", "integrity"):
        assert key in data, key
    assert data["schema"] == SCHEMA == "grade-report/1"
    assert data["chapter"] == "ch4" and data["seed"] == 1234
    assert data["score"] == 4 and data["max_score"] == 11
    assert data["lang"] == "en"
    assert data["submission"]["sha256"] == "0" * 64
    assert [e["id"] for e in data["exercises"]] == [e.id for e in report.exercises]
    for ex in data["exercises"]:
        assert {"id", "title", "score", "max_score", "status", "checks"} <= set(ex)
        for c in ex["checks"]:
            assert {"id", "category", "points", "max_points", "status", "message", "hint", "measured"} <= set(c)
            assert isinstance(c["message"], str) and isinstance(c["hint"], str)
    failed = data["exercises"][1]["checks"][0]
    assert failed["message"] == "piecewise(x: f32[4]): expected shape (4,), got (3,)"
    assert failed["measured"] == {"expected_shape": [4], "shape": [3]}
    assert failed["points"] == 0 and failed["max_points"] == 1.5
    assert data["exercises"][3]["error"].startswith("the exercise's code ran past")
    assert data["exercises"][0]["error"] is None
    assert data["integrity"] == [{"file": "ex02_where.py", "line": 3, "code": "import", "detail": "os",
                                  "message": "imports os, which no exercise needs"}]


def test_json_in_chinese(report, catalog):
    data = json.loads(render_json(report, catalog, "zh"))
    assert data["lang"] == "zh"
    assert data["chapter_title"] == "第 4 章：即时编译（jit）基础"
    assert CJK.search(data["exercises"][1]["checks"][0]["message"])
    assert data["exercises"][1]["checks"][0]["hint"] == "使用 jnp.where(x > 0, x * x, 0.5 * x)。"
    assert "\\u" not in render_json(report, catalog, "zh")  # written as UTF-8, not escapes


def test_json_numbers_are_ints_when_whole(report, catalog):
    data = json.loads(render_json(report, catalog, "en"))
    assert isinstance(data["exercises"][0]["checks"][1]["points"], int)
    assert isinstance(data["exercises"][0]["checks"][0]["points"], float)


def test_json_is_strict_json_after_a_passing_numeric_check(report, catalog):
    measured = numeric.compare({"t": "array", "type": "jax.Array", "value": np.float32([1e-9, 1])},
                               np.float32([0, 1]), what="f(x)")  # passes: 1e-9 is within atol
    report.exercises[0].checks[0].measured = measured
    text = render_json(report, catalog, "en")

    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    json.loads(text, parse_constant=refuse)


# ------------------------------------------------------------------ files
def test_write_reports_writes_every_file(report, catalog, tmp_path):
    target = tmp_path / "deep" / ".grade"
    written = write_reports(report, catalog, "en", target)
    assert written == target / "report.json"
    assert json.loads(written.read_text(encoding="utf-8"))["schema"] == "grade-report/1"
    assert (target / "report.md").read_text(encoding="utf-8") == render_markdown(report, catalog, "en")
    assert (target / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in target.iterdir()) == ["report.html", "report.json", "report.md"]  # no temporaries


def test_write_reports_replaces_old_reports(report, catalog, tmp_path):
    (tmp_path / "report.json").write_text("old")
    write_reports(report, catalog, "zh", tmp_path)
    assert json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))["lang"] == "zh"
