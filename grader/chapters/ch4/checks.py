"""Chapter 4's hidden inputs and checks, run in the grader's own process.

:func:`inputs` draws each exercise's hidden inputs from the run's seed (NumPy only);
the same inputs go to the student's and to the reference's child process. Each check
below judges the probes' records (``probes.py``) with the check primitives; titles,
points and hints are in ``chapter.toml``, feedback sentences in ``messages.toml``.
"""
from __future__ import annotations

import numpy as np

from grader.checks import CheckContext, CheckRegistry, Fail, Observations, Pass
from grader.i18n import T
from grader.primitives import compiles, numeric, purity, structure

checks = CheckRegistry()

EXERCISE_SALT = {
    "ex01_jit_forms": 1, "ex02_where": 2, "ex03_static_args": 3, "ex04_cache_keys": 4,
    "ex05_timing": 5, "ex06_speedup": 6, "ex07_pitfalls": 7, "ex08_aot_debug": 8,
}
F32 = np.float32


def _rng(seed: int, exercise: str) -> np.random.Generator:
    return np.random.default_rng([seed, EXERCISE_SALT[exercise]])


def _shape(rng: np.random.Generator, ndim: int, low: int = 2, high: int = 9) -> tuple[int, ...]:
    return tuple(int(n) for n in rng.integers(low, high, size=ndim))


def label(name: str, x) -> str:
    """``softmax(x: f32[4,9])``: how a case is named in feedback."""
    arr = np.asarray(x)
    dims = ",".join(str(n) for n in arr.shape)
    short = {"float32": "f32", "float64": "f64", "int32": "i32"}.get(arr.dtype.name, arr.dtype.name)
    return f"{name}(x: {short}[{dims}])"


# =========================================================================== inputs
def inputs(exercise: str, seed: int) -> dict:
    """The hidden inputs of one exercise for this run's seed."""
    rng = _rng(seed, exercise)
    return _INPUTS[exercise](rng)


def _inputs_ex01(rng: np.random.Generator) -> dict:
    # few distinct shapes: every new shape costs each eager operation a compile
    one, two, three = _shape(rng, 1, 3, 20), _shape(rng, 2, 3, 12), _shape(rng, 3, 2, 6)
    return {
        "cases": {
            "1d": rng.normal(size=one).astype(F32),
            "2d": rng.normal(scale=3.0, size=two).astype(F32),
            "3d": rng.normal(size=three).astype(F32),
            "large_2d": rng.uniform(-1e4, 1e4, size=two).astype(F32),
            "large_1d": (rng.uniform(5e3, 1e4, size=one) * rng.choice([-1, 1])).astype(F32),
        },
        "same_shape": [rng.normal(size=two).astype(F32) for _ in range(3)],
        "new_shape": rng.normal(size=three).astype(F32),
        "purity_x": rng.normal(size=two).astype(F32),
    }


def _zero_sum(rng: np.random.Generator, n: int) -> np.ndarray:
    """Whole numbers that cancel exactly in any order of summation."""
    half = rng.integers(1, 9, size=n).astype(F32)
    values = np.concatenate([half, -half])
    rng.shuffle(values)
    return values


