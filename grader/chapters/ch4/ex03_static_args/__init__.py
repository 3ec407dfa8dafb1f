"""Exercise 3, static versus dynamic arguments: hidden inputs, probe and checks.

Values of all four functions; then compile counts: five ``coeff`` values compile once,
``n_steps`` 3, 5, 5, 3 twice, each distinct ``axis`` once, two modes with three alphas
each twice (a continuous hyper-parameter stays dynamic).
"""
from __future__ import annotations

from typing import TypedDict

import numpy as np

from grader.chapters.ch4.common import F32
from grader.checks import CheckContext, Fail, Keys, Records, check
from grader.child.probe import ProbeContext
from grader.i18n import T, Text
from grader.primitives import compiles, numeric
from grader.primitives.guards import require_jitted, returned
from grader.primitives.placing import put
from grader.primitives.wording import shown

KEYS = Keys(
    window="{name}/compiles", window_call="{name}/compiles/{i}", value="{name}/values/{case}",
    mode_value="activate/values/{mode}/{j}",
    reference=("value", "mode_value"),  # the reference's run only gives the values to compare with
)
MODES = ("relu", "leaky_relu", "elu", "tanh")


# =========================================================================== hidden inputs
class Inputs(TypedDict):
    """The hidden inputs, as ``inputs(rng)`` draws them and the probe and the checks read them."""

    x: np.ndarray
    x3: np.ndarray
    coeffs: list[float]
    n_steps_compile: list[int]
    n_steps_values: list[int]
    axes_compile: list[int]
    axes_values: list[int]
    #: every mode, in a drawn order; the first two in the compile window
    modes: list[str]
    modes_compile: list[str]
    alphas: list[float]
    #: a mode activate must refuse with a ValueError
    unknown_mode: str


def inputs(rng: np.random.Generator) -> Inputs:
    modes = [str(m) for m in rng.permutation(MODES)]
    return {
        "x": rng.normal(size=(10,)).astype(F32),  # fixed shapes, fresh values (see ex01)
        "x3": rng.normal(size=(4, 5, 3)).astype(F32),
        # both signs of coeff on every seed, then any
        "coeffs": [float(c) for c in rng.permutation([rng.uniform(-3.0, -0.5), rng.uniform(0.5, 3.0),
                                                      *rng.uniform(-3.0, 3.0, size=3)])],
        "n_steps_compile": [3, 5, 5, 3],
        # no step at all, and two others (one at least 2: 1.5 ** n is not 1.5 * n)
        "n_steps_values": [int(n) for n in rng.permutation([0, *rng.choice([1, 2, 4, 6, 7], size=2, replace=False)])],
        "axes_compile": [0, 1, 2, 0, 1, -1],
        "axes_values": [0, 1, 2, -1],
        "modes": modes,
        "modes_compile": modes[:2],
        # alpha below 1 and above 1 on every seed (max(alpha * x, x) is a leaky ReLU only below), then any
        "alphas": [float(a) for a in rng.permutation([rng.uniform(0.05, 0.95), rng.uniform(1.05, 1.5),
                                                      rng.uniform(0.05, 1.5)])],
        "unknown_mode": str(rng.choice(["swish", "gelu", "sigmoid", "softplus"])),
    }


def regimes(inp: Inputs) -> dict[str, bool]:
    """What the contract tells apart, present in these inputs (tests/test_input_coverage.py)."""
    alphas, x3 = inp["alphas"], inp["x3"]
    return {
        # poly: the sign of coeff
        "coeff < 0": any(c < -0.1 for c in inp["coeffs"]),
        "coeff > 0": any(c > 0.1 for c in inp["coeffs"]),
        # repeat_scale: no step at all, and several (1.5 ** n is not 1.5 * n)
        "n_steps 0": 0 in inp["n_steps_values"],
        "n_steps 2 or more": any(n >= 2 for n in inp["n_steps_values"]),
        "every axis, a negative one too": set(inp["axes_values"]) >= {0, 1, 2, -1},
        # activate: every mode, on both signs of x; alpha on both sides of 1, where
        # max(alpha * x, x) stops being the leaky ReLU and tanh(alpha * x) differs from alpha * tanh(x)
        "every mode": set(inp["modes"]) == set(MODES),
        "x < 0 and x > 0": x3.min() < 0 < x3.max(),
        "alpha below 1": any(a < 0.95 for a in alphas),
        "alpha above 1": any(a > 1.05 for a in alphas),
        "an unknown mode": inp["unknown_mode"] not in MODES,
        "two modes in the compile window": len(set(inp["modes_compile"])) == 2,
    }


def _compile_calls(inp: Inputs, x, x3) -> dict[str, list[tuple[tuple, dict]]]:
    """The calls of each compile window: ``(args, kwargs)`` in order."""
    return {
        "poly": [((x, c), {}) for c in inp["coeffs"]],
        "repeat_scale": [((x,), {"n_steps": n}) for n in inp["n_steps_compile"]],
        "reduce_along": [((x3, axis), {}) for axis in inp["axes_compile"]],
        "activate": [((x, mode, alpha), {}) for mode in inp["modes_compile"] for alpha in inp["alphas"]],
    }


