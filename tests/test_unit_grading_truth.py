"""Contracts as Python reads them (issue "grading truth, third round"): a raised exception is judged with
``isinstance``, a printed number at the precision it was printed."""
from __future__ import annotations

import numpy as np
import pytest

from grader.chapters.ch4.ex07_pitfalls import _printed, _printed_right
from grader.child.probe import builtin_kinds


class UnknownActivationError(ValueError):
    pass


class Deeper(UnknownActivationError, KeyError):
    pass


def test_a_subclass_of_valueerror_is_a_valueerror():
    assert "ValueError" in builtin_kinds(UnknownActivationError)
    assert {"ValueError", "KeyError", "LookupError", "Exception"} <= set(builtin_kinds(Deeper))
    assert "ValueError" not in builtin_kinds(TypeError) and builtin_kinds(TypeError)[0] == "TypeError"


@pytest.mark.parametrize("printed, expected", [
    ("norm=3.142", 3.14159265),        # {:.3f}: 4.1e-4 off, more than rtol 1e-4 allows, within half a unit
    ("norm=0.124", 0.12360),           # {:.3f} of a small norm
    ("norm=3.1416e+00", 3.14159265),   # {:.4e}
    ("norm=3.14159", 3.14159265),
    ("norm=  12.35", 12.3456),         # {:.2f}: four significant digits
])
def test_a_correctly_rounded_print_is_right(printed, expected):
    (value, half_unit), = _printed(printed)
    assert _printed_right(value, half_unit, expected)


def test_the_rounded_print_that_failed_before_is_one_the_old_tolerance_refused():
    (value, _), = _printed("norm=3.142")
    assert not np.isclose(value, 3.14159265, rtol=1e-4, atol=1e-6)  # what the check used to ask


@pytest.mark.parametrize("printed, expected", [
    ("norm=3.143", 3.14159265),  # rounded wrong
    ("norm=3", 3.14159265),      # one significant digit: too few to judge it right
    ("norm=0.1", 0.12360),
    ("norm=nan", 1.0),
    ("norm=2.718", 3.14159265),
])
def test_a_wrong_or_too_coarse_print_is_wrong(printed, expected):
    (value, half_unit), = _printed(printed)
    assert not _printed_right(value, half_unit, expected)


# ------------------------------------------------------------------ a notebook replayed as the kernel ran it
TOP_DOWN = '''import jax.numpy as jnp

def masked_mean_sq(x):
    return _mean_sq_core(jnp.asarray(x))

print(masked_mean_sq([1.0]))

def _mean_sq_core(x):
    return jnp.mean(x ** 2) * SCALE

SCALE = 1.0
'''

REDEFINED = '''import jax.numpy as jnp

def norm(x):
    return jnp.sqrt(jnp.sum(x ** 2))

def clip_by_norm(x, max_norm):
    n = norm(x)
    return jnp.where(n > max_norm, x * max_norm / n, x)

def norm(x):
    return jnp.sum(jnp.abs(x))
'''


def test_a_helper_defined_below_the_function_that_calls_it_is_replayed():
    """``masked_mean_sq`` written top-down: its helper and the global the helper reads come in later cells; the
    kernel had them when the function was called, so the replay keeps them (it left them out: NameError)."""
    from grader.replay import Replay

    module = Replay.of(TOP_DOWN).module_for({"masked_mean_sq"})
    namespace: dict = {}
    exec(compile(module, "<replay>", "exec"), namespace)
    assert float(namespace["masked_mean_sq"]([3.0])) == 9.0
    assert "print(" not in module  # what nothing needs stays out


def test_a_helper_defined_again_in_a_later_cell_is_the_one_replayed():
    """The kernel's ``clip_by_norm`` calls the last ``norm`` (an L1 norm here: wrong), and so does the replay."""
    from grader.replay import Replay

    module = Replay.of(REDEFINED).module_for({"clip_by_norm"})
    namespace: dict = {}
    exec(compile(module, "<replay>", "exec"), namespace)
    import numpy as np

    got = np.asarray(namespace["clip_by_norm"](np.array([3.0, 4.0], np.float32), 1.0))
    assert np.allclose(got, [3.0 / 7.0, 4.0 / 7.0])  # the L1 norm 7, as in the kernel; not the L2 norm 5


