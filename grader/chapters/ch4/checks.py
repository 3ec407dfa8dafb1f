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
from grader.primitives import compiles, numeric, purity, structure, timing

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


def label(name: str, x, case: str | None = None) -> str:
    """``softmax(x: f32[4,9]) [large_2d]``: how a case is named in feedback."""
    arr = np.asarray(x)
    dims = ",".join(str(n) for n in arr.shape)
    short = {"float32": "f32", "float64": "f64", "int32": "i32"}.get(arr.dtype.name, arr.dtype.name)
    return f"{name}(x: {short}[{dims}])" + (f" [{case}]" if case else "")


def failed_kinds(failures: list[numeric.CaseFailure], *, cases: tuple[str, ...] | None = None) -> set[str]:
    """The kinds of mistake among ``failures`` (only those of keys ending in one of ``cases``)."""
    return {f.kind for f in failures if cases is None or f.key.rsplit("/", 1)[1] in cases}


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


def _inputs_ex05(rng: np.random.Generator) -> dict:
    return {
        "duration": float(rng.uniform(0.008, 0.012)),
        "iters": int(rng.integers(5, 8)),
        "warmup_n": 4,
        "warmup_iters": 3,
        "warmup_slow": float(rng.uniform(0.12, 0.16)),
        "outlier_iters": 5,
        "outlier_pos": int(rng.integers(0, 4)),
        "outlier_factor": 25.0,
        "counts": [[0, 3], [int(rng.integers(2, 4)), int(rng.integers(2, 5))]],
        "eager_factor": float(rng.uniform(2.5, 4.0)),
        "matrix_seed": int(rng.integers(0, 2**31 - 1)),
        "jax_min_s": 0.004,
    }


def _heavy_args(rng: np.random.Generator, n: int, d: int, h: int) -> list[np.ndarray]:
    return [rng.normal(size=(n, d)).astype(F32), (rng.normal(size=(d, h)) * 0.05).astype(F32),
            rng.normal(scale=0.1, size=(h,)).astype(F32)]


def _ln_args(rng: np.random.Generator, n: int, d: int) -> list[np.ndarray]:
    return [rng.normal(loc=0.5, scale=2.0, size=(n, d)).astype(F32), rng.uniform(0.5, 1.5, size=d).astype(F32),
            rng.normal(scale=0.1, size=d).astype(F32)]


#: candidate sizes for the speed-up checks; the grader times the one where the
#: reference's gain is clearest on the grading device (small, dispatch-bound ones on a CPU)
HEAVY_SIZES = {"8x32x64": (8, 32, 64), "32x64x128": (32, 64, 128), "128x256x256": (128, 256, 256)}
LN_SIZES = {"16x64": (16, 64)}  # the row loop's cost makes the gain clear at any size


def _inputs_ex06(rng: np.random.Generator) -> dict:
    return {
        "heavy_values": [_heavy_args(rng, *shape) for shape in ((4, 16, 32), (33, 64, 17))],
        "ln_values": [{"args": _ln_args(rng, 5, 48), "eps": 1e-5}, {"args": _ln_args(rng, 12, 7), "eps": 1e-3}],
        "ln_compile": _ln_args(rng, 6, 24),
        "ln_eps": [1e-5, float(rng.uniform(1e-4, 1e-2))],
        "heavy_sizes": {k: _heavy_args(rng, *v) for k, v in HEAVY_SIZES.items()},
        "ln_sizes": {k: _ln_args(rng, *v) for k, v in LN_SIZES.items()},
    }


def _inputs_ex07(rng: np.random.Generator) -> dict:
    d = int(rng.integers(4, 9))
    a = rng.normal(size=(d, d)).astype(F32)
    a = (a @ a.T / d + np.eye(d, dtype=F32)).astype(F32)  # symmetric positive definite: a clear top eigenvector
    return {
        "count_xs": [rng.normal(size=int(rng.integers(3, 9))).astype(F32) for _ in range(3)],
        "norm_xs": [rng.normal(size=(3, 5)).astype(F32) * s for s in (1.0, 2.5, 0.4)],
        "abs_xs": {"1d": rng.normal(size=11).astype(F32), "2d": rng.normal(size=(4, 6)).astype(F32) * 3},
        "power": [a, rng.normal(size=d).astype(F32)],
        "n_steps": [10, 100, 1000],
        "ema": [[rng.normal(size=(int(rng.integers(5, 12)), 3)).astype(F32), float(rng.uniform(0.1, 0.9))],
                [rng.normal(size=(7,)).astype(F32), float(rng.uniform(0.1, 0.9))]],
        "ema_sizes": {"8": rng.normal(size=(8, 3)).astype(F32), "64": rng.normal(size=(64, 3)).astype(F32)},
    }


