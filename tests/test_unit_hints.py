"""Hints and titles nudge, they never hand out the answer: no hint or check title of
chapter.toml holds a piece of a solution's code (a SOLUTION block) that the stub does
not already show, and the sections are named alike in chapter.toml and the README."""
from __future__ import annotations

from pathlib import Path

import pytest

from grader.authoring.answers import code_pieces, normalised, solution_blocks
from grader.chapter import load_chapter

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "ch4"
STUBS = ROOT / "exercises" / "ch4"
NUMERALS = "一二三四五六七八九"


def test_code_pieces_find_the_answer_of_ex02_in_its_old_hint():
    pieces = set().union(*map(code_pieces, solution_blocks((SOLUTIONS / "ex02_where.py").read_text("utf-8"))))
    old_hint = "Inside jit, x > 0 is a traced array with no True/False yet: jnp.where(x > 0, x * x, 0.5 * x)"
    assert any(piece in normalised(old_hint) for piece in pieces)
    assert not any(piece in normalised("use jnp.where(condition, if_true, if_false)") for piece in pieces)


EXERCISES = load_chapter("ch4").exercises


@pytest.mark.parametrize("ex", EXERCISES, ids=[ex.id for ex in EXERCISES])
def test_no_hint_or_title_holds_solution_code(ex):
    stub = normalised((STUBS / ex.filename).read_text(encoding="utf-8"))
    pieces = set().union(*map(code_pieces, solution_blocks((SOLUTIONS / ex.filename).read_text("utf-8"))))
    answers = {piece for piece in pieces if piece not in stub}  # what the stub shows is no secret
    assert answers, f"{ex.filename}: no solution code found"
    leaks = []
    for check in ex.checks:
        texts = {"hint": check.hint, "title": check.title, **{f"hint {k}": v for k, v in
                                                              getattr(check, "hints", {}).items()}}
        for what, text in texts.items():
            for lang in ("en", "zh"):
                leaks += [f"{check.id} {what} ({lang}): {piece}" for piece in answers
                          if piece in normalised(text[lang])]
    assert leaks == []


def test_sections_are_named_alike_in_both_languages_and_the_readme():
    chapter = load_chapter("ch4")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for number, section in chapter.sections.items():
        numeral = NUMERALS[int(number) - 1]
        assert section.en.startswith(f"section {number} ({numeral})"), section.en
        assert section.zh.startswith(f"第{numeral}节"), section.zh
    for ex in chapter.exercises:
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{ex.id}` |"))
        number = ex.section
        assert f"{number} ({NUMERALS[int(number) - 1]})" in row.split("|")[3], row
