"""Exercise 8, ahead-of-time compilation and inspection: hidden inputs, probe and checks.

``precompile`` must return an executable compiled now, which later runs new values of
the same shapes without compiling; ``count_primitives`` counts every equation at every
nesting level of hidden functions (nested jit, loops, conditionals); ``flops_of`` reads
the compiler's estimate.
"""
from __future__ import annotations

from typing import TypedDict

import numpy as np

from grader.chapters.ch4.common import F32
from grader.checks import CheckContext, Fail, Keys, Records, check, raised_text
from grader.child.probe import ProbeContext
from grader.i18n import T
from grader.primitives import compiles, numeric
from grader.primitives.placing import put

KEYS = Keys(
    compiled="precompile/{label}", window="precompile/{label}/compiles", call="precompile/{label}/calls/{i}",
    counts="count_primitives/{i}", flops="flops_of/{i}"
)


# =========================================================================== hidden inputs
HIDDEN_KINDS = ("nested_jit", "fori_cond", "scan_jit", "while", "dynamic_fori_cond_jit")
HIDDEN_OPS = ("sin", "cos", "tanh", "exp", "abs", "relu", "square", "log1p")


class HiddenSpec(TypedDict):
    """A hidden function of count_primitives (:func:`hidden_functions` builds it)."""

    kind: str
    ops: list[str]
    scale: float
    n: int


class FlopsSpec(TypedDict):
    """A function of flops_of (:func:`flop_functions` builds it)."""

    kind: str


class AotCase(TypedDict):
    """precompile's example arguments, and the new arguments its compiled program is called on."""

    example: list[np.ndarray]
    new: list[list[np.ndarray]]


class Inputs(TypedDict):
    """The hidden inputs, as ``inputs(rng)`` draws them and the probe and the checks read them."""

    #: precompile's cases: ``plain`` and ``jitted``
    aot: dict[str, AotCase]
    hidden: list[HiddenSpec]
    hidden_args: list[list[np.ndarray]]
    flops: list[FlopsSpec]
    flops_args: list[list[np.ndarray]]


def inputs(rng: np.random.Generator) -> Inputs:
    def pair(m: int, k: int, n: int) -> list[np.ndarray]:
        return [rng.normal(size=(m, k)).astype(F32), rng.normal(size=(k, n)).astype(F32)]

    m, k, n = 5, 7, 6  # fixed shapes, fresh values (see ex01)
    kinds = list(HIDDEN_KINDS)
    specs: list[HiddenSpec] = []
    args: list[list[np.ndarray]] = []
    with_relu = int(rng.integers(len(kinds)))  # one function's first op is relu: a custom_jvp_call, itself a container
    for i, kind in enumerate(kinds):
        ops = [str(o) for o in rng.choice(HIDDEN_OPS, size=2, replace=False)]
        if i == with_relu and "relu" not in ops[:1]:
            ops = ["relu", ops[0] if ops[0] != "relu" else ops[1]]
        spec: HiddenSpec = {"kind": kind, "ops": ops, "scale": float(rng.uniform(0.1, 0.9)),
                            "n": int(rng.integers(2, 6))}
        specs.append(spec)
        if kind == "scan_jit":
            args.append([rng.normal(size=(5, 4)).astype(F32)])
        elif kind == "dynamic_fori_cond_jit":
            args.append([rng.normal(size=5).astype(F32), np.asarray(int(rng.integers(2, 6)), np.int32)])
        else:
            args.append([rng.normal(size=6).astype(F32)])
    def mlp() -> list[np.ndarray]:
        a, b, c = int(rng.integers(24, 65)), int(rng.integers(32, 81)), int(rng.integers(16, 49))
        return [rng.normal(size=(a, b)).astype(F32), rng.normal(size=(b, c)).astype(F32),
                rng.normal(size=(c, a)).astype(F32)]

    # the flops functions' shapes are drawn, so their estimates differ from seed to seed: answers
    # looked up in the records a release ships (one public seed's) are wrong on any other
    b, c = int(rng.integers(32, 81)), int(rng.integers(16, 49))
    return {
        "aot": {
            "plain": {"example": pair(m, k, n), "new": [pair(m, k, n), pair(m, k, n)]},
            "jitted": {"example": [rng.normal(size=k).astype(F32), rng.normal(size=k).astype(F32)],
                       "new": [[rng.normal(size=k).astype(F32), rng.normal(size=k).astype(F32)]]},
        },
        "hidden": specs,
        "hidden_args": args,
        "flops": [{"kind": "mlp"}, {"kind": "elementwise"}, {"kind": "mlp"}],
        "flops_args": [mlp(), [rng.normal(size=(b, c)).astype(F32), rng.normal(size=(b, c)).astype(F32)], mlp()],
    }