HIDDEN_KINDS = ("nested_jit", "fori_cond", "scan_jit", "while", "dynamic_fori_cond_jit")
HIDDEN_OPS = ("sin", "cos", "tanh", "exp", "abs", "relu", "square", "log1p")


def _inputs_ex08(rng: np.random.Generator) -> dict:
    def pair(m: int, k: int, n: int) -> list[np.ndarray]:
        return [rng.normal(size=(m, k)).astype(F32), rng.normal(size=(k, n)).astype(F32)]

    m, k, n = (int(v) for v in rng.integers(3, 9, size=3))
    kinds = list(HIDDEN_KINDS)
    specs, args = [], []
    for kind in kinds:
        spec = {"kind": kind, "ops": [str(o) for o in rng.choice(HIDDEN_OPS, size=2, replace=False)],
                "scale": float(rng.uniform(0.1, 0.9)), "n": int(rng.integers(2, 6))}
        specs.append(spec)
        if kind == "scan_jit":
            args.append([rng.normal(size=(int(rng.integers(3, 7)), 4)).astype(F32)])
        elif kind == "dynamic_fori_cond_jit":
            args.append([rng.normal(size=5).astype(F32), np.asarray(int(rng.integers(2, 6)), np.int32)])
        else:
            args.append([rng.normal(size=int(rng.integers(3, 8))).astype(F32)])
    a, b, c = (int(v) for v in rng.integers(16, 96, size=3))
    return {
        "aot": {
            "plain": {"example": pair(m, k, n), "new": [pair(m, k, n), pair(m, k, n)]},
            "jitted": {"example": [rng.normal(size=k).astype(F32), rng.normal(size=k).astype(F32)],
                       "new": [[rng.normal(size=k).astype(F32), rng.normal(size=k).astype(F32)]]},
        },
        "hidden": specs,
        "hidden_args": args,
        "flops": [{"kind": "mlp"}, {"kind": "elementwise"}],
        "flops_args": [[rng.normal(size=(a, b)).astype(F32), rng.normal(size=(b, c)).astype(F32),
                        rng.normal(size=(c, a)).astype(F32)],
                       [rng.normal(size=(b, c)).astype(F32), rng.normal(size=(b, c)).astype(F32)]],
    }


