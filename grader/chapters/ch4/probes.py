"""Chapter 4's probes: what runs next to the student's code, in the child process.

Each probe calls the student's functions on the hidden inputs it receives and records
what happened (:mod:`grader.probe`); the verdicts are in ``checks.py``. Compile
windows come first in each probe, on inputs placed on the device beforehand, so that
the counts see the student's calls and nothing else.
"""
from __future__ import annotations

import numpy as np

from grader.primitives import purity, structure
from grader.probe import ProbeContext, probe

CH = "ch4"


def _put(tree):
    import jax

    return jax.tree_util.tree_map(lambda a: jax.device_put(a) if isinstance(a, np.ndarray) else a, tree)


# --------------------------------------------------------------------------- ex01
@probe(CH, "ex01_jit_forms")
def ex01(ctx: ProbeContext) -> None:
    inp = ctx.inputs
    for name in ("softmax", "log_softmax"):
        same = _put(inp["same_shape"])
        other = _put(inp["new_shape"])
        with ctx.compiles(f"{name}/compiles/same_shape"):
            for i, x in enumerate(same):
                ctx.call(f"{name}/compiles/call{i}", name, x)
        with ctx.compiles(f"{name}/compiles/new_shape", fresh=False):
            ctx.call(f"{name}/compiles/call_new", name, other)

    cases = _put(inp["cases"])
    for name in ("softmax_raw", "softmax", "log_softmax"):
        for label, x in cases.items():
            ctx.call(f"{name}/values/{label}", name, x)

    # purity of the plain function, on a NumPy input it must not write into
    original = inp["purity_x"]
    x = original.copy()
    before = purity.fingerprint_globals(ctx.module)
    with ctx.capture("softmax_raw/purity/printed"):
        ctx.call("softmax_raw/purity/first", "softmax_raw", x)
        ctx.call("softmax_raw/purity/second", "softmax_raw", x)
    ctx.record("softmax_raw/purity/input_unchanged", bool(np.array_equal(x, original)))
    ctx.record("softmax_raw/purity/globals", purity.diff_globals(before, purity.fingerprint_globals(ctx.module)))
    ctx.record("softmax_raw/purity/tracers", purity.find_tracers(ctx.module))


# --------------------------------------------------------------------------- ex02
@probe(CH, "ex02_where")
def ex02(ctx: ProbeContext) -> None:
    inp = ctx.inputs
    calls = {
        "piecewise": [(x,) for x in inp["piecewise"].values()],
        "normalize_if_positive": [(x,) for x in inp["normalize"].values()],
        "clip_by_norm": [(x, m) for x, m in inp["clip"].values()],
    }
    # a Python branch on a traced value shows when tracing on shapes alone
    for name, arg_list in calls.items():
        fn = ctx.get(name)
        if fn is None:
            ctx.record(f"{name}/trace", {"status": "missing"})
            continue
        record = {"status": "ok"}
        ctx.announce(name)
        for args in arg_list:
            record = structure.trace_abstractly(fn, *args, student_dir=ctx.student_dir)
            if record["status"] != "ok":
                break
        ctx.record(f"{name}/trace", record)

    with ctx.compiles("piecewise/compiles"):
        for i, x in enumerate(_put(inp["piecewise_same"])):
            ctx.call(f"piecewise/compiles/call{i}", "piecewise", x)
    with ctx.compiles("normalize_if_positive/compiles"):
        for i, x in enumerate(_put(inp["normalize_same"])):
            ctx.call(f"normalize_if_positive/compiles/call{i}", "normalize_if_positive", x)
    clip_x = _put(inp["clip_same"])
    with ctx.compiles("clip_by_norm/compiles"):
        for i, (x, m) in enumerate(zip(clip_x, inp["clip_norms"])):
            ctx.call(f"clip_by_norm/compiles/call{i}", "clip_by_norm", x, m)

    for label, x in _put(inp["piecewise"]).items():
        ctx.call(f"piecewise/values/{label}", "piecewise", x)
    for label, x in _put(inp["normalize"]).items():
        ctx.call(f"normalize_if_positive/values/{label}", "normalize_if_positive", x)
    for label, (x, m) in inp["clip"].items():
        ctx.call(f"clip_by_norm/values/{label}", "clip_by_norm", _put(x), m)


