"""Exercise 2, a Python ``if`` becomes ``jnp.where``: hidden inputs, probe and checks.

Each function must trace on shapes alone (no Python branch on a traced value), give the
right values on both branches (zero sums and zero norms included), and compile once for
inputs that take different branches and for many ``max_norm`` values.
"""
from __future__ import annotations

from typing import Any, Literal, TypedDict

import numpy as np

from grader.chapters.ch4.common import F32
from grader.checks import CheckContext, Fail, Keys, NotAttempted, Records, check
from grader.child.probe import ProbeContext
from grader.i18n import T
from grader.primitives import compiles, numeric, structure
from grader.primitives.guards import all_jitted, any_attempted, returned
from grader.primitives.placing import put
from grader.primitives.wording import failed_kinds, label

KEYS = Keys(
    trace="{name}/trace", window="{name}/compiles", window_call="{name}/compiles/{i}",
    value="{name}/values/{case}",
    reference=("value",),  # the reference's run only gives the values to compare with
)
FUNCTIONS = ("piecewise", "normalize_if_positive", "clip_by_norm")


# =========================================================================== hidden inputs
def _zero_sum(rng: np.random.Generator, n: int) -> np.ndarray:
    """Whole numbers that cancel exactly in any order of summation."""
    half = rng.integers(1, 9, size=n).astype(F32)
    values = np.concatenate([half, -half])
    rng.shuffle(values)
    return values


def _mixed_signs(rng: np.random.Generator, n: int, sign: int) -> np.ndarray:
    """Entries of both signs whose sum has ``sign``: two thirds of them of that sign, at least
    0.5 each, the rest of the other sign, at most 0.9 each (a sum of at least 0.5·2n/3 − 0.9·n/3 > 0)."""
    major = n - n // 3
    values = np.concatenate([rng.uniform(0.5, 3.0, size=major), -rng.uniform(0.1, 0.9, size=n - major)]) * sign
    rng.shuffle(values)
    return values.astype(F32)


def _small_positive_sum(rng: np.random.Generator, n: int) -> np.ndarray:
    """Entries of both signs whose sum lies in (0, 1): ``total > 1`` (or ``>= 1``) for ``total > 0`` returns them
    unchanged, which no other input shows (a mutant survived every seed without it)."""
    values = rng.normal(size=n)
    values = values - values.mean() + rng.uniform(0.2, 0.8) / n
    return values.astype(F32)


class Inputs(TypedDict):
    """The hidden inputs, as ``inputs(rng)`` draws them and the probe and the checks read them."""

    #: each function's cases by name (``clip``'s: ``[x, max_norm]``)
    piecewise: dict[str, np.ndarray]
    normalize: dict[str, np.ndarray]
    clip: dict[str, list[Any]]
    #: arrays of one shape taking different branches (``clip_by_norm``: with ``clip_norms``), in a compile window
    piecewise_same: list[np.ndarray]
    normalize_same: list[np.ndarray]
    clip_same: list[np.ndarray]
    clip_norms: list[float]


def inputs(rng: np.random.Generator) -> Inputs:
    n, same = 8, (5, 6)  # fixed shapes, fresh values (see ex01)
    clip_same = [rng.normal(size=same).astype(F32) * s for s in (0.05, 3.0, 0.5, 8.0, 1.0, 0.0)]
    drawn: Inputs = {
        "piecewise": {
            "mixed": rng.normal(size=same).astype(F32),
            "positive": rng.uniform(0.1, 4.0, size=(7,)).astype(F32),
            "negative": -rng.uniform(0.1, 4.0, size=(3, 4, 2)).astype(F32),
            "scalar": np.asarray(rng.normal(), dtype=F32),
        },
        "normalize": {
            "positive_sum": _mixed_signs(rng, 2 * n, 1),
            "negative_sum": _mixed_signs(rng, 9, -1),
            "zero_sum": _zero_sum(rng, n),
            "all_zero": np.zeros((6, 5), F32),
        },
        "clip": {
            "long": [rng.normal(size=same).astype(F32) * 4.0, float(rng.uniform(0.5, 2.0))],
            "short": [rng.normal(size=(4, 7)).astype(F32) * 0.05, float(rng.uniform(5.0, 10.0))],
            "long_3d": [rng.normal(size=(3, 2, 4)).astype(F32) * 3.0, float(rng.uniform(0.5, 2.0))],
            "zero": [np.zeros((6,), F32), float(rng.uniform(0.5, 2.0))],
        },
        "piecewise_same": [np.abs(rng.normal(size=same)).astype(F32), -np.abs(rng.normal(size=same)).astype(F32),
                           rng.normal(size=same).astype(F32)],
        "normalize_same": [np.abs(rng.normal(size=2 * n)).astype(F32) + 0.1,
                           -np.abs(rng.normal(size=2 * n)).astype(F32), _zero_sum(rng, n)],
        "clip_same": clip_same,
        "clip_norms": [float(v) for v in rng.uniform(0.3, 6.0, size=len(clip_same))],
    }
    # drawn last: every other input of a seed stays what it was
    drawn["normalize"]["small_positive_sum"] = _small_positive_sum(rng, 12)
    return drawn


