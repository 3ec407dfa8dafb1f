"""Exercise 1, the two ways to write ``@jit``: hidden inputs, probe and checks.

``softmax_raw`` is plain, ``softmax`` its wrapped jit, ``log_softmax`` decorated; values
must stay finite for |x| up to 1e4, a shape compiles once, and ``softmax_raw`` is pure.
"""
from __future__ import annotations

from typing import TypedDict

import numpy as np

from grader.chapters.ch4.common import F32
from grader.checks import NAMES, CheckContext, Fail, Keys, Pass, Records, check
from grader.child.probe import ProbeContext
from grader.i18n import T
from grader.primitives import compiles, numeric, purity, structure
from grader.primitives.guards import attempted, returned
from grader.primitives.placing import put
from grader.primitives.wording import failed_kinds, label

KEYS = Keys(
    same_shape="{name}/compiles/same_shape", same_shape_call="{name}/compiles/same_shape/{i}",
    new_shape="{name}/compiles/new_shape", new_shape_call="{name}/compiles/new_shape/call",
    value="{name}/values/{case}", printed="softmax_raw/purity/printed", first="softmax_raw/purity/first",
    second="softmax_raw/purity/second", input_unchanged="softmax_raw/purity/input_unchanged",
    globals="softmax_raw/purity/globals", tracers="softmax_raw/purity/tracers",
    reference=("value",),  # the reference's run only gives the values to compare with
)
SAME_SHAPE_CALLS = 3