def _inputs_ex02(rng: np.random.Generator) -> dict:
    n = int(rng.integers(4, 12))
    same = (int(rng.integers(3, 7)), int(rng.integers(3, 7)))
    clip_same = [rng.normal(size=same).astype(F32) * s for s in (0.05, 3.0, 0.5, 8.0, 1.0, 0.0)]
    return {
        "piecewise": {
            "mixed": rng.normal(size=same).astype(F32),
            "positive": rng.uniform(0.1, 4.0, size=_shape(rng, 1, 3, 12)).astype(F32),
            "negative": -rng.uniform(0.1, 4.0, size=_shape(rng, 3, 2, 5)).astype(F32),
            "scalar": np.asarray(rng.normal(), dtype=F32),
        },
        "normalize": {
            "positive_sum": rng.uniform(-1.0, 3.0, size=2 * n).astype(F32) + 1.0,
            "negative_sum": -rng.uniform(0.5, 2.0, size=_shape(rng, 1, 3, 12)).astype(F32),
            "zero_sum": _zero_sum(rng, n),
            "all_zero": np.zeros(_shape(rng, 2), F32),
        },
        "clip": {
            "long": [rng.normal(size=same).astype(F32) * 4.0, float(rng.uniform(0.5, 2.0))],
            "short": [rng.normal(size=_shape(rng, 2)).astype(F32) * 0.05, float(rng.uniform(5.0, 10.0))],
            "long_3d": [rng.normal(size=_shape(rng, 3, 2, 5)).astype(F32) * 3.0, float(rng.uniform(0.5, 2.0))],
            "zero": [np.zeros(_shape(rng, 1, 3, 9), F32), float(rng.uniform(0.5, 2.0))],
        },
        "piecewise_same": [np.abs(rng.normal(size=same)).astype(F32), -np.abs(rng.normal(size=same)).astype(F32),
                           rng.normal(size=same).astype(F32)],
        "normalize_same": [np.abs(rng.normal(size=2 * n)).astype(F32) + 0.1, -np.abs(rng.normal(size=2 * n)).astype(F32),
                           _zero_sum(rng, n)],
        "clip_same": clip_same,
        "clip_norms": [float(v) for v in rng.uniform(0.3, 6.0, size=len(clip_same))],
    }


MODES = ("relu", "leaky_relu", "elu", "tanh")


def _inputs_ex03(rng: np.random.Generator) -> dict:
    modes = [str(m) for m in rng.permutation(MODES)]
    return {
        "x": rng.normal(size=_shape(rng, 1, 4, 16)).astype(F32),
        "x3": rng.normal(size=_shape(rng, 3, 2, 7)).astype(F32),
        "coeffs": [float(c) for c in rng.uniform(-3.0, 3.0, size=5)],
        "n_steps_compile": [3, 5, 5, 3],
        "n_steps_values": [int(n) for n in rng.choice([0, 1, 2, 4, 6, 7], size=3, replace=False)],
        "axes_compile": [0, 1, 2, 0, 1, -1],
        "axes_values": [0, 1, 2, -1],
        "modes": modes,
        "modes_compile": modes[:2],
        "alphas": [float(a) for a in rng.uniform(0.05, 1.5, size=3)],
        "unknown_mode": str(rng.choice(["swish", "gelu", "sigmoid", "softplus"])),
    }


BUCKETS = (8, 16, 32, 64, 128, 256, 512, 1024)
INPUT_KINDS = ("float32", "float64", "int32", "list")


def _inputs_ex04(rng: np.random.Generator) -> dict:
    calls = []
    for kind in INPUT_KINDS:
        low = 1
        lengths = []
        for bucket in BUCKETS:
            lengths.append(int(rng.integers(low, bucket + 1)))
            low = bucket + 1
        lengths += [int(n) for n in rng.integers(1, 1025, size=2)]
        for n in lengths:
            if kind == "int32":
                data = rng.integers(-50, 51, size=n).astype(np.int32)
            else:
                data = rng.normal(scale=2.0, size=n).astype(np.float64 if kind == "float64" else F32)
            calls.append({"kind": kind, "data": data})
    order = rng.permutation(len(calls))
    return {"bucket_max": 5000, "calls": [calls[i] for i in order]}


_INPUTS = {
    "ex01_jit_forms": _inputs_ex01,
    "ex02_where": _inputs_ex02,
    "ex03_static_args": _inputs_ex03,
    "ex04_cache_keys": _inputs_ex04,
}


# =========================================================================== helpers
def _require_jitted(s: Observations, name: str) -> None:
    described = s.value(f"names/{name}")
    if not described.get("jitted"):
        raise Fail(T("structure.not_jitted_compiles", name=name, type=described.get("type", "?")),
                   {"type": described.get("type")})


def _attempted(s: Observations, *keys: str) -> None:
    """Read calls first: a stub raises NotAttempted here, before anything is judged."""
    for key in keys:
        s.call(key)


def _returned(s: Observations, *keys: str) -> None:
    """Like :func:`_attempted`, and every call must have returned (else Fail with its error)."""
    for key in keys:
        s.result(key)