def regimes(inp: Inputs) -> dict[str, bool]:
    """What the contract tells apart, present in these inputs (tests/test_input_coverage.py)."""
    pw, nm = list(inp["piecewise"].values()), list(inp["normalize"].values())
    sums = [(float(np.sum(x, dtype=np.float64)), x) for x in nm]
    norms = [(float(np.linalg.norm(x.astype(np.float64))), m, x) for x, m in inp["clip"].values()]
    same_norms = [float(np.linalg.norm(x.astype(np.float64))) / m for x, m in zip(inp["clip_same"], inp["clip_norms"])]
    same_sums = [float(np.sum(x, dtype=np.float64)) for x in inp["normalize_same"]]
    return {
        # piecewise: both branches, in one array too, on a 0-d array and on 3-D
        "piecewise x > 0 and x < 0 in one array": any(x.min() < 0 < x.max() for x in pw),
        "piecewise 0-d": any(x.ndim == 0 for x in pw),
        "piecewise 3-D": any(x.ndim == 3 for x in pw),
        # normalize: the test is on the sum, not on the entries' signs; a zero sum returns x
        "sum > 0 with a negative entry": any(t > 0 and x.min() < 0 for t, x in sums),
        "sum < 0 with a positive entry": any(t < 0 and x.max() > 0 for t, x in sums),
        "sum exactly 0, entries not all 0": any(t == 0 and float(np.sum(x)) == 0 and np.any(x) for t, x in sums),
        "sum in (0, 1), entries of both signs": any(0 < t < 1 and 0 < float(np.sum(x)) < 1 and x.min() < 0
                                                    for t, x in sums),
        "all zero": any(not np.any(x) for x in nm),
        # clip: the L2 norm of all elements against max_norm, on both sides, and a zero norm
        "norm above max_norm": any(n > 1.05 * m for n, m, _ in norms),
        "norm below max_norm": any(0 < n < 0.95 * m for n, m, _ in norms),
        "norm above max_norm, 3-D": any(n > 1.05 * m and x.ndim >= 3 for n, m, x in norms),
        "norm 0": any(n == 0 for n, _, _ in norms),
        # one compile for inputs that take different branches
        "compile window: both piecewise branches": any(x.min() > 0 for x in inp["piecewise_same"])
        and any(x.max() < 0 for x in inp["piecewise_same"]),
        "compile window: sums > 0, < 0 and 0": {np.sign(t) for t in same_sums} == {-1.0, 0.0, 1.0},
        "compile window: norms above and below max_norm": min(same_norms) < 0.95 and max(same_norms) > 1.05,
    }


def _calls(inp: Inputs) -> dict[str, list[tuple]]:
    """Each function's argument lists, by the name of its case."""
    return {
        "piecewise": [(x,) for x in inp["piecewise"].values()],
        "normalize_if_positive": [(x,) for x in inp["normalize"].values()],
        "clip_by_norm": [(x, m) for x, m in inp["clip"].values()],
    }