def regimes(inp: Inputs) -> dict[str, bool]:
    """What the contract tells apart, present in these inputs (tests/test_input_coverage.py)."""
    kinds = {spec["kind"] for spec in inp["hidden"]}
    used = [spec["ops"][:2] if spec["kind"] in ("nested_jit", "dynamic_fori_cond_jit") else spec["ops"][:1]
            for spec in inp["hidden"]]
    return {
        "precompile of a plain and of a jitted function": set(inp["aot"]) == {"plain", "jitted"},
        # every kind of container: a nested jit, fori/cond, scan, while
        "every container kind": kinds == set(HIDDEN_KINDS),
        # an op that is itself a container (jax.nn.relu is a custom_jvp_call holding a sub-program)
        "a custom_jvp_call (relu) in a hidden function": any("relu" in ops for ops in used),
        # flops, not flops + transcendentals: both functions have transcendentals
        "transcendentals in every flops function": all(spec["kind"] in ("mlp", "elementwise")
                                                       for spec in inp["flops"]),
    }


# =========================================================================== probe (child)
def hidden_functions(specs: list[HiddenSpec]) -> list:
    """Functions built from the hidden specs: nested jit, loops and conditionals."""
    import jax
    import jax.numpy as jnp

    ops = {"sin": jnp.sin, "cos": jnp.cos, "tanh": jnp.tanh, "exp": jnp.exp, "abs": jnp.abs,
           "relu": jax.nn.relu, "square": jnp.square, "log1p": lambda v: jnp.log1p(jnp.abs(v))}
    built = []
    for spec in specs:
        op1, op2 = ops[spec["ops"][0]], ops[spec["ops"][1]]
        scale, n = spec["scale"], spec["n"]
        kind = spec["kind"]
        if kind == "nested_jit":
            inner = jax.jit(lambda v, op1=op1, op2=op2, scale=scale: op1(v) * scale + op2(v))
            middle = jax.jit(lambda v, inner=inner: inner(v) + inner(v * 2.0))

            def fn(v, middle=middle):
                return jnp.sum(middle(v) ** 2)
        elif kind == "fori_cond":
            def fn(v, op1=op1, n=n, scale=scale):  # type: ignore[misc]  # each kind its own fn
                def body(i, u):
                    return jax.lax.cond(jnp.sum(u) > 0, lambda w: op1(w) * scale, lambda w: w * 0.5, u)

                return jax.lax.fori_loop(0, n, body, v)
        elif kind == "scan_jit":
            step = jax.jit(lambda c, row, op1=op1, scale=scale: (c + op1(row) * scale, c * row))

            def fn(v, step=step):  # type: ignore[misc]
                return jax.lax.scan(step, jnp.zeros(v.shape[1:], v.dtype), v)
        elif kind == "while":
            def fn(v, op1=op1, scale=scale):  # type: ignore[misc]
                return jax.lax.while_loop(lambda u: jnp.max(jnp.abs(u)) < 100.0,
                                          lambda u: u * (1.5 + scale) + op1(u) * 0.1 + 0.1, v)
        else:  # "dynamic_fori_cond_jit"
            h = jax.jit(op1)

            def fn(v, steps, h=h, op2=op2):  # type: ignore[misc]
                return jax.lax.fori_loop(0, steps, lambda i, u: jax.lax.cond(i % 2 == 0, h, op2, u), v)
        built.append(fn)
    return built


def flop_functions(specs: list[FlopsSpec]) -> list:
    import jax.numpy as jnp

    out = []
    for spec in specs:
        if spec["kind"] == "mlp":
            def fn(x, w1, w2):
                return jnp.tanh(x @ w1) @ w2
        else:
            def fn(x, y):  # type: ignore[misc]  # each kind its own fn
                return jnp.sum(jnp.exp(x) * y + x * x)
        out.append(fn)
    return out


def probe(ctx: ProbeContext[Inputs]) -> None:
    import jax
    import jax.numpy as jnp

    from grader.child.probe import FAILED

    inp = ctx.inputs

    def flops_of() -> None:
        for i, (fn, args) in enumerate(zip(flop_functions(inp["flops"]), inp["flops_args"])):
            ctx.call(KEYS.flops(i=i), "flops_of", fn, *put(args))

    if ctx.side == "reference":  # their shapes are drawn per seed: first, so that the student's job, which calls
        flops_of()  # flops_of last, finds each program compiled or being compiled (grader.child.jax_setup.TieredCache)
    plain = lambda x, y: jnp.tanh(x) @ y + 1.0  # noqa: E731
    jitted = jax.jit(lambda x, y: jnp.sin(x) * y.sum())
    for label, fn in (("plain", plain), ("jitted", jitted)):
        example = put(inp["aot"][label]["example"])
        compiled = ctx.call(KEYS.compiled(label=label), "precompile", fn, *example)
        if compiled is FAILED or not callable(compiled):
            continue
        fresh = [put(args) for args in inp["aot"][label]["new"]]
        with ctx.compiles(KEYS.window(label=label), fresh=False):
            for i, args in enumerate(fresh):
                ctx.call_object(KEYS.call(label=label, i=i), compiled, "precompile(...)", *args)

    hidden = hidden_functions(inp["hidden"])
    for i, (fn, args) in enumerate(zip(hidden, inp["hidden_args"])):
        ctx.call(KEYS.counts(i=i), "count_primitives", fn, *put(args))
    if ctx.side != "reference":
        flops_of()