_INPUTS = {
    "ex01_jit_forms": _inputs_ex01,
    "ex02_where": _inputs_ex02,
    "ex03_static_args": _inputs_ex03,
    "ex04_cache_keys": _inputs_ex04,
    "ex05_timing": _inputs_ex05,
    "ex06_speedup": _inputs_ex06,
    "ex07_pitfalls": _inputs_ex07,
    "ex08_aot_debug": _inputs_ex08,
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
    keys = [(f"{name}/values/{k}", label(name, x, k)) for name in ("softmax_raw", "softmax")
            for k, x in cases.items()]
    return numeric.compare_calls(s, r, keys, dtype="float32", diagnose=_softmax_mistake)


def _softmax_mistake(failures: list[numeric.CaseFailure]) -> str | None:
    """Overflow on large inputs (the check's own hint), or a wrong formula."""
    return None if "non_finite" in failed_kinds(failures) else "formula"


@checks(EX01, "log_softmax.values")
def log_softmax_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    cases = ctx.inputs["cases"]
    keys = [(f"log_softmax/values/{k}", label("log_softmax", x, k)) for k, x in cases.items()]
    return numeric.compare_calls(s, r, keys, dtype="float32", rtol=1e-5, atol=1e-5, diagnose=_softmax_mistake)


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
    problems, mistakes = [], []
    for mistake, judge in (
        ("printed", lambda: purity.expect_silent(s.value("softmax_raw/purity/printed"), what=what)),
        ("globals", lambda: purity.expect_globals_unchanged(s.value("softmax_raw/purity/globals"), what=what)),
        ("tracers", lambda: purity.expect_no_tracers(s.value("softmax_raw/purity/tracers"), what=what)),
        ("not_same", lambda: purity.expect_same(first, second, what=what)),
    ):
        try:
            measured.update(judge())
        except Fail as failure:
            problems.append(failure.message)
            mistakes.append(mistake)
            measured.update(failure.measured)
    unchanged = s.value("softmax_raw/purity/input_unchanged")
    measured["input_unchanged"] = unchanged
    if not unchanged:
        problems.append(T("purity.input_mutated", what=what))
        mistakes.append("mutated")
    if problems:
        raise Fail(problems, measured, hint=mistakes[0])
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


def _values(name: str, group: str, *, arity: int = 1, diagnose=None):
    def check(s: Observations, r: Observations, ctx: CheckContext) -> dict:
        cases = []
        for key, item in ctx.inputs[group].items():
            x = item[0] if arity == 2 else item
            cases.append((f"{name}/values/{key}", label(name, x, key)))
        return numeric.compare_calls(s, r, cases, dtype="float32", diagnose=diagnose)

    return check


def _divides_by_zero(*zero_cases: str):
    """NaN or inf exactly on the inputs whose sum or norm is 0: the division was chosen there."""
    def diagnose(failures: list[numeric.CaseFailure]) -> str | None:
        return "divides_by_zero" if "non_finite" in failed_kinds(failures, cases=zero_cases) else None

    return diagnose


for _name, _group, _arity, _diagnose in (
        ("piecewise", "piecewise", 1, None),
        ("normalize_if_positive", "normalize", 1, _divides_by_zero("zero_sum", "all_zero")),
        ("clip_by_norm", "clip", 2, _divides_by_zero("zero"))):
    checks(EX02, f"{_name}.traceable")(_traceable(_name))
    checks(EX02, f"{_name}.values")(_values(_name, _group, arity=_arity, diagnose=_diagnose))


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
    measured, problems, mistakes = {}, [], []
    for name, group, what in groups:
        n = len(ctx.inputs[group])
        _returned(s, *(f"{name}/compiles/call{i}" for i in range(n)))
        try:
            measured[name] = compiles.expect(s.value(f"{name}/compiles"), what=T(what, name=name, n=n), exactly=1)
        except Fail as failure:
            problems.append(failure.message)
            mistakes.append("static_max_norm" if name == "clip_by_norm" else None)
            measured[name] = failure.measured
    if problems:
        raise Fail(problems, measured, hint=mistakes[0])
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
        raise Fail(T("ch4.ex03.unknown_mode", mode=mode, got=got), measured, hint="unknown_mode")
    measured["unknown_mode"] = "ValueError"
    return measured


def _compile_check(name: str, expected, what_key: str, *, too_few: bool = False):
    """A compile-count check; ``too_few``: fewer compiles than expected has a hint of its own."""
    def check(s: Observations, r: Observations, ctx: CheckContext) -> dict:
        inp = ctx.inputs
        n_calls = {"poly": len(inp["coeffs"]), "repeat_scale": len(inp["n_steps_compile"]),
                   "reduce_along": len(inp["axes_compile"]),
                   "activate": len(inp["modes_compile"]) * len(inp["alphas"])}[name]
        _returned(s, *(f"{name}/compiles/call{i}" for i in range(n_calls)))
        _require_jitted(s, name)
        exactly = expected(inp)
        try:
            return compiles.expect(s.value(f"{name}/compiles"), what=T(what_key, **_what_args(name, inp)),
                                   exactly=exactly)
        except Fail as failure:
            if too_few and failure.measured.get("compiles", exactly) < exactly:
                failure.hint = "too_few"  # fewer compiles than static values: the argument is not static
            raise

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
    "repeat_scale", lambda inp: len(set(inp["n_steps_compile"])), "ch4.ex03.repeat_scale", too_few=True))
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
    observed = s.value("masked_mean_sq/compiles")
    try:
        measured = compiles.expect(observed, what=T("ch4.ex04.calls", n=len(calls), kinds=", ".join(kinds)),
                                   at_most=len(BUCKETS))
    except Fail as failure:
        if len(observed.get("names", {})) == 1:  # only the jitted core compiled, once per length or dtype
            failure.hint = "core_recompiles"
        raise
    measured["calls"] = len(calls)
    return measured


# =========================================================================== ex05
EX05 = "ex05_timing"


def _seconds(s: Observations, key: str, what: str) -> float:
    """The harness's return value, which must be a float (a NumPy float is one too)."""
    got = s.result(key)
    if got.get("t") == "scalar" and got.get("type") == "float":
        return float(got["value"])
    if got.get("t") == "array" and str(got.get("type", "")).startswith("numpy.float") \
            and np.asarray(got["value"]).shape == ():
        return float(got["value"])
    kind = got.get("type") or got.get("t")
    raise Fail(T("harness.not_float", what=what, type=kind), {"type": kind})


def _unit_factor(s: Observations) -> float:
    """How far the harness's unit is from seconds (1000 for milliseconds); 1 when right.

    Measured once, by "seconds", and divided out of the other checks so that one
    mistake costs one check.
    """
    try:
        returned = _seconds(s, "seconds/result", "time_call")
        truth = s.value("seconds/truth")["truth"]
    except Exception:  # noqa: BLE001 - judged by the seconds check itself
        return 1.0
    ratio = returned / truth if truth and returned > 0 else 1.0
    return 1.0 if 0.5 <= ratio <= 2.0 else ratio