# =========================================================================== probe (child)
def probe(ctx: ProbeContext[Inputs]) -> None:
    inp = ctx.inputs
    # a Python branch on a traced value shows when tracing on shapes alone
    for name, arg_list in _calls(inp).items():
        fn = ctx.get(name)
        if not ctx.wants(KEYS.trace(name=name)):
            continue
        if fn is None:
            ctx.record(KEYS.trace(name=name), {"status": "missing"})
            continue
        record = {"status": "ok"}
        ctx.announce(name)
        for args in arg_list:
            record = structure.trace_abstractly(fn, *args, student_dir=ctx.student_dir)
            if record["status"] != "ok":
                break
        ctx.record(KEYS.trace(name=name), record)

    same: dict[str, list[tuple]] = {"piecewise": [(x,) for x in put(inp["piecewise_same"])],
                                    "normalize_if_positive": [(x,) for x in put(inp["normalize_same"])],
                                    "clip_by_norm": list(zip(put(inp["clip_same"]), inp["clip_norms"]))}
    for name, arg_list in same.items():
        with ctx.compiles(KEYS.window(name=name)):
            for i, args in enumerate(arg_list):
                ctx.call(KEYS.window_call(name=name, i=i), name, *args)

    for case, x in put(inp["piecewise"]).items():
        ctx.call(KEYS.value(name="piecewise", case=case), "piecewise", x)
    for case, x in put(inp["normalize"]).items():
        ctx.call(KEYS.value(name="normalize_if_positive", case=case), "normalize_if_positive", x)
    for case, (x, m) in inp["clip"].items():
        ctx.call(KEYS.value(name="clip_by_norm", case=case), "clip_by_norm", put(x), m)


# =========================================================================== checks (grader)
def _traceable(s: Records, name: str) -> dict:
    record = s.value(KEYS.trace(name=name))
    if record.get("status") == "missing":
        raise Fail(T("call.missing", name=name, file=s.module_file))
    if record.get("status") == "not_attempted":
        raise NotAttempted(name)
    return structure.expect_traceable(record, name=name)


def _values(s: Records, r: Records, ctx: CheckContext[Inputs], name: str,
            group: Literal["piecewise", "normalize", "clip"], diagnose=None) -> dict:
    cases = []
    for case, item in ctx.inputs[group].items():
        x = item[0] if name == "clip_by_norm" else item
        cases.append((KEYS.value(name=name, case=case), label(name, x, case)))
    return numeric.compare_calls(s, r, cases, dtype="float32", diagnose=diagnose)


def _divides_by_zero(*zero_cases: str):
    """NaN or inf exactly on the inputs whose sum or norm is 0: the division was chosen there."""
    def diagnose(failures: list[numeric.CaseFailure]) -> str | None:
        return "divides_by_zero" if "non_finite" in failed_kinds(failures, cases=zero_cases) else None

    return diagnose


@check("piecewise.traceable")
def piecewise_traceable(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    return _traceable(s, "piecewise")


@check("piecewise.values", depends=("piecewise.traceable",))
def piecewise_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    return _values(s, r, ctx, "piecewise", "piecewise")


@check("normalize_if_positive.traceable")
def normalize_if_positive_traceable(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    return _traceable(s, "normalize_if_positive")


@check("normalize_if_positive.values", depends=("normalize_if_positive.traceable",))
def normalize_if_positive_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    return _values(s, r, ctx, "normalize_if_positive", "normalize", _divides_by_zero("zero_sum", "all_zero"))


@check("clip_by_norm.traceable")
def clip_by_norm_traceable(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    return _traceable(s, "clip_by_norm")


@check("clip_by_norm.values", depends=("clip_by_norm.traceable",))
def clip_by_norm_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    return _values(s, r, ctx, "clip_by_norm", "clip", _divides_by_zero("zero"))


@check("jitted")
def jitted(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    any_attempted(s, {name: KEYS.window_call(name=name, i=0) for name in FUNCTIONS})
    return all_jitted(s, list(FUNCTIONS))


@check("compiles", depends=("jitted", "piecewise.traceable", "normalize_if_positive.traceable",
                            "clip_by_norm.traceable"))
def compiles_once(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    groups = (("piecewise", ctx.inputs["piecewise_same"], "ch4.ex02.branches"),
              ("normalize_if_positive", ctx.inputs["normalize_same"], "ch4.ex02.branches"),
              ("clip_by_norm", ctx.inputs["clip_same"], "ch4.ex02.norms"))
    measured, problems, mistakes = {}, [], []
    for name, same, what in groups:
        n = len(same)
        returned(s, *(KEYS.window_call(name=name, i=i) for i in range(n)))
        try:
            measured[name] = compiles.expect(s.value(KEYS.window(name=name)), what=T(what, name=name, n=n),
                                             exactly=1)
        except Fail as failure:
            problems.append(failure.message)
            mistakes.append("static_max_norm" if name == "clip_by_norm" else None)
            measured[name] = failure.measured
    if problems:
        raise Fail(problems, measured, hint=mistakes[0])
    return measured