# =========================================================================== probe (child)
def probe(ctx: ProbeContext[Inputs]) -> None:
    # every call gets its arrays placed anew (a function may donate what it is given); placed
    # before each compile window opens
    inp = ctx.inputs
    for name, calls in _compile_calls(inp, inp["x"], inp["x3"]).items():
        placed = [(put(args), kwargs) for args, kwargs in calls]
        with ctx.compiles(KEYS.window(name=name)):
            for i, (args, kwargs) in enumerate(placed):
                ctx.call(KEYS.window_call(name=name, i=i), name, *args, **kwargs)

    for i, c in enumerate(inp["coeffs"]):
        ctx.call(KEYS.value(name="poly", case=i), "poly", put(inp["x3"]), c)
    for n in inp["n_steps_values"]:
        ctx.call(KEYS.value(name="repeat_scale", case=n), "repeat_scale", put(inp["x3"]), n_steps=n)
    for axis in inp["axes_values"]:
        ctx.call(KEYS.value(name="reduce_along", case=axis), "reduce_along", put(inp["x3"]), axis)
    for mode in inp["modes"]:
        for j, alpha in enumerate(inp["alphas"]):
            ctx.call(KEYS.mode_value(mode=mode, j=j), "activate", put(inp["x3"]), mode, alpha)
    ctx.call(KEYS.value(name="activate", case="unknown_mode"), "activate", put(inp["x"]), inp["unknown_mode"], 0.5)


# =========================================================================== checks (grader)
@check("poly.values")
def poly_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    coeffs = shown(ctx.inputs["coeffs"], (0.0,))  # the digits that matter: the sign always shows
    cases = [(KEYS.value(name="poly", case=i), f"poly(x, coeff={c})") for i, c in enumerate(coeffs)]
    return numeric.compare_calls(s, r, cases, dtype="float32")


@check("repeat_scale.values")
def repeat_scale_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    cases = [(KEYS.value(name="repeat_scale", case=n), f"repeat_scale(x, n_steps={n})")
             for n in ctx.inputs["n_steps_values"]]
    return numeric.compare_calls(s, r, cases, dtype="float32")


@check("reduce_along.values")
def reduce_along_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    cases = [(KEYS.value(name="reduce_along", case=a), f"reduce_along(x, {a})") for a in ctx.inputs["axes_values"]]
    return numeric.compare_calls(s, r, cases, dtype="float32")


@check("activate.values")
def activate_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    alphas = shown(ctx.inputs["alphas"], (1.0,))  # alpha 1.0017 reads 1.002, never 1
    cases = [(KEYS.mode_value(mode=m, j=j), f"activate(x, {m!r}, {a})")
             for m in ctx.inputs["modes"] for j, a in enumerate(alphas)]
    measured = numeric.compare_calls(s, r, cases, dtype="float32", rtol=1e-5, atol=1e-6)
    unknown = s.call(KEYS.value(name="activate", case="unknown_mode"))
    mode = ctx.inputs["unknown_mode"]
    # as Python reads "raises ValueError": isinstance, a subclass of it included
    if unknown["status"] != "raised" or "ValueError" not in unknown.get("is_a", [unknown.get("type")]):
        got = unknown.get("type") if unknown["status"] == "raised" else T("ch4.ex03.returned")
        raise Fail(T("ch4.ex03.unknown_mode", mode=mode, got=got), measured, hint="unknown_mode")
    measured["unknown_mode"] = "ValueError"
    return measured


def _compiles(s: Records, ctx: CheckContext[Inputs], name: str, exactly: int, what: str | Text, *,
              too_few: bool = False) -> dict:
    """A compile count; ``too_few``: fewer compiles than expected has a hint of its own."""
    n_calls = len(_compile_calls(ctx.inputs, None, None)[name])
    returned(s, *(KEYS.window_call(name=name, i=i) for i in range(n_calls)))
    require_jitted(s, name)
    try:
        return compiles.expect(s.value(KEYS.window(name=name)), what=what, exactly=exactly)
    except Fail as failure:
        if too_few and failure.measured.get("compiles", exactly) < exactly:
            failure.hint = "too_few"  # fewer compiles than static values: the argument is not static
        raise


@check("poly.compiles", depends=("poly.values",))
def poly_compiles(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    return _compiles(s, ctx, "poly", 1, T("ch4.ex03.poly", n=len(ctx.inputs["coeffs"])))


@check("repeat_scale.compiles", depends=("repeat_scale.values",))
def repeat_scale_compiles(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    steps = ctx.inputs["n_steps_compile"]
    return _compiles(s, ctx, "repeat_scale", len(set(steps)),
                     T("ch4.ex03.repeat_scale", values=", ".join(map(str, steps))), too_few=True)


@check("reduce_along.compiles", depends=("reduce_along.values",))
def reduce_along_compiles(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    axes = ctx.inputs["axes_compile"]
    return _compiles(s, ctx, "reduce_along", len(set(axes)),
                     T("ch4.ex03.reduce_along", values=", ".join(map(str, axes))))


@check("activate.compiles", depends=("activate.values",))
def activate_compiles(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    modes = ctx.inputs["modes_compile"]
    return _compiles(s, ctx, "activate", len(set(modes)),
                     T("ch4.ex03.activate", modes=", ".join(modes), n=len(ctx.inputs["alphas"])))
