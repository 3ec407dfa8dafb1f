"""Hints and titles nudge, they never hand out the answer, in every chapter: no hint, hint layer or check
title of an exercise.toml holds a piece of a solution's code (a SOLUTION block) that the stub
does not already show; every check has its further layers (``grade ... --hint CHECK``) in
both languages, none a copy of another, each naming a section of the course; and the
sections are named alike in chapter.toml and the README."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import all_chapters

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


CHAPTERS = all_chapters()
EXERCISES = [(chapter, ex) for chapter in CHAPTERS for ex in chapter.exercises]


def student_texts(check) -> dict:
    """Everything a student may read about a check: its title, hint, named hints and hint layers."""
    return {"title": check.title, "hint": check.hint, **{f"hint {k}": v for k, v in check.named_hints.items()},
            **{f"layer {i}": v for i, v in enumerate(check.hint_layers, start=2)}}


@pytest.mark.parametrize("chapter, ex", EXERCISES, ids=[f"{c.id}/{ex.id}" for c, ex in EXERCISES])
def test_no_hint_layer_or_title_holds_solution_code(chapter, ex):
    stub = normalised((chapter.stubs / ex.filename).read_text(encoding="utf-8"))
    pieces = set().union(*map(code_pieces, solution_blocks((chapter.solutions / ex.filename).read_text("utf-8"))))
    answers = {piece for piece in pieces if piece not in stub}  # what the stub shows is no secret
    assert answers, f"{ex.filename}: no solution code found"
    assert any(check.hint_layers for check in ex.checks), "the layers are read, so they are searched too"
    leaks = []
    for check in ex.checks:
        for what, text in student_texts(check).items():
            for lang in ("en", "zh"):
                leaks += [f"{check.id} {what} ({lang}): {piece}" for piece in answers
                          if piece in normalised(text[lang])]
    assert leaks == []


#: how many further layers every check has: why it matters under jit, then a worked explanation
LAYERS = 2
#: a layer points at the course: "section 3 (三)" in English, "第三节" in Chinese
SECTION_EN = re.compile(r"section ([1-9]) \(([一二三四五六七八九])\)")
SECTION_ZH = re.compile(r"第([一二三四五六七八九])节")
CHECKS = [(chapter, ex, check) for chapter, ex in EXERCISES for check in ex.checks]


@pytest.mark.parametrize("chapter, ex, check", CHECKS, ids=[f"{c.id}/{ex.id}:{check.id}" for c, ex, check in CHECKS])
def test_every_check_has_its_layers_in_both_languages(chapter, ex, check):
    assert len(check.hint_layers) >= LAYERS, (f"{ex.id} {check.id}: {len(check.hint_layers)} layers, "
                                              f"at least {LAYERS} wanted")
    for i, layer in enumerate(check.hint_layers, start=2):
        assert layer.en.strip() and layer.zh.strip(), f"{ex.id} {check.id} layer {i}: a language is empty"
        assert re.search(r"[\u4e00-\u9fff]", layer.zh), f"{ex.id} {check.id} layer {i}: the zh text is not Chinese"
        assert not re.search(r"[\u4e00-\u9fff]", SECTION_EN.sub("", layer.en)), \
            f"{ex.id} {check.id} layer {i}: the en text has Chinese"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.id for c in CHAPTERS])
def test_no_layer_repeats_another_or_a_hint(chapter):
    """A layer says something the nudge and the other layers do not, in either language."""
    for lang in ("en", "zh"):
        seen: dict[str, str] = {}
        for _, ex, check in (c for c in CHECKS if c[0] is chapter):
            for what, text in student_texts(check).items():
                if what == "title":
                    continue
                key = normalised(text[lang]).lower()
                where = f"{ex.id} {check.id} {what}"
                if what.startswith("layer"):
                    assert key not in seen, f"{where} ({lang}) repeats {seen[key]}"
                seen.setdefault(key, where)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.id for c in CHAPTERS])
def test_every_layer_names_a_section_of_the_course(chapter):
    for _, ex, check in (c for c in CHECKS if c[0] is chapter):
        for i, layer in enumerate(check.hint_layers, start=2):
            where = f"{ex.id} {check.id} layer {i}"
            named = SECTION_EN.findall(layer.en)
            assert named, f"{where} (en) names no section, as in 'section 1 (一)'"
            for number, numeral in named:
                assert number in chapter.sections and NUMERALS[int(number) - 1] == numeral, \
                    f"{where}: {number} {numeral}"
            numerals = SECTION_ZH.findall(layer.zh)
            assert numerals, f"{where} (zh) names no section, as in '第一节'"
            assert all(str(NUMERALS.index(n) + 1) in chapter.sections for n in numerals), where


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