# --------------------------------------------------------------------------- ex03
@probe(CH, "ex03_static_args")
def ex03(ctx: ProbeContext) -> None:
    inp = ctx.inputs
    x = _put(inp["x"])
    x3 = _put(inp["x3"])

    with ctx.compiles("poly/compiles"):
        for i, c in enumerate(inp["coeffs"]):
            ctx.call(f"poly/compiles/call{i}", "poly", x, c)
    with ctx.compiles("repeat_scale/compiles"):
        for i, n in enumerate(inp["n_steps_compile"]):
            ctx.call(f"repeat_scale/compiles/call{i}", "repeat_scale", x, n_steps=n)
    with ctx.compiles("reduce_along/compiles"):
        for i, axis in enumerate(inp["axes_compile"]):
            ctx.call(f"reduce_along/compiles/call{i}", "reduce_along", x3, axis)
    with ctx.compiles("activate/compiles"):
        i = 0
        for mode in inp["modes_compile"]:
            for alpha in inp["alphas"]:
                ctx.call(f"activate/compiles/call{i}", "activate", x, mode, alpha)
                i += 1

    for i, c in enumerate(inp["coeffs"]):
        ctx.call(f"poly/values/{i}", "poly", x3, c)
    for n in inp["n_steps_values"]:
        ctx.call(f"repeat_scale/values/{n}", "repeat_scale", x3, n_steps=n)
    for axis in inp["axes_values"]:
        ctx.call(f"reduce_along/values/{axis}", "reduce_along", x3, axis)
    for mode in inp["modes"]:
        for j, alpha in enumerate(inp["alphas"]):
            ctx.call(f"activate/values/{mode}/{j}", "activate", x3, mode, alpha)
    ctx.call("activate/values/unknown_mode", "activate", x, inp["unknown_mode"], 0.5)


# --------------------------------------------------------------------------- ex04
@probe(CH, "ex04_cache_keys")
def ex04(ctx: ProbeContext) -> None:
    inp = ctx.inputs
    # bucket_length on 1..N: plain Python, one record for the whole range
    fn = ctx.get("bucket_length")
    outcome = ctx.invoke(fn, "bucket_length", 1)
    outcome.pop("_result", None)
    if outcome["status"] == "ok":
        values, bad = [], None
        for n in range(1, int(inp["bucket_max"]) + 1):
            got = ctx.invoke(fn, "bucket_length", n)
            if got["status"] != "ok":
                got.pop("_result", None)
                bad = {"n": n, **got}
                break
            result = got["_result"]
            values.append(result if type(result) is int else repr(result)[:40])
        outcome = {"status": "ok", "function": "bucket_length", "value": {"t": "list", "values": values},
                   "failed_at": bad}
    ctx.record("bucket_length/values", outcome)

    calls = []
    for item in inp["calls"]:
        data = item["data"]
        calls.append(data.tolist() if item["kind"] == "list" else data)
    with ctx.compiles("masked_mean_sq/compiles"):
        for i, data in enumerate(calls):
            ctx.call(f"masked_mean_sq/values/{i}", "masked_mean_sq", data)


# --------------------------------------------------------------------------- ex05
@probe(CH, "ex05_timing")
def ex05(ctx: ProbeContext) -> None:
    from grader.primitives.timing import Instrument

    inp = ctx.inputs
    duration = inp["duration"]
    args = (np.zeros(3, np.float32), "arg")  # passed through *args; the instrument checks identity

    def run(key: str, instrument: Instrument, warmup: int, iters: int) -> None:
        ctx.record(f"{key}/start", True)  # the grader notes when each record arrives
        ctx.call(f"{key}/result", "time_call", instrument, *args, warmup=warmup, iters=iters)
        ctx.record(f"{key}/truth", instrument.report(warmup, iters))

    iters = inp["iters"]
    run("seconds", Instrument(duration=duration, expected_args=args), 1, iters)
    run("waits", Instrument(duration=duration, asynchronous=True, expected_args=args), 1, iters)
    run("warmup", Instrument(duration=duration, slow_first=inp["warmup_n"], slow_duration=inp["warmup_slow"],
                             expected_args=args), inp["warmup_n"], inp["warmup_iters"])
    outlier_at = 1 + inp["outlier_pos"]
    run("median", Instrument(duration=duration, outlier_at=outlier_at,
                             outlier_duration=duration * inp["outlier_factor"], expected_args=args),
        1, inp["outlier_iters"])
    for i, (warmup, n) in enumerate(inp["counts"]):
        run(f"count{i}", Instrument(duration=duration / 4, expected_args=args), warmup, n)

    # a real jitted function on JAX's asynchronous dispatch, sized to take a few milliseconds
    if not ctx.attempted("time_call", lambda: None, warmup=0, iters=1):
        ctx.record("jax/result", {"status": "not_attempted", "function": "time_call"})
        ctx.record("jax/truth", {})
    else:
        _ex05_jax(ctx, inp, iters)

    eager = Instrument(duration=duration * inp["eager_factor"], expected_args=args)
    jitted = Instrument(duration=duration, expected_args=args)
    ctx.call("speedup/result", "speedup", eager, jitted, *args, warmup=1, iters=iters)
    ctx.record("speedup/truth", {"eager": eager.report(1, iters), "jit": jitted.report(1, iters)})