def _harness_ratio(s: Observations, key: str, what: str, *, low: float, high: float, reason, unit: float = 1.0,
                   count: bool = False) -> dict:
    returned = _seconds(s, f"{key}/result", what)
    truth = s.value(f"{key}/truth")
    arrivals = s.value("grader/arrivals")
    elapsed = arrivals[f"{key}/truth"] - arrivals[f"{key}/start"] \
        if f"{key}/truth" in arrivals and f"{key}/start" in arrivals else None
    timing.expect_plausible(truth, elapsed, what=what)
    real = truth["truth"]
    ratio = (returned / unit) / real if real else float("inf")
    measured = {"returned_s": returned, "unit_factor": unit, "truth_s": real, "ratio": ratio,
                "calls": truth["calls"], "expected_calls": truth["expected_calls"]}
    if not (low <= ratio <= high):
        raise Fail(T("harness.ratio", what=what, returned=returned / unit, truth=real, ratio=ratio, reason=reason),
                   measured)
    return measured


@checks(EX05, "time_call.seconds")
def time_call_seconds(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    return _harness_ratio(s, "seconds", "time_call(fn, warmup=1)", low=0.5, high=2.0, reason=T("harness.units"))


@checks(EX05, "time_call.waits")
def time_call_waits(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    return _harness_ratio(s, "waits", "time_call(async fn)", low=0.5, high=3.0, reason=T("harness.no_wait"),
                          unit=_unit_factor(s))


@checks(EX05, "time_call.warmup")
def time_call_warmup(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    inp = ctx.inputs
    what = f"time_call(fn, warmup={inp['warmup_n']}, iters={inp['warmup_iters']})"
    return _harness_ratio(s, "warmup", what, low=0.5, high=2.5,
                          reason=T("harness.timed_warmup", warmup=inp["warmup_slow"]), unit=_unit_factor(s))


@checks(EX05, "time_call.median")
def time_call_median(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    inp = ctx.inputs
    what = f"time_call(fn, iters={inp['outlier_iters']})"
    outlier = inp["duration"] * inp["outlier_factor"]
    return _harness_ratio(s, "median", what, low=0.5, high=2.0, reason=T("harness.outlier", outlier=outlier),
                          unit=_unit_factor(s))


@checks(EX05, "time_call.call_count")
def time_call_call_count(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    runs = [("seconds", 1, ctx.inputs["iters"])] + [(f"count{i}", w, n) for i, (w, n) in
                                                    enumerate(ctx.inputs["counts"])]
    measured = {}
    for key, warmup, iters in runs:
        s.result(f"{key}/result")
        truth = s.value(f"{key}/truth")
        what = f"time_call(fn, warmup={warmup}, iters={iters})"
        measured[what] = truth["calls"]
        if truth["calls"] != warmup + iters:
            raise Fail(T("harness.calls", what=what, calls=truth["calls"], expected=warmup + iters), measured)
        if truth["bad_args"]:
            raise Fail(T("harness.args", what=what, bad=truth["bad_args"]), measured)
    return measured


@checks(EX05, "time_call.jax_async")
def time_call_jax_async(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    what = "time_call(jax.jit(f), a)"
    call = s.call("jax/result")
    if call["status"] == "raised" and "block_until_ready" in str(call.get("message", "")):
        from grader.checks import raised_text  # out.block_until_ready() on a pytree: the mistake itself

        raise Fail(raised_text(call), {"exception": call.get("type")})
    returned = _seconds(s, "jax/result", what) / _unit_factor(s)
    truth = s.value("jax/truth")
    grader = float(np.sqrt(truth["before"] * truth["after"]))
    ratio = returned / grader if grader else float("inf")
    measured = {"returned_s": returned, "grader_s": grader, "ratio": ratio, "matrix": truth["n"]}
    if not (0.4 <= ratio <= 2.5):
        raise Fail(T("harness.jax", what=what, returned=returned, truth=grader, ratio=ratio), measured)
    return measured


@checks(EX05, "speedup.value")
def speedup_value(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    what = "speedup(eager_fn, jit_fn)"
    returned = _seconds(s, "speedup/result", what)
    truth = s.value("speedup/truth")
    real = truth["eager"]["truth"] / truth["jit"]["truth"]
    ratio = returned / real
    measured = {"returned": returned, "truth": real, "ratio": ratio}
    if not (0.6 <= ratio <= 1.6):
        raise Fail(T("harness.speedup", what=what, returned=returned, truth=real), measured)
    return measured


# =========================================================================== ex06
EX06 = "ex06_speedup"
ROUNDS, REPS = 12, 2


@checks(EX06, "fast_heavy.jitted")
def fast_heavy_jitted(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    _attempted(s, "fast_heavy/values/0")
    return structure.expect_jitted(s.value("names/fast_heavy"), name="fast_heavy")


@checks(EX06, "fast_heavy.values")
def fast_heavy_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    """Against the eager heavy, run by the grader's copy in the reference's process."""
    cases = [(f"fast_heavy/values/{i}", f"fast_heavy(x: f32[{x.shape[0]},{x.shape[1]}], w, b)")
             for i, (x, w, b) in enumerate(ctx.inputs["heavy_values"])]

    def provided_changed(failures: list[numeric.CaseFailure]) -> str | None:
        """The student's own ``heavy`` no longer computes what the provided code does."""
        try:
            mine = numeric.as_array(s.result("heavy/student/0"), what="heavy")
            return None if np.allclose(mine, r.value("heavy/eager/0"), rtol=2e-5, atol=1e-6) else "provided_changed"
        except Exception:  # noqa: BLE001 - no heavy of the student's to compare: not this mistake
            return None

    return numeric.compare_calls(s, r, cases, expected=lambda key: r.value("heavy/eager/" + key.rsplit("/", 1)[1]),
                                 dtype="float32", rtol=2e-5, atol=1e-6, diagnose=provided_changed)


def layer_norm64(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """The float64 reference layer norm (biased variance), computed by the grader itself."""
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma.astype(np.float64) + beta.astype(np.float64)


@checks(EX06, "layer_norm.jitted")
def layer_norm_jitted(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    _attempted(s, "layer_norm/values/0")
    return structure.expect_jitted(s.value("names/layer_norm"), name="layer_norm")


@checks(EX06, "layer_norm.values")
def layer_norm_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    """Against a float64 layer norm computed here, in the grader."""
    cases = ctx.inputs["ln_values"]
    labels = [(f"layer_norm/values/{i}", f"layer_norm(x: f32[{c['args'][0].shape[0]},{c['args'][0].shape[1]}], "
                                         f"gamma, beta, eps={c['eps']:g})") for i, c in enumerate(cases)]

    def expected(key: str) -> np.ndarray:
        case = cases[int(key.rsplit("/", 1)[1])]
        return layer_norm64(*case["args"], case["eps"])

    measured = numeric.compare_calls(s, r, labels, expected=expected, dtype="float32", rtol=1e-5, atol=1e-5)
    return {**measured, "reference": "float64"}


@checks(EX06, "layer_norm.compiles")
def layer_norm_compiles(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    eps = ctx.inputs["ln_eps"]
    _returned(s, *(f"layer_norm/compiles/call{i}" for i in range(len(eps))))
    return compiles.expect(s.value("layer_norm/compiles"),
                           what=T("ch4.ex06.eps", values=", ".join(f"{e:g}" for e in eps)), exactly=1)


def _speedup_check(name: str):
    def check(s: Observations, r: Observations, ctx: CheckContext) -> Pass:
        from grader.primitives import timing

        results = s.value("grader/timing")
        result = results.get(name)
        if result is None:
            raise Fail(T("speedup.no_measure", what=name, error=results.get("error", "?")))
        if "error" in result.get("reference", {}) and result["reference"].get("speedup") is None:
            from grader.checks import GraderError

            raise GraderError(f"the reference could not be timed: {result['reference']['error']}")
        what = f"{name} [{result['case']}]"
        try:
            measured = timing.expect_speedup(result["student"], result["reference"],
                                             fraction=ctx.exercise.params.get("speedup_fraction", 0.5), what=what)
        except Fail as failure:
            program = s.value(f"{name}/program") if s.has(f"{name}/program") else {}
            callbacks = sorted(p for p in program.get("primitives", {}) if "callback" in p)
            if callbacks:
                failure.measured["callbacks"] = callbacks
                failure.hint = "callback"
            raise
        measured["case"] = result["case"]
        measured["calibration"] = result.get("calibration")
        measured["phases_s"] = results.get("phases")
        measured["method"] = {"rounds": result.get("rounds"), "reps_per_round": result.get("reps_per_round"),
                              "batches": result.get("batches"), "cpu_dispatch": "synchronous, one CPU"
                              if ctx.exercise.params.get("sync_cpu_dispatch") else "default"}
        return Pass(T("speedup.passed", student=result["student"]["speedup"],
                      reference=result["reference"]["speedup"], bar=measured["bar"]), measured)

    return check


checks(EX06, "fast_heavy.speedup")(_speedup_check("fast_heavy"))
checks(EX06, "layer_norm.speedup")(_speedup_check("layer_norm"))


def drive_ex06(run, ex, inputs: dict, budget: float):
    """Run the student's and the reference's jobs side by side and time them in turn.

    Both probes record their values, then serve timing requests. For each function
    the grader first times every candidate size on the reference, keeps the one
    where the reference's gain is clearest on this device, sizes the batches from it,
    then alternates rounds between the two processes. The results are computed
    here, in the grader, and stored under ``grader/timing``.
    """
    import time as _time


    deadline = _time.monotonic() + budget
    options = {"sync_cpu_dispatch": bool(ex.params.get("sync_cpu_dispatch"))}
    student = run.student.session(exercise=ex.id, module=ex.module, functions=ex.functions, timeout_s=budget,
                                  options=options, import_timeout_s=min(ex.import_timeout_s, budget))
    reference = run.reference.session(exercise=ex.id, module=ex.module, functions=ex.functions,
                                      timeout_s=max(budget, ex.timeout_s), options=options)
    results: dict = {}
    phases: dict[str, float] = {}
    t0 = _time.monotonic()
    try:
        ready: dict = {}
        started = {name: session.start() and session.send_inputs(inputs)  # both prepare at once
                   for name, session in (("student", student), ("reference", reference))}
        for name, session in (("student", student), ("reference", reference)):
            if name == "reference" and not (ready["student"] or student.outcome.attempted()):
                ready[name] = None  # nothing to time or to compare: stop the reference now
                break
            got = _await_record(session, "timing/ready", deadline) if started[name] else None
            ready[name] = set(got["cases"]) if got else None
            phases[f"{name}_ready_s"] = round(_time.monotonic() - t0, 3)
        if ready["reference"] is None and ready["student"]:
            results["error"] = "the reference could not be timed"
        elif ready["student"] is not None:
            for name, sizes in (("fast_heavy", HEAVY_SIZES), ("layer_norm", LN_SIZES)):
                cases = [f"{name}/{label}" for label in sizes if f"{name}/{label}" in ready["student"]
                         and f"{name}/{label}" in ready["reference"]]
                if cases:
                    results[name] = _time_function(student, reference, cases, deadline)
                    phases[f"{name}_timed_s"] = round(_time.monotonic() - t0, 3)
        for name, session in (("student", student), ("reference", reference)):
            if ready.get(name) is None:
                session.abandon()  # not needed, or broken: killed at once
            elif session.send({"op": "stop"}):
                session.run_to_end()
    finally:
        student_out, reference_out = student.finish(), reference.finish()
    phases["finished_s"] = round(_time.monotonic() - t0, 3)
    results["phases"] = phases
    student_out.observations["grader/timing"] = results
    return student_out, (reference_out if ready.get("reference") is not None else None)


def _await_record(session, key: str, deadline: float):
    while key not in session.outcome.observations:
        if session.expect({"obs"}, deadline=deadline) is None:
            return None
    return session.outcome.observations[key]


def _time_function(student, reference, cases: list[str], deadline: float) -> dict:
    from grader.primitives import timing

    calibration = {}
    for case in cases:  # the reference alone, a few reps per candidate size
        probe_run = timing.request_times(reference, case, reps=3, batches=(1, 1), deadline=deadline)
        if "error" in probe_run:
            continue
        batches = timing.batch_sizes(probe_run)
        measured = timing.request_times(reference, case, reps=5, batches=batches, deadline=deadline)
        if "error" in measured:
            continue
        stats = timing.speedup_stats(measured)
        calibration[case] = {"speedup": stats["speedup"], "q25": stats["q25"], "batches": list(batches)}
    if not calibration:
        return {"case": cases[0], "student": {"speedup": None}, "reference": {"speedup": None,
                                                                               "error": "calibration failed"}}
    case = max(calibration, key=lambda c: calibration[c]["q25"])
    batches = tuple(calibration[case]["batches"])
    s_samples, r_samples = timing.alternate(student, reference, case, rounds=ROUNDS, reps=REPS, batches=batches,
                                            deadline=deadline)
    out = {"case": case.split("/", 1)[1], "calibration": calibration, "batches": list(batches),
           "rounds": ROUNDS, "reps_per_round": REPS}
    for side, samples in (("student", s_samples), ("reference", r_samples)):
        stats = timing.speedup_stats(samples)
        if "error" in samples:
            stats["error"] = samples["error"]
            if samples.get("implausible"):
                stats["implausible"] = True
        out[side] = stats
    return out


DRIVERS = {EX06: drive_ex06}


# =========================================================================== ex07
EX07 = "ex07_pitfalls"
EX07_FUNCTIONS = ("normalize_and_count", "debug_norm", "mean_abs", "power_iteration", "ema")


@checks(EX07, "jitted")
def ex07_jitted(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    firsts = {"normalize_and_count": "call0", "debug_norm": "values/0", "mean_abs": "values/1d",
              "power_iteration": "values/10", "ema": "values/0"}
    attempted = []
    from grader.checks import NotAttempted

    for name, suffix in firsts.items():
        try:
            s.call(f"{name}/{suffix}")
            attempted.append(name)
        except (NotAttempted, Fail):
            continue
    if not attempted:
        raise NotAttempted(", ".join(EX07_FUNCTIONS))
    not_jitted = [n for n in attempted if not s.value(f"names/{n}").get("jitted")]
    if not_jitted:
        raise Fail(T("structure.not_jitted_many", names=", ".join(not_jitted)), {"not_jitted": not_jitted})
    return {"jitted": attempted}


@checks(EX07, "normalize_and_count.values")
def normalize_and_count_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    failures = []
    for i, x in enumerate(ctx.inputs["count_xs"]):
        got = s.result(f"normalize_and_count/call{i}")
        want = r.result(f"normalize_and_count/call{i}")
        if got.get("t") not in ("tuple", "list") or got.get("length") != 2:
            raise Fail(T("ch4.ex07.not_pair", got=got.get("type") or got.get("t")))
        try:
            numeric.compare(got["items"][0], numeric.as_array(want["items"][0], what="ref"),
                            what=f"normalize_and_count(x{i}, count)[0]", dtype="float32")
        except Fail as failure:
            failures.append(failure.message)
        count = numeric.as_array(got["items"][1], what="count", accept_scalars=True)
        if count.shape != () or float(count) != i + 1:
            failures.append(T("ch4.ex07.count", call=i + 1, got=str(count.tolist()), expected=i + 1))
    if failures:
        raise Fail(failures)
    return {"calls": len(ctx.inputs["count_xs"])}


@checks(EX07, "normalize_and_count.globals")
def normalize_and_count_globals(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    s.call("normalize_and_count/call0")
    return purity.expect_globals_unchanged(s.value("normalize_and_count/globals"), what="normalize_and_count")


@checks(EX07, "debug_norm.values")
def debug_norm_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    cases = [(f"debug_norm/values/{i}", label("debug_norm", x)) for i, x in enumerate(ctx.inputs["norm_xs"])]
    return numeric.compare_calls(s, r, cases, dtype="float32")


def _printed_norms(text: str) -> list[float | None]:
    import re

    values: list[float | None] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = re.fullmatch(r"\s*norm\s*=\s*([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))\s*", line)
        values.append(float(match.group(1)) if match else None)
    return values


@checks(EX07, "debug_norm.prints")
def debug_norm_prints(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    measured = {"lines": []}
    for i, x in enumerate(ctx.inputs["norm_xs"]):
        s.call(f"debug_norm/values/{i}")
        text = s.value(f"debug_norm/printed/{i}").get("text", "")
        values = _printed_norms(text)
        measured["lines"].append(text.strip()[:80])
        expected = float(np.linalg.norm(x.astype(np.float64)))
        if len(values) != 1 or values[0] is None:
            first = text.strip().splitlines()[0][:80] if text.strip() else ""
            raise Fail(T("ch4.ex07.prints", call=i + 1, lines=len(values), first=first), measured)
        if not np.isclose(values[0], expected, rtol=1e-4, atol=1e-6):
            raise Fail(T("ch4.ex07.printed_value", call=i + 1, got=values[0], expected=expected), measured)
    return measured


@checks(EX07, "mean_abs.values")
def mean_abs_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    cases = [(f"mean_abs/values/{k}", label("mean_abs", x)) for k, x in ctx.inputs["abs_xs"].items()]
    return numeric.compare_calls(s, r, cases, dtype="float32", array_type="jax.Array")


@checks(EX07, "power_iteration.values")
def power_iteration_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    cases = [(f"power_iteration/values/{n}", f"power_iteration(A, v0, {n})") for n in ctx.inputs["n_steps"]]
    return numeric.compare_calls(s, r, cases, dtype="float32", rtol=1e-4, atol=1e-5,
                                 diagnose=lambda failures: "overflow" if "non_finite" in failed_kinds(failures)
                                 else None)


def _program_sizes(s: Observations, r: Observations, key: str, small: str, large: str, what: str) -> dict:
    got_small, got_large = s.value(f"{key}/size/{small}"), s.value(f"{key}/size/{large}")
    for record in (got_small, got_large):
        if record.get("status") == "not_attempted":
            from grader.checks import NotAttempted

            raise NotAttempted(key)
        if record.get("status") != "ok":
            from grader.checks import exception_hint

            raise Fail(T("ch4.ex07.trace_failed", what=what, type=record.get("type", "?"),
                         message=record.get("message", ""), where=record.get("where") or "?"),
                       hint=exception_hint(record) if record.get("status") == "raised" else None)
    ref = r.value(f"{key}/size/{large}")["equations"]
    measured = {f"equations@{small}": got_small["equations"], f"equations@{large}": got_large["equations"],
                "reference": ref}
    limit = 3 * ref + 10
    if got_large["equations"] > got_small["equations"] or got_large["equations"] > limit:
        raise Fail(T("ch4.ex07.grows", what=what, small=small, large=large, n_small=got_small["equations"],
                     n_large=got_large["equations"], reference=ref), measured)
    return measured


@checks(EX07, "power_iteration.program_size")
def power_iteration_program_size(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    steps = ctx.inputs["n_steps"]
    return _program_sizes(s, r, "power_iteration", str(steps[0]), str(steps[-1]), "power_iteration, n_steps")


@checks(EX07, "power_iteration.compiles")
def power_iteration_compiles(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    steps = ctx.inputs["n_steps"]
    _returned(s, *(f"power_iteration/values/{n}" for n in steps))
    return compiles.expect(s.value("power_iteration/compiles"),
                           what=T("ch4.ex07.n_steps", values=", ".join(map(str, steps))), exactly=1)


@checks(EX07, "ema.values")
def ema_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    cases = [(f"ema/values/{i}", f"ema(xs: f32[{','.join(map(str, xs.shape))}], alpha={a:.3g})")
             for i, (xs, a) in enumerate(ctx.inputs["ema"])]
    return numeric.compare_calls(s, r, cases, dtype="float32", rtol=1e-5, atol=1e-6)


@checks(EX07, "ema.program_size")
def ema_program_size(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    return _program_sizes(s, r, "ema", "8", "64", "ema, sequence length")


# =========================================================================== ex08
EX08 = "ex08_aot_debug"
COMPILED_TYPES = ("jax._src.stages.Compiled", "jax.stages.Compiled")


@checks(EX08, "precompile.compiled")
def precompile_compiled(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    measured = {}
    for label in ("plain", "jitted"):
        got = s.result(f"precompile/{label}")
        kind = got.get("type") or got.get("t")
        measured[label] = kind
        if kind not in COMPILED_TYPES:
            lazy = "Pjit" in str(kind) or "jit" in str(kind).rsplit(".", 1)[-1].lower()
            raise Fail(T("ch4.ex08.not_compiled", label=label, type=kind), measured,
                       hint="compiles_lazily" if lazy else None)
    return measured


@checks(EX08, "precompile.calls")
def precompile_calls(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    measured, failures, hints = {}, [], []
    for label in ("plain", "jitted"):
        n = len(ctx.inputs["aot"][label]["new"])
        for i in range(n):
            key = f"precompile/{label}/call{i}"
            try:
                call = s.call(key)
                if call["status"] == "raised" and "compiled with" in str(call.get("message", "")):
                    from grader.checks import raised_text  # compiled for other shapes: the check's own mistake

                    raise Fail(raised_text(call))
                got = s.result(key)
                numeric.compare(got, numeric.as_array(r.result(key), what="ref"),
                                what=f"precompile({label} fn)(new values #{i + 1})", dtype="float32")
            except Fail as failure:
                failures.append(failure.message)
                hints.append(failure.hint)
        try:
            measured[label] = compiles.expect(s.value(f"precompile/{label}/compiles"),
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


@checks(EX08, "count_primitives.values")
def count_primitives_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    failures, measured = [], {}
    for i, spec in enumerate(ctx.inputs["hidden"]):
        what = f"count_primitives(hidden #{i + 1}: {spec['kind']})"
        try:
            got = _as_counts(s.result(f"count_primitives/{i}"), what)
        except Fail as failure:
            failures.append(failure.message)
            continue
        want = _as_counts(r.result(f"count_primitives/{i}"), "reference")
        diff = {k: (got.get(k, 0), want.get(k, 0)) for k in set(got) | set(want) if got.get(k, 0) != want.get(k, 0)}
        measured[spec["kind"]] = {"total": sum(got.values()), "expected_total": sum(want.values())}
        if diff:
            shown = ", ".join(f"{k}: {g} (expected {w})" for k, (g, w) in sorted(diff.items())[:6])
            failures.append(T("ch4.ex08.counts", what=what, diff=shown, total=sum(got.values()),
                              expected=sum(want.values())))
    if failures:
        raise Fail(failures, measured)
    return measured


@checks(EX08, "flops_of.values")
def flops_of_values(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    measured = {}
    for i, spec in enumerate(ctx.inputs["flops"]):
        what = f"flops_of({spec['kind']})"
        got = numeric.as_array(s.result(f"flops_of/{i}"), what=what, accept_scalars=True)
        want = float(numeric.as_array(r.result(f"flops_of/{i}"), what="ref", accept_scalars=True))
        if got.shape != ():
            raise Fail(T("numeric.shape", what=what, expected="()", got=str(got.shape)))
        value = float(got)
        measured[spec["kind"]] = {"flops": value, "reference": want}
        if not np.isfinite(value) or abs(value - want) > 0.01 * abs(want):
            raise Fail(T("ch4.ex08.flops", what=what, got=value, expected=want), measured)
    return measured