# =========================================================================== hidden inputs
def _large_rows(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """|x| up to 1e4, rows of both signs, with one row wholly positive and one wholly negative:
    every seed has a slice whose exp overflows and one whose exp underflows, far apart."""
    x = rng.uniform(-1e4, 1e4, size=shape)
    up, down = rng.choice(shape[0], size=2, replace=False)
    x[up] = rng.uniform(500.0, 1e4, size=shape[1])
    x[down] = -rng.uniform(500.0, 1e4, size=shape[1])
    return x.astype(F32)


class Inputs(TypedDict):
    """The hidden inputs, as ``inputs(rng)`` draws them and the probe and the checks read them."""

    #: softmax's cases by name: 1-D to 3-D, and magnitudes up to 1e4 (``large_*``)
    cases: dict[str, np.ndarray]
    #: arrays of one shape, one call each in a compile window
    same_shape: list[np.ndarray]
    #: an array of another shape: a second compile
    new_shape: np.ndarray
    #: the input softmax_raw must leave unchanged
    purity_x: np.ndarray


def inputs(rng: np.random.Generator) -> Inputs:
    # fixed shapes, fresh values: a program compiled in an earlier run is reused (grader.store),
    # and every new shape would cost each eager operation a compile
    one, two, three = (11,), (4, 9), (3, 4, 5)
    return {
        "cases": {
            "1d": rng.normal(size=one).astype(F32),
            "2d": rng.normal(scale=3.0, size=two).astype(F32),
            "3d": rng.normal(size=three).astype(F32),
            "large_2d": _large_rows(rng, two),
            "large_1d": rng.uniform(5e3, 1e4, size=one).astype(F32),
            "large_neg_1d": -rng.uniform(5e3, 1e4, size=one).astype(F32),
        },
        "same_shape": [rng.normal(size=two).astype(F32) for _ in range(SAME_SHAPE_CALLS)],
        "new_shape": rng.normal(size=three).astype(F32),
        "purity_x": rng.normal(size=two).astype(F32),
    }


#: float32 ``exp`` overflows to inf past this argument, and underflows to 0 below the second
EXP_OVERFLOW, EXP_UNDERFLOW = 88.73, -103.98


def regimes(inp: Inputs) -> dict[str, bool]:
    """What the contract tells apart, present in these inputs (tests/test_input_coverage.py)."""
    cases = list(inp["cases"].values())
    multi = [x for x in cases if x.ndim >= 2]
    slices = [row for x in cases for row in x.reshape(-1, x.shape[-1])]
    return {
        # 1-D to 3-D, and a last axis unlike the others: a softmax over another axis differs
        "ndim 1, 2 and 3": {x.ndim for x in cases} >= {1, 2, 3},
        "last axis unlike the others": any(x.shape[-1] != n for x in multi for n in x.shape[:-1]),
        # magnitudes up to 1e4 on both sides: without the shift by the max, exp overflows (inf/inf)
        # or a whole slice underflows (0/0)
        "slice max overflows exp": any(row.max() > EXP_OVERFLOW for row in slices),
        "slice wholly underflows exp": any(row.max() < EXP_UNDERFLOW for row in slices),
        # a shift by the whole array's max (not each slice's) underflows a slice far below the others
        "slice maxima far apart": any(np.ptp(x.reshape(-1, x.shape[-1]).max(axis=-1)) > -EXP_UNDERFLOW
                                      for x in multi),
        # log(softmax(x)) is -inf for an entry far below its slice's max; the stable form is not
        "entry far below its slice max": any(row.max() - row.min() > -EXP_UNDERFLOW for row in slices),
        "moderate values of both signs": any(np.abs(x).max() < 50 and x.min() < 0 < x.max() for x in cases),
    }


# =========================================================================== probe (child)
def probe(ctx: ProbeContext[Inputs]) -> None:
    inp = ctx.inputs
    left_at_import = purity.tracers_left(ctx.module)  # a demo's tracer is not softmax_raw's leak
    for name in ("softmax", "log_softmax"):
        same = put(inp["same_shape"])
        other = put(inp["new_shape"])
        with ctx.compiles(KEYS.same_shape(name=name)):
            for i, x in enumerate(same):
                ctx.call(KEYS.same_shape_call(name=name, i=i), name, x)
        with ctx.compiles(KEYS.new_shape(name=name), fresh=False):
            ctx.call(KEYS.new_shape_call(name=name), name, other)

    for name in ("softmax_raw", "softmax", "log_softmax"):  # each call its own input (it may donate it)
        for case, x in put(inp["cases"]).items():
            ctx.call(KEYS.value(name=name, case=case), name, x)

    # purity of the plain function, on a NumPy input it must not write into
    if not ctx.wants(KEYS.input_unchanged()):
        return
    original = inp["purity_x"]
    x = original.copy()
    before = purity.fingerprint_globals(ctx.module)
    with ctx.capture(KEYS.printed()):
        ctx.call(KEYS.first(), "softmax_raw", x)
        ctx.call(KEYS.second(), "softmax_raw", x)
    ctx.record(KEYS.input_unchanged(), bool(np.array_equal(x, original)))
    ctx.record(KEYS.globals(), purity.diff_globals(before, purity.fingerprint_globals(ctx.module)))
    ctx.record(KEYS.tracers(), purity.find_tracers(ctx.module, since=left_at_import))


# =========================================================================== checks (grader)
@check("softmax.values")
def softmax_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    cases = [(KEYS.value(name=name, case=case), label(name, x, case)) for name in ("softmax_raw", "softmax")
             for case, x in ctx.inputs["cases"].items()]
    return numeric.compare_calls(s, r, cases, dtype="float32", diagnose=_softmax_mistake)


def _softmax_mistake(failures: list[numeric.CaseFailure]) -> str | None:
    """Overflow on large inputs (the check's own hint), or a wrong formula."""
    return None if "non_finite" in failed_kinds(failures) else "formula"


@check("log_softmax.values")
def log_softmax_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    cases = [(KEYS.value(name="log_softmax", case=case), label("log_softmax", x, case))
             for case, x in ctx.inputs["cases"].items()]
    return numeric.compare_calls(s, r, cases, dtype="float32", rtol=1e-5, atol=1e-5, diagnose=_softmax_mistake)


def _structure(s: Records, name: str, *, jitted: bool) -> dict:
    attempted(s, KEYS.value(name=name, case="1d"))
    return structure.expect_jitted(s.value(NAMES(name=name)), name=name, jitted=jitted)


@check("softmax_raw.plain")
def softmax_raw_plain(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    return _structure(s, "softmax_raw", jitted=False)


@check("softmax.jitted")
def softmax_jitted(s: Records, r: Records, ctx: CheckContext[Inputs]) -> Pass:
    measured = _structure(s, "softmax", jitted=True)
    described = s.value(NAMES(name="softmax"))
    wrapped = described.get("wrapped") or described.get("name") or described.get("type")
    measured["wraps"] = wrapped
    if wrapped != "softmax_raw":
        return Pass(T("ch4.ex01.wraps_other", wrapped=wrapped), measured)
    return Pass(T("check.passed"), measured)


@check("log_softmax.jitted")
def log_softmax_jitted(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    return _structure(s, "log_softmax", jitted=True)


@check("compiles", depends=("softmax.jitted", "log_softmax.jitted"))
def compiles_once_per_shape(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    measured = {}
    for name in ("softmax", "log_softmax"):
        returned(s, *(KEYS.same_shape_call(name=name, i=i) for i in range(SAME_SHAPE_CALLS)),
                 KEYS.new_shape_call(name=name))
        measured[f"{name}/same_shape"] = compiles.expect(
            s.value(KEYS.same_shape(name=name)), what=T("ch4.ex01.three_calls", name=name), exactly=1)
        measured[f"{name}/new_shape"] = compiles.expect(
            s.value(KEYS.new_shape(name=name)), what=T("ch4.ex01.new_shape", name=name), exactly=1)
    return measured


@check("softmax_raw.pure")
def softmax_raw_pure(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    what = "softmax_raw"
    first = s.result(KEYS.first())
    second = s.result(KEYS.second())
    measured = {}
    problems, mistakes = [], []
    changed = s.value(KEYS.globals())
    for mistake, judge in (
        ("printed", lambda: purity.expect_silent(s.value(KEYS.printed()), what=what)),
        ("hidden_state" if purity.hidden_state_only(changed) else "globals",
         lambda: purity.expect_globals_unchanged(changed, what=what)),
        ("tracers", lambda: purity.expect_no_tracers(s.value(KEYS.tracers()), what=what)),
        ("not_same", lambda: purity.expect_same(first, second, what=what)),
    ):
        try:
            measured.update(judge())
        except Fail as failure:
            problems.append(failure.message)
            mistakes.append(mistake)
            measured.update(failure.measured)
    unchanged = s.value(KEYS.input_unchanged())
    measured["input_unchanged"] = unchanged
    if not unchanged:
        problems.append(T("purity.input_mutated", what=what))
        mistakes.append("mutated")
    if problems:
        raise Fail(problems, measured, hint=mistakes[0])
    return measured
