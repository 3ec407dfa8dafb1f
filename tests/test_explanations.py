"""Failed checks explain JAX's behaviour from the student's own run, in English and in
Chinese: which call compiled again and why (from JAX's explanation of its cache misses),
where a Python ``if`` met a traced value, that ``print`` ran only while tracing, and what
a timing harness measured against what the work really took."""
from __future__ import annotations

import re

import pytest

from conftest import VARIANTS, make_submission

from grader.chapter import load_chapter
from grader.grading import GradeOptions, grade
from grader.results import report_to_dict

pytestmark = pytest.mark.slow

MISTAKES = {
    "ex02_where": "python_if_piecewise",      # a Python if on a traced value
    "ex03_static_args": "alpha_static",       # a static hyper-parameter: every value compiles again
    "ex04_cache_keys": "keeps_dtype",         # a new dtype (and shape) reaches the jitted core
    "ex05_timing": "times_warmup",            # a harness that times the slow first calls
    "ex07_pitfalls": "print_not_debug",       # print instead of jax.debug.print
}


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    folder = make_submission(tmp_path_factory.mktemp("mistakes"),
                             {ex: VARIANTS / ex / f"{name}.py" for ex, name in MISTAKES.items()})
    report = grade(folder, GradeOptions(exercises=tuple(MISTAKES), seed=21))
    catalog = load_chapter("ch4").catalog
    return {lang: {(e["id"], c["id"]): c for e in report_to_dict(report, catalog, lang)["exercises"]
                   for c in e["checks"]} for lang in ("en", "zh")}


def test_a_static_argument_that_changes_is_named_with_its_values(checks):
    en, zh = (checks[lang][("ex03_static_args", "activate.compiles")]["message"] for lang in ("en", "zh"))
    assert re.search(r"call \d+ compiled again: argument alpha changed from [\d.]+ to [\d.]+, and it is static", en)
    assert re.search(r"第 \d+ 次调用重新编译了：参数 alpha 从 [\d.]+ 变成了 [\d.]+，而它是静态参数", zh)


def test_a_new_dtype_or_shape_is_named(checks):
    en, zh = (checks[lang][("ex04_cache_keys", "masked_mean_sq.compiles")]["message"] for lang in ("en", "zh"))
    assert re.search(r"a new dtype for padded: i32\[\d+\] instead of f32\[\d+\]", en), en
    assert re.search(r"a new shape for padded: f32\[\d+\] instead of f32\[\d+\]", en), en
    assert "的 dtype 变了" in zh and "的形状变了" in zh


def test_a_python_if_on_a_traced_value_points_at_the_line(checks):
    en, zh = (checks[lang][("ex02_where", "piecewise.traceable")]["message"] for lang in ("en", "zh"))
    assert re.search(r"at ex02_where\.py:\d+: a Python if/while tests a traced value", en), en
    assert re.search(r"在 ex02_where\.py:\d+ 失败：Python 的 if/while 在判断追踪中的值", zh), zh


def test_print_is_shown_to_run_only_while_tracing(checks):
    en, zh = (checks[lang][("ex07_pitfalls", "debug_norm.prints")]["message"] for lang in ("en", "zh"))
    assert "print ran only while jit traced debug_norm" in en and "JitTracer" in en and "printed nothing" in en
    assert "print 只在 jit 追踪 debug_norm 时运行了一次" in zh and "什么也没打印" in zh


def test_a_harness_is_shown_what_it_measured_against_the_real_work(checks):
    en, zh = (checks[lang][("ex05_timing", "time_call.warmup")]["message"] for lang in ("en", "zh"))
    assert re.search(r"returned [\d.]+ s per call, but the work really took [\d.]+ s", en), en
    assert "warm-up" in en and "预热" in zh
