"""Unit tests of grader/report/textwidth.py and of the one-line problems of report/common.py."""
from __future__ import annotations

import pytest

from grader.chapter import load_chapter
from grader.i18n import Bilingual, T
from grader.report.render import render_terminal
from grader.report.textwidth import display_width, pad, truncate, wrap
from grader.results import CheckResult, ExerciseResult, Report

MIXED = ("提示: jnp.where 会计算两个分支：和为 0 时 x / sum 即使没被选中也是 NaN 或 inf；"
         "请除以一个安全的值（第一节）。Then some English words to wrap as well.")


def test_display_width_counts_wide_characters_twice():
    assert display_width("abc") == 3
    assert display_width("第一节") == 6
    assert display_width("ＡＢ") == 4  # fullwidth
    assert display_width("e\u0301") == 1  # a combining accent takes no column


@pytest.mark.parametrize("width", [20, 33, 60])
def test_wrap_keeps_every_line_within_the_width(width):
    lines = wrap(MIXED, width, "  ", "    ")
    assert all(display_width(line) <= width for line in lines), lines
    assert lines[0].startswith("  提示") and all(line.startswith("    ") for line in lines[1:])
    assert "".join(line.strip() for line in lines).replace(" ", "") == MIXED.replace(" ", "")


def test_wrap_never_starts_a_line_with_closing_punctuation():
    for width in range(12, 40):
        assert not any(line.strip()[:1] in "，。；：）" for line in wrap(MIXED, width)), width


def test_wrap_breaks_a_word_longer_than_the_line():
    lines = wrap("short " + "x" * 50, 20, "", "  ")
    assert all(display_width(line) <= 20 for line in lines) and len(lines) == 3


def test_wrap_keeps_runs_of_spaces_inside_a_line():
    assert wrap("a   b", 20) == ["a   b"]
    assert wrap("", 20, "   ") == ["   "]


def test_truncate_and_pad_count_columns():
    assert truncate("第一节abc", 5) == "第一"
    assert display_width(pad("出错", 8)) == 8


def _unrunnable(ex_id: str, reason) -> ExerciseResult:
    check = CheckResult(id="a.values", title=Bilingual("a", "a"), category="numeric", points=0, max_points=10,
                        status="error", message=reason, hint=Bilingual("jnp.where(x > 0, x, 0)", "提示"))
    return ExerciseResult(id=ex_id, title=Bilingual(ex_id, ex_id), section="1", checks=[check], status="error",
                          error=reason)


def test_one_notebook_error_is_told_once():
    reason = T("job.syntax_error", file="notebook cell 2", line=1, message="invalid syntax")
    report = Report(chapter="ch4", chapter_title=Bilingual("Chapter 4", "第 4 章"), seed=1, started_at="",
                    duration_s=0.1, submission={"path": "hw.ipynb", "kind": "notebook", "files": ["hw.ipynb"]},
                    environment={}, exercises=[_unrunnable("ex01_jit_forms", reason),
                                               _unrunnable("ex02_where", reason)])
    text = render_terminal(report, load_chapter("ch4").catalog, "en", width=200)
    assert "notebook cell 2 has a syntax error at line 1: invalid syntax; fix the syntax error there" in text
    assert "ex02_where" in text and "the same problem as ex01_jit_forms" in text
    assert "Hint" not in text and "jnp.where" not in text
    assert "Next: ex01_jit_forms (ex01_jit_forms): open hw.ipynb" in text
    assert "no exercise ran, so the device is unknown; JAX ?, Python ?" in text