# =========================================================================== checks (grader)
COMPILED_TYPES = ("jax._src.stages.Compiled", "jax.stages.Compiled")


@check("precompile.compiled")
def precompile_compiled(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    measured = {}
    for label in ("plain", "jitted"):
        got = s.result(KEYS.compiled(label=label))
        kind = got.get("type") or got.get("t")
        measured[label] = kind
        if kind not in COMPILED_TYPES:
            lazy = "Pjit" in str(kind) or "jit" in str(kind).rsplit(".", 1)[-1].lower()
            raise Fail(T("ch4.ex08.not_compiled", label=label, type=kind), measured,
                       hint="compiles_lazily" if lazy else None)
    return measured


@check("precompile.calls", depends=("precompile.compiled",))
def precompile_calls(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    measured, failures, hints = {}, [], []
    for label in ("plain", "jitted"):
        n = len(ctx.inputs["aot"][label]["new"])
        for i in range(n):
            key = KEYS.call(label=label, i=i)
            try:
                call = s.call(key)
                if call["status"] == "raised" and "compiled with" in str(call.get("message", "")):
                    raise Fail(raised_text(call))  # compiled for other shapes: the mistake itself
                got = s.result(key)
                numeric.compare(got, numeric.as_array(r.result(key), what="ref"),
                                what=f"precompile({label} fn)(new values #{i + 1})", dtype="float32")
            except Fail as failure:
                failures.append(failure.message)
                hints.append(failure.hint)
        try:
            measured[label] = compiles.expect(s.value(KEYS.window(label=label)),
                                              what=T("ch4.ex08.calls", label=label, n=n), exactly=0)
        except Fail as failure:
            failures.append(failure.message)
            hints.append(None)
            measured[label] = failure.measured
    if failures:
        raise Fail(failures, measured, hint=hints[0])
    return measured


def _as_counts(described: dict, what: str) -> dict[str, int]:
    if described.get("t") != "dict":
        raise Fail(T("ch4.ex08.not_dict", what=what, type=described.get("type") or described.get("t")))
    counts = {}
    for key, value in described["items"].items():
        number = numeric.as_array(value, what=f"{what}[{key!r}]", accept_scalars=True)
        if number.shape != () or number.dtype.kind not in "iu" and not float(number).is_integer():
            raise Fail(T("ch4.ex08.not_int", what=what, key=key))
        counts[key] = int(number)
    return counts


@check("count_primitives.values")
def count_primitives_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    failures, measured = [], {}
    for i, spec in enumerate(ctx.inputs["hidden"]):
        what = f"count_primitives(hidden #{i + 1}: {spec['kind']})"
        try:
            got = _as_counts(s.result(KEYS.counts(i=i)), what)
        except Fail as failure:
            failures.append(failure.message)
            continue
        want = _as_counts(r.result(KEYS.counts(i=i)), "reference")
        diff = {k: (got.get(k, 0), want.get(k, 0)) for k in set(got) | set(want) if got.get(k, 0) != want.get(k, 0)}
        measured[spec["kind"]] = {"total": sum(got.values()), "expected_total": sum(want.values())}
        if diff:
            shown = ", ".join(f"{k}: {g} (expected {w})" for k, (g, w) in sorted(diff.items())[:6])
            failures.append(T("ch4.ex08.counts", what=what, diff=shown, total=sum(got.values()),
                              expected=sum(want.values())))
    if failures:
        raise Fail(failures, measured)
    return measured


@check("flops_of.values")
def flops_of_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    measured = {}
    for i, (spec, args) in enumerate(zip(ctx.inputs["flops"], ctx.inputs["flops_args"])):
        what = f"flops_of({spec['kind']}, " + ", ".join("f32[" + ",".join(map(str, a.shape)) + "]" for a in args) + ")"
        got = numeric.as_array(s.result(KEYS.flops(i=i)), what=what, accept_scalars=True)
        want = float(numeric.as_array(r.result(KEYS.flops(i=i)), what="ref", accept_scalars=True))
        if got.shape != ():
            raise Fail(T("numeric.shape", what=what, expected="()", got=str(got.shape)))
        value = float(got)
        measured[f"{spec['kind']}/{i}"] = {"flops": value, "reference": want}
        if not np.isfinite(value) or abs(value - want) > 0.01 * abs(want):
            raise Fail(T("ch4.ex08.flops", what=what, got=value, expected=want), measured)
    return measured
