"""What a student's functions trace to, captured in the sandbox for the class's similarity (grader.child.programs):
recorded only where a batch asks for it, and never at the cost of a verdict."""
from __future__ import annotations

import time

import pytest

from conftest import SOLUTIONS, grade_report, make_submission, rendered, variant


def _verdicts(report) -> list[tuple]:
    return [(ex.id, ex.score, [(c.id, c.status) for c in ex.checks]) for ex in report.exercises]


def test_first_calls_keep_plain_data_only_and_trace_as_jit_does():
    import jax
    import jax.numpy as jnp

    from grader.child.programs import FirstCalls

    calls = FirstCalls()
    scaled = jax.jit(lambda x, k: x * k, static_argnames="k")
    calls.note("scaled", scaled, (jnp.ones(3),), {"k": 2.0})
    calls.note("scaled", scaled, (jnp.ones(9),), {"k": 5.0})  # the first call only
    calls.note("harness", lambda fn: fn(), (lambda: 1,), {})  # handed a callable: never traced
    calls.note("plain", lambda x, n: jnp.sum(x) * n, (jnp.ones((2, 2)), 3), {})
    traced = calls.traced()
    assert set(traced) == {"scaled", "plain"}
    assert "f32[3]" in traced["scaled"]["jaxpr"] and "mul" in traced["scaled"]["jaxpr"]
    assert "reduce_sum" in traced["plain"]["jaxpr"]


def test_a_function_that_hangs_or_prints_while_traced_costs_its_own_entry_only(capsys):
    import jax
    import jax.numpy as jnp

    from grader.child import programs
    from grader.child.programs import FirstCalls

    def stalls(x):
        print("tracing!")
        if isinstance(x, jax.core.Tracer):
            time.sleep(30)
        return x + 1

    calls = FirstCalls()
    calls.note("stalls", stalls, (jnp.ones(2),), {})
    calls.note("fine", lambda x: x * 2, (jnp.ones(2),), {})
    began = time.monotonic()
    traced = calls.traced()
    assert time.monotonic() - began < programs.TRACE_S + 2
    assert "tracing took over" in traced["stalls"]["error"] and "jaxpr" in traced["fine"]
    assert "tracing!" not in capsys.readouterr().out


@pytest.mark.slow
def test_programs_are_recorded_where_asked_and_no_verdict_moves(tmp_path):
    """The solutions and a timing harness (tracing it would call the function it times, whose calls are
    records: it once cost time_call.call_count) keep every verdict with the programs recorded."""
    harness = variant("ex05_timing", "max_not_median")
    student = make_submission(tmp_path, {"ex05_timing": harness})
    for path, exercises in ((SOLUTIONS, ("1", "2", "4", "5", "6")), (student, ("5",))):
        plain = grade_report(path, exercises=exercises, seed=21)
        traced = grade_report(path, exercises=exercises, seed=21, programs=True)
        assert _verdicts(plain) == _verdicts(traced)
        assert plain.programs == {}
    report = grade_report(SOLUTIONS, exercises=("2",), seed=21, programs=True)
    assert "programs" not in rendered(report) and "select_n" not in str(rendered(report))  # never the student's
    solutions = report.programs["ex02_where"]
    assert solutions["file"] == "ex02_where.py" and "def piecewise" in solutions["source"]
    assert set(solutions["functions"]) == {"piecewise", "normalize_if_positive", "clip_by_norm"}
    assert "select_n" in solutions["functions"]["piecewise"]["jaxpr"]
