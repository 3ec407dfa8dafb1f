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