def _ex05_jax(ctx: ProbeContext, inp: dict, iters: int) -> None:
    import jax
    import jax.numpy as jnp

    from grader.primitives.timing import trusted_median

    # it returns a pytree, as real JAX code often does: jax.block_until_ready(out) waits on
    # every leaf, while out.block_until_ready() only exists on a single array
    chain = jax.jit(lambda a: (jnp.sum(a), jnp.tanh(a @ a) @ a))
    rng = np.random.default_rng(inp["matrix_seed"])
    n = 128
    while True:
        a = jax.device_put(rng.normal(size=(n, n)).astype(np.float32) / np.sqrt(n))
        if trusted_median(chain, (a,), warmup=1, iters=3) >= inp["jax_min_s"] or n >= 4096:
            break
        n *= 2
    before = trusted_median(chain, (a,))
    ctx.call("jax/result", "time_call", chain, a, warmup=1, iters=iters)
    after = trusted_median(chain, (a,))
    ctx.record("jax/truth", {"before": before, "after": after, "n": n})


# --------------------------------------------------------------------------- ex06
@probe(CH, "ex06_speedup")
def ex06(ctx: ProbeContext) -> None:
    import jax

    from grader.chapters.ch4 import provided
    from grader.primitives.timing import serve_timing

    inp = ctx.inputs
    for i, case in enumerate(inp["heavy_values"]):
        x, w, b = _put(case)
        ctx.call(f"fast_heavy/values/{i}", "fast_heavy", x, w, b)
        ctx.record(f"heavy/eager/{i}", np.asarray(provided.heavy(x, w, b)))  # used from the reference's run
    ctx.call("heavy/student/0", "heavy", *_put(inp["heavy_values"][0]))  # the module's own copy, unchanged?
    for i, case in enumerate(inp["ln_values"]):
        x, g, b = _put(case["args"])
        ctx.call(f"layer_norm/values/{i}", "layer_norm", x, g, b, eps=case["eps"])
    x, g, b = _put(inp["ln_compile"])
    with ctx.compiles("layer_norm/compiles"):
        for i, eps in enumerate(inp["ln_eps"]):
            ctx.call(f"layer_norm/compiles/call{i}", "layer_norm", x, g, b, eps=eps)
    # what the jitted programs hold (host callbacks, say), for the feedback of a slow one
    for name, args in (("fast_heavy", inp["heavy_values"][0]), ("layer_norm", inp["ln_values"][0]["args"])):
        fn = ctx.get(name)
        if fn is not None:
            ctx.announce(name)
            ctx.record(f"{name}/program", structure.program_size(fn, *_put(args)))

    # timing: the grader's own eager code against the student's function, on each candidate size
    cases = {}
    for name, baseline, group in (("fast_heavy", provided.heavy, "heavy_sizes"),
                                  ("layer_norm", provided.layer_norm_loop, "ln_sizes")):
        candidate = ctx.get(name)
        if candidate is None:
            continue
        for label, arrays in inp[group].items():
            placed = tuple(_put(arrays))
            try:
                jax.block_until_ready(candidate(*placed))  # compile before any timing
                jax.block_until_ready(candidate(*placed))
                jax.block_until_ready(baseline(*placed))
            except BaseException:  # noqa: BLE001 - not attempted, or broken: no timing for it
                continue
            cases[f"{name}/{label}"] = (baseline, candidate, placed)
    serve_timing(ctx, cases)