# =========================================================================== ex01
EX01 = "ex01_jit_forms"


@checks(EX01, "softmax.values")
def softmax_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    cases = ctx.inputs["cases"]
    keys = [(f"{name}/values/{k}", label(name, x)) for name in ("softmax_raw", "softmax") for k, x in cases.items()]
    return numeric.compare_calls(s, r, keys, dtype="float32")


@checks(EX01, "log_softmax.values")
def log_softmax_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    cases = ctx.inputs["cases"]
    keys = [(f"log_softmax/values/{k}", label("log_softmax", x)) for k, x in cases.items()]
    return numeric.compare_calls(s, r, keys, dtype="float32", rtol=1e-5, atol=1e-5)


def _structure(s: Observations, name: str, *, jitted: bool) -> dict:
    _attempted(s, f"{name}/values/1d")
    described = s.value(f"names/{name}")
    return structure.expect_jitted(described, name=name, jitted=jitted)


@checks(EX01, "softmax_raw.plain")
def softmax_raw_plain(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    return _structure(s, "softmax_raw", jitted=False)


@checks(EX01, "softmax.jitted")
def softmax_jitted(s: Observations, r: Observations, ctx: CheckContext) -> Pass:
    measured = _structure(s, "softmax", jitted=True)
    wrapped = s.value("names/softmax").get("wrapped")
    measured["wraps"] = wrapped
    if wrapped != "softmax_raw":
        return Pass(T("ch4.ex01.wraps_other", wrapped=wrapped or "?"), measured)
    return Pass(T("check.passed"), measured)


@checks(EX01, "log_softmax.jitted")
def log_softmax_jitted(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    return _structure(s, "log_softmax", jitted=True)


@checks(EX01, "compiles")
def ex01_compiles(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    measured = {}
    for name in ("softmax", "log_softmax"):
        _returned(s, *(f"{name}/compiles/call{i}" for i in range(3)), f"{name}/compiles/call_new")
        measured[f"{name}/same_shape"] = compiles.expect(
            s.value(f"{name}/compiles/same_shape"), what=T("ch4.ex01.three_calls", name=name), exactly=1)
        measured[f"{name}/new_shape"] = compiles.expect(
            s.value(f"{name}/compiles/new_shape"), what=T("ch4.ex01.new_shape", name=name), exactly=1)
    return measured


@checks(EX01, "softmax_raw.pure")
def softmax_raw_pure(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    what = "softmax_raw"
    first = s.result("softmax_raw/purity/first")
    second = s.result("softmax_raw/purity/second")
    measured = {}
    problems = []
    for judge in (
        lambda: purity.expect_silent(s.value("softmax_raw/purity/printed"), what=what),
        lambda: purity.expect_globals_unchanged(s.value("softmax_raw/purity/globals"), what=what),
        lambda: purity.expect_no_tracers(s.value("softmax_raw/purity/tracers"), what=what),
        lambda: purity.expect_same(first, second, what=what),
    ):
        try:
            measured.update(judge())
        except Fail as failure:
            problems.append(failure.message)
            measured.update(failure.measured)
    unchanged = s.value("softmax_raw/purity/input_unchanged")
    measured["input_unchanged"] = unchanged
    if not unchanged:
        problems.append(T("purity.input_mutated", what=what))
    if problems:
        raise Fail(problems, measured)
    return measured


# =========================================================================== ex02
EX02 = "ex02_where"


def _traceable(name: str):
    def check(s: Observations, r: Observations, ctx: CheckContext) -> dict:
        record = s.value(f"{name}/trace")
        if record.get("status") == "missing":
            raise Fail(T("call.missing", name=name, file=s.module_file))
        if record.get("status") == "not_attempted":
            from grader.checks import NotAttempted

            raise NotAttempted(name)
        return structure.expect_traceable(record, name=name)

    return check


def _values(name: str, group: str, *, arity: int = 1):
    def check(s: Observations, r: Observations, ctx: CheckContext) -> dict:
        cases = []
        for key, item in ctx.inputs[group].items():
            x = item[0] if arity == 2 else item
            cases.append((f"{name}/values/{key}", f"{label(name, x)[:-1]}) [{key}]"))
        return numeric.compare_calls(s, r, cases, dtype="float32")

    return check


for _name, _group, _arity in (("piecewise", "piecewise", 1), ("normalize_if_positive", "normalize", 1),
                              ("clip_by_norm", "clip", 2)):
    checks(EX02, f"{_name}.traceable")(_traceable(_name))
    checks(EX02, f"{_name}.values")(_values(_name, _group, arity=_arity))


@checks(EX02, "jitted")
def ex02_jitted(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    _gate_any_attempted(s, ("piecewise", "normalize_if_positive", "clip_by_norm"), "compiles/call0")
    not_jitted = [n for n in ("piecewise", "normalize_if_positive", "clip_by_norm")
                  if not s.value(f"names/{n}").get("jitted")]
    if not_jitted:
        raise Fail(T("structure.not_jitted_many", names=", ".join(not_jitted)), {"not_jitted": not_jitted})
    return {"jitted": ["piecewise", "normalize_if_positive", "clip_by_norm"]}


def _gate_any_attempted(s: Observations, names: tuple[str, ...], suffix: str) -> None:
    """NotAttempted only when none of ``names`` was attempted."""
    from grader.checks import NotAttempted

    attempted = False
    for name in names:
        try:
            s.call(f"{name}/{suffix}")
            attempted = True
        except NotAttempted:
            continue
        except Fail:
            attempted = True
    if not attempted:
        raise NotAttempted(", ".join(names))


@checks(EX02, "compiles")
def ex02_compiles(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    groups = (("piecewise", "piecewise_same", "ch4.ex02.branches"),
              ("normalize_if_positive", "normalize_same", "ch4.ex02.branches"),
              ("clip_by_norm", "clip_same", "ch4.ex02.norms"))
    measured, problems = {}, []
    for name, group, what in groups:
        n = len(ctx.inputs[group])
        _returned(s, *(f"{name}/compiles/call{i}" for i in range(n)))
        try:
            measured[name] = compiles.expect(s.value(f"{name}/compiles"), what=T(what, name=name, n=n), exactly=1)
        except Fail as failure:
            problems.append(failure.message)
            measured[name] = failure.measured
    if problems:
        raise Fail(problems, measured)
    return measured


# =========================================================================== ex03
EX03 = "ex03_static_args"


@checks(EX03, "poly.values")
def poly_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    cases = [(f"poly/values/{i}", f"poly(x, coeff={c:.3g})") for i, c in enumerate(ctx.inputs["coeffs"])]
    return numeric.compare_calls(s, r, cases, dtype="float32")


@checks(EX03, "repeat_scale.values")
def repeat_scale_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    cases = [(f"repeat_scale/values/{n}", f"repeat_scale(x, n_steps={n})") for n in ctx.inputs["n_steps_values"]]
    return numeric.compare_calls(s, r, cases, dtype="float32")


@checks(EX03, "reduce_along.values")
def reduce_along_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    cases = [(f"reduce_along/values/{a}", f"reduce_along(x, {a})") for a in ctx.inputs["axes_values"]]
    return numeric.compare_calls(s, r, cases, dtype="float32")


@checks(EX03, "activate.values")
def activate_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    cases = [(f"activate/values/{m}/{j}", f"activate(x, {m!r}, {a:.3g})")
             for m in ctx.inputs["modes"] for j, a in enumerate(ctx.inputs["alphas"])]
    measured = numeric.compare_calls(s, r, cases, dtype="float32", rtol=1e-5, atol=1e-6)
    unknown = s.call("activate/values/unknown_mode")
    mode = ctx.inputs["unknown_mode"]
    if unknown["status"] != "raised" or unknown.get("type") != "ValueError":
        got = unknown.get("type") if unknown["status"] == "raised" else T("ch4.ex03.returned")
        raise Fail(T("ch4.ex03.unknown_mode", mode=mode, got=got), measured)
    measured["unknown_mode"] = "ValueError"
    return measured


def _compile_check(name: str, expected, what_key: str):
    def check(s: Observations, r: Observations, ctx: CheckContext) -> dict:
        inp = ctx.inputs
        n_calls = {"poly": len(inp["coeffs"]), "repeat_scale": len(inp["n_steps_compile"]),
                   "reduce_along": len(inp["axes_compile"]),
                   "activate": len(inp["modes_compile"]) * len(inp["alphas"])}[name]
        _returned(s, *(f"{name}/compiles/call{i}" for i in range(n_calls)))
        _require_jitted(s, name)
        exactly = expected(inp)
        return compiles.expect(s.value(f"{name}/compiles"), what=T(what_key, **_what_args(name, inp)),
                               exactly=exactly)

    return check


def _what_args(name: str, inp: dict) -> dict:
    return {
        "poly": {"n": len(inp["coeffs"])},
        "repeat_scale": {"values": ", ".join(map(str, inp["n_steps_compile"]))},
        "reduce_along": {"values": ", ".join(map(str, inp["axes_compile"]))},
        "activate": {"modes": ", ".join(inp["modes_compile"]), "n": len(inp["alphas"])},
    }[name]


checks(EX03, "poly.compiles")(_compile_check("poly", lambda inp: 1, "ch4.ex03.poly"))
checks(EX03, "repeat_scale.compiles")(_compile_check(
    "repeat_scale", lambda inp: len(set(inp["n_steps_compile"])), "ch4.ex03.repeat_scale"))
checks(EX03, "reduce_along.compiles")(_compile_check(
    "reduce_along", lambda inp: len(set(inp["axes_compile"])), "ch4.ex03.reduce_along"))
checks(EX03, "activate.compiles")(_compile_check(
    "activate", lambda inp: len(set(inp["modes_compile"])), "ch4.ex03.activate"))


# =========================================================================== ex04
EX04 = "ex04_cache_keys"


def _expected_bucket(n: int) -> int:
    length = 8
    while length < n:
        length *= 2
    return length


@checks(EX04, "bucket_length.values")
def bucket_length_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    record = s.result("bucket_length/values")
    failed_at = s.call("bucket_length/values").get("failed_at")
    if failed_at:
        from grader.checks import raised_text

        raise Fail(T("ch4.ex04.bucket_raised", n=failed_at["n"], error=raised_text(failed_at))
                   if failed_at.get("status") == "raised" else T("check.not_attempted", function="bucket_length"))
    values = record.get("values", [])
    n_max = int(ctx.inputs["bucket_max"])
    wrong = [(n, got) for n, got in zip(range(1, n_max + 1), values) if got != _expected_bucket(n)]
    if wrong or len(values) != n_max:
        n, got = wrong[0] if wrong else (len(values) + 1, None)
        raise Fail(T("ch4.ex04.bucket_wrong", n=n, got=got, expected=_expected_bucket(n), bad=len(wrong),
                     total=n_max), {"wrong": len(wrong), "first_wrong": n})
    return {"checked": n_max}


@checks(EX04, "masked_mean_sq.values")
def masked_mean_sq_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    cases = [(f"masked_mean_sq/values/{i}", f"masked_mean_sq({c['kind']}[{len(c['data'])}])")
             for i, c in enumerate(ctx.inputs["calls"])]
    return numeric.compare_calls(s, r, cases, dtype="float32", array_type="jax.Array", rtol=1e-5, atol=1e-6)


@checks(EX04, "masked_mean_sq.compiles")
def masked_mean_sq_compiles(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    calls = ctx.inputs["calls"]
    _gate_any_attempted(s, ("masked_mean_sq",), "values/0")
    raised = [i for i in range(len(calls)) if s.call(f"masked_mean_sq/values/{i}")["status"] == "raised"]
    if raised:
        raise Fail(T("ch4.ex04.calls_raised", n=len(raised), total=len(calls)), {"raised": len(raised)})
    kinds = sorted({c["kind"] for c in calls})
    measured = compiles.expect(
        s.value("masked_mean_sq/compiles"),
        what=T("ch4.ex04.calls", n=len(calls), kinds=", ".join(kinds)), at_most=len(BUCKETS))
    measured["calls"] = len(calls)
    return measured