# ------------------------------------------------------------------ a module saved in another encoding
@pytest.mark.parametrize("encoding, guess", [("gbk", "GBK (GB18030)"), ("utf-16", "UTF-16")])
def test_a_module_not_saved_as_utf8_is_named_so_with_its_line(encoding, guess):
    from grader.module_bytes import not_utf8_at as _not_utf8

    text = 'x = 1\ny = 2\n# 第三行：中文注释\n'
    assert _not_utf8(text.encode(encoding)) == {"line": 1 if encoding == "utf-16" else 3, "guess": guess}
    assert _not_utf8(text.encode("utf-8")) is None
    assert _not_utf8(("# -*- coding: gbk -*-\n" + text).encode("gbk")) is None  # declared: Python reads it so


@pytest.mark.slow
def test_a_solution_saved_in_gbk_is_told_to_be_saved_as_utf8(tmp_path):
    """The solution itself, saved by a Chinese Windows editor in GBK: Python reads it as UTF-8 and stops at a
    syntax error in some line; the report names the encoding, the line and what to do instead."""
    import json
    import shutil
    import subprocess
    import sys

    from conftest import ROOT, SOLUTIONS

    folder = tmp_path / "ch4"
    shutil.copytree(SOLUTIONS, folder)
    text = (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8")
    (folder / "ex02_where.py").write_bytes(text.encode("gbk"))
    first_chinese = next(i for i, line in enumerate(text.split("\n"), start=1) if any(ord(c) > 127 for c in line))
    done = subprocess.run([sys.executable, "-m", "grader", str(folder), "-k", "2", "--json", "--lang", "en",
                           "--report-dir", str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    ex = json.loads(done.stdout)["exercises"][0]
    said = json.dumps(ex, ensure_ascii=False)
    assert ex["score"] == 0 and "not saved as UTF-8" in said and f"line {first_chinese}" in said, said[:2000]
    assert "GBK" in said and "syntax" not in said.lower(), said[:2000]


@pytest.mark.slow
def test_an_answer_saved_under_another_name_is_pointed_at(tmp_path):
    """The stubs, and ex02 solved in a copy named as a file manager names it ("练习 二 副本.py"): counted among
    the files graded, and now named beside the exercise that reads "not attempted"."""
    import json
    import shutil
    import subprocess
    import sys

    from conftest import ROOT, SOLUTIONS, STUBS

    folder = tmp_path / "ch4"
    shutil.copytree(STUBS, folder)
    shutil.copy(SOLUTIONS / "ex02_where.py", folder / "练习 二 副本.py")
    done = subprocess.run([sys.executable, "-m", "grader", str(folder), "-k", "2", "-k", "3", "--json", "--lang",
                           "en", "--report-dir", str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    by_id = {e["id"]: json.dumps(e, ensure_ascii=False) for e in json.loads(done.stdout)["exercises"]}
    assert "练习 二 副本.py defines piecewise, normalize_if_positive, clip_by_norm too" in by_id["ex02_where"]
    assert "副本" not in by_id["ex03_static_args"]  # it defines none of ex03's


# ------------------------------------------------------------------ an error that comes when the result is read
def test_an_error_of_the_computation_read_with_its_result_is_the_calls(monkeypatch, tmp_path):
    """JAX dispatches asynchronously: an out-of-memory (or a failed callback) inside a jitted function can come
    when its result is read, not from the call. It is the call's error, said as one: raised, with its type,
    message, never "returned undescribable (JaxRuntimeError)"."""
    from jax.errors import JaxRuntimeError

    from grader.child import probe

    def unreadable(value, **_):
        raise JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.")

    monkeypatch.setattr(probe, "describe", unreadable)
    context = object.__new__(probe.ProbeContext)
    context._calling, context.student_dir, context.first_calls = "heavy", str(tmp_path), None

    def heavy(x):
        return x

    outcome = context.invoke(heavy, "heavy", 1.0).record
    assert outcome["status"] == "raised" and outcome["type"] == "JaxRuntimeError", outcome
    assert "RESOURCE_EXHAUSTED" in outcome["message"] and "defined" in outcome, outcome
    from grader.checks import raised_text
    from grader.i18n import grader_catalog

    said = grader_catalog().render(raised_text(outcome), "en")
    assert "JaxRuntimeError" in said and "RESOURCE_EXHAUSTED" in said and "undescribable" not in said, said


# ------------------------------------------------------------------ the grader's own timing
def _fake_timing(monkeypatch, implausible_passes: int, n_cases: int):
    from grader.primitives import timing

    asked: list[str] = []

    def request_times(session, case, *, reps, batches, deadline, attempts=3):
        asked.append(case)
        if len(asked) <= implausible_passes * n_cases:
            return {"error": "implausible timings", "implausible": True}
        return {"baseline": [0.004] * reps, "candidate": [0.001] * reps, "wall": 0.01}

    def alternate(student, reference, case, **_):
        samples = {"baseline": [0.004] * 8, "candidate": [0.001] * 8, "wall": [0.01] * 4}
        return dict(samples), dict(samples)

    monkeypatch.setattr(timing, "request_times", request_times)
    monkeypatch.setattr(timing, "alternate", alternate)
    monkeypatch.setattr("time.sleep", lambda s: None)
    return asked


def test_the_references_calibration_is_tried_again_when_a_whole_pass_is_implausible(monkeypatch):
    """Under load (two cores, load 11-18) every calibration request of a pass could be implausible: the
    check then said "the reference could not be timed ... not your fault" and the points were gone. The
    grader passes over the sizes again while time is left."""
    import time

    from grader.chapters.ch4.ex06_speedup import driver as ex06_driver

    cases = ["fast_heavy/a", "fast_heavy/b"]
    asked = _fake_timing(monkeypatch, implausible_passes=2, n_cases=len(cases))
    out = ex06_driver._time_function(object(), object(), cases, time.monotonic() + 60, 0.25)
    assert out["reference"]["speedup"] == 4.0 and out["student"]["speedup"] == 4.0, out
    assert len(asked) == 2 * len(cases) + 2 * len(cases)  # two implausible passes, then one that measured


def test_the_calibration_gives_up_when_no_time_is_left(monkeypatch):
    import time

    from grader.chapters.ch4.ex06_speedup import driver as ex06_driver

    cases = ["fast_heavy/a"]
    asked = _fake_timing(monkeypatch, implausible_passes=99, n_cases=1)
    out = ex06_driver._time_function(object(), object(), cases, time.monotonic() + 1.0, 0.25)
    assert out["reference"]["error"] == "calibration failed" and len(asked) == 1


def test_timed_in_turn_a_whole_implausible_pass_is_made_again_on_each_side(monkeypatch):
    """On a TPU the sides are timed in turn, each alone (``_time_alone``): the same retry as the
    calibration above, for the side timed first (it calibrates) and for the second (the sizes chosen)."""
    import time

    from grader.chapters.ch4.ex06_speedup import driver as ex06_driver
    from grader.primitives import timing

    cases = ["layer_norm/a", "layer_norm/b"]
    asked = _fake_timing(monkeypatch, implausible_passes=1, n_cases=len(cases))
    first = ex06_driver._time_alone(object(), cases, time.monotonic() + 60, None)
    assert set(first) == set(cases) and all("samples" in got for got in first.values()), first
    assert len(asked) == 2 * len(cases)  # one implausible pass, then one that measured

    rounds: list[str] = []

    def alternate(student, reference, case, **_):  # the second side: its first pass implausible
        rounds.append(case)
        if len(rounds) <= len(cases):
            return {"error": "implausible timings", "implausible": True}, None
        return {"baseline": [0.004] * 8, "candidate": [0.001] * 8, "wall": [0.01] * 4}, None

    monkeypatch.setattr(timing, "alternate", alternate)
    second = ex06_driver._time_alone(object(), cases, time.monotonic() + 60, first)
    assert len(rounds) == 2 * len(cases) and all("error" not in got["samples"] for got in second.values())
    combined = ex06_driver._combine(first, second)
    assert combined["reference"]["speedup"] == 4.0 and combined["in_turn"]
    # a process that is gone is not timed again: one pass
    rounds.clear()
    monkeypatch.setattr(timing, "alternate",
                        lambda *a, **k: (rounds.append(1) or {"error": "the process is gone"}, None))
    ex06_driver._time_alone(object(), cases, time.monotonic() + 60, first)
    assert len(rounds) == len(cases)


# ------------------------------------------------------- an interrupted run never takes the full report's place
def test_a_run_interrupted_before_any_exercise_is_partial_and_leaves_report_json_alone(tmp_path):
    """Ctrl-C 2.5 s into a grading (no exercise graded yet) wrote "Chapter 4: JIT basics: 0 / 0" over the
    last full report.json (42/80): an empty selection read as "every exercise"."""
    from grader.report.render import report_paths
    from grader.results import Report, mark_selection

    ids = [f"ex0{i}" for i in range(1, 9)]

    def report(graded: list[str], interrupted: bool) -> Report:
        made = Report(chapter="ch4", chapter_title="Chapter 4", seed=1, started_at="2026-12-06T00:00:00+00:00",
                      duration_s=2.5, submission={}, environment={}, exercises=[], interrupted=interrupted)
        made.exercises = [type("E", (), {"id": i, "score": 0.0, "max_score": 10.0})() for i in graded]
        return mark_selection(made, ids)

    assert report([], interrupted=True).partial
    assert report_paths(report([], interrupted=True), tmp_path)[0].name == "report.partial.json"
    assert report(ids[:3], interrupted=True).partial
    assert not report(ids, interrupted=True).partial  # every exercise graded before Ctrl-C: a full report
    assert not report(ids, interrupted=False).partial and report(ids[:2], interrupted=False).partial


@pytest.mark.parametrize("minor", [0, 2, 4])
def test_a_notebook_of_nbformat_4_0_to_4_4_with_cell_ids_reads_without_a_validation_dump(minor, tmp_path, capsys,
                                                                                         caplog):
    """Front ends write cell ids whatever minor version a notebook says; nbformat then printed 'Notebook JSON is
    invalid: Additional properties are not allowed ('id' was unexpected)' and the cell's dump."""
    import json
    import logging

    from grader.ipynb import read_cells

    cells = [{"cell_type": "code", "execution_count": 1, "id": "a1b2", "metadata": {}, "outputs": [],
              "source": "def f(x):\n    return x\n"},
             {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [], "source": "y = 2\n"}]
    path = tmp_path / "old.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": minor}))
    with caplog.at_level(logging.DEBUG):
        read, history = read_cells(path)
    assert [c.source for c in read] == ["def f(x):\n    return x\n", "y = 2\n"] and not history
    said = capsys.readouterr().err + caplog.text
    assert "invalid" not in said and "Failed validating" not in said, said


def test_the_numbers_behind_a_verdict_are_cut_between_items_never_inside_a_number():
    """`Measured:` was cut at 220 characters wherever that fell: mid-number ('0.00012345…')."""
    import json
    import re

    from grader.report.common import measured_text

    measured = {f"case{i}": {"speedup": 1 / 7 + i, "baseline_s": 5.6012500067481596e-05 * i} for i in range(12)}
    text = measured_text(measured)
    assert len(text) <= 220 and text.endswith(", …")
    for number in re.findall(r"-?\d[\d.e+-]*", text):
        float(number)  # every number shown whole
    assert "0.1429" in text and "0.14285" not in text  # four significant digits
    small = {"compiles": 3, "expected": 1}
    assert json.loads(measured_text(small)) == small  # short: whole, as JSON


def test_a_module_is_parsed_once_per_content_and_a_syntax_error_each_time():
    """A grading reads each of the submission's modules several times (what it answers, its problems, its
    imports, JAX's private API): the same bytes give the same tree, other bytes their own; a module that does
    not parse raises each time, naming its file; no more than ``KEEP_TREES`` trees are kept."""
    import ast

    from grader import module_bytes

    source = b"import jax\n\ndef f(x):\n    return x + 1\n"
    tree = module_bytes.parsed(source, filename="ex01.py")
    assert module_bytes.parsed(bytes(bytearray(source)), filename="ex01.py") is tree
    assert ast.dump(tree) == ast.dump(ast.parse(source))
    other = module_bytes.parsed(source.replace(b"+ 1", b"+ 2"))
    assert other is not tree and ast.dump(other) != ast.dump(tree)
    for name in ("ex02.py", "ex03.py"):
        with pytest.raises(SyntaxError) as raised:
            module_bytes.parsed(b"def f(:\n", filename=name)
        assert raised.value.filename == name
    for i in range(module_bytes.KEEP_TREES + 5):
        module_bytes.parsed(f"x = {i}\n".encode())
    assert len(module_bytes._TREES) == module_bytes.KEEP_TREES
    assert module_bytes.parsed(source) is not tree  # pushed out by newer ones, parsed again