# --------------------------------------------------------------------------- ex07
@probe(CH, "ex07_pitfalls")
def ex07(ctx: ProbeContext) -> None:
    from grader.probe import FAILED

    inp = ctx.inputs
    before = purity.fingerprint_globals(ctx.module)
    count = 0
    for i, x in enumerate(_put(inp["count_xs"])):
        out = ctx.call(f"normalize_and_count/call{i}", "normalize_and_count", x, count)
        if out is FAILED or not isinstance(out, (tuple, list)) or len(out) != 2:
            break
        count = out[1]
    ctx.record("normalize_and_count/globals",
               purity.diff_globals(before, purity.fingerprint_globals(ctx.module)))

    for i, x in enumerate(_put(inp["norm_xs"])):
        with ctx.capture(f"debug_norm/printed/{i}"):
            ctx.call(f"debug_norm/values/{i}", "debug_norm", x)

    for label, x in _put(inp["abs_xs"]).items():
        ctx.call(f"mean_abs/values/{label}", "mean_abs", x)

    a, v0 = _put(inp["power"])
    with ctx.compiles("power_iteration/compiles"):
        for n in inp["n_steps"]:
            ctx.call(f"power_iteration/values/{n}", "power_iteration", a, v0, n)
    fn = ctx.get("power_iteration")
    if fn is not None:
        for n in (inp["n_steps"][0], inp["n_steps"][-1]):
            # n_steps closed over as a Python int, so a static and a dynamic n_steps trace alike
            traced = lambda a_, v_, fn=fn, n=n: fn(a_, v_, n)  # noqa: E731
            ctx.announce("power_iteration")
            ctx.record(f"power_iteration/size/{n}", structure.program_size(traced, a, v0,
                                                                          student_dir=ctx.student_dir))

    for i, (xs, alpha) in enumerate(inp["ema"]):
        ctx.call(f"ema/values/{i}", "ema", _put(xs), alpha)
    fn = ctx.get("ema")
    if fn is not None:
        ctx.announce("ema")
        for length, xs in inp["ema_sizes"].items():
            ctx.record(f"ema/size/{length}", structure.program_size(fn, _put(xs), 0.3,
                                                                    student_dir=ctx.student_dir))


# --------------------------------------------------------------------------- ex08
def hidden_functions(specs: list[dict]) -> list:
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
            def fn(v, op1=op1, n=n, scale=scale):
                def body(i, u):
                    return jax.lax.cond(jnp.sum(u) > 0, lambda w: op1(w) * scale, lambda w: w * 0.5, u)

                return jax.lax.fori_loop(0, n, body, v)
        elif kind == "scan_jit":
            step = jax.jit(lambda c, row, op1=op1, scale=scale: (c + op1(row) * scale, c * row))

            def fn(v, step=step):
                return jax.lax.scan(step, jnp.zeros(v.shape[1:], v.dtype), v)
        elif kind == "while":
            def fn(v, op1=op1, scale=scale):
                return jax.lax.while_loop(lambda u: jnp.max(jnp.abs(u)) < 100.0,
                                          lambda u: u * (1.5 + scale) + op1(u) * 0.1 + 0.1, v)
        else:  # "dynamic_fori_cond_jit"
            h = jax.jit(op1)

            def fn(v, steps, h=h, op2=op2):
                return jax.lax.fori_loop(0, steps, lambda i, u: jax.lax.cond(i % 2 == 0, h, op2, u), v)
        built.append(fn)
    return built


def flop_functions(specs: list[dict]) -> list:
    import jax.numpy as jnp

    out = []
    for spec in specs:
        if spec["kind"] == "mlp":
            def fn(x, w1, w2):
                return jnp.tanh(x @ w1) @ w2
        else:
            def fn(x, y):
                return jnp.sum(jnp.exp(x) * y + x * x)
        out.append(fn)
    return out


@probe(CH, "ex08_aot_debug")
def ex08(ctx: ProbeContext) -> None:
    import jax
    import jax.numpy as jnp

    from grader.probe import FAILED

    inp = ctx.inputs
    plain = lambda x, y: jnp.tanh(x) @ y + 1.0  # noqa: E731
    jitted = jax.jit(lambda x, y: jnp.sin(x) * y.sum())
    for label, fn in (("plain", plain), ("jitted", jitted)):
        example = _put(inp["aot"][label]["example"])
        compiled = ctx.call(f"precompile/{label}", "precompile", fn, *example)
        if compiled is FAILED or not callable(compiled):
            continue
        fresh = [_put(args) for args in inp["aot"][label]["new"]]
        with ctx.compiles(f"precompile/{label}/compiles", fresh=False):
            for i, args in enumerate(fresh):
                outcome = ctx.invoke(compiled, "precompile(...)", *args)
                outcome.pop("_result", None)
                ctx.record(f"precompile/{label}/call{i}", outcome)

    hidden = hidden_functions(inp["hidden"])
    for i, (fn, args) in enumerate(zip(hidden, inp["hidden_args"])):
        ctx.call(f"count_primitives/{i}", "count_primitives", fn, *_put(args))
    for i, (fn, args) in enumerate(zip(flop_functions(inp["flops"]), inp["flops_args"])):
        ctx.call(f"flops_of/{i}", "flops_of", fn, *_put(args))
