"""Exercise 5, a correct timing harness: hidden inputs, probe and checks.

The student's ``time_call`` times instruments whose real cost the grader knows
(:class:`grader.primitives.timing.Instrument`): results that finish only when waited
on, slow first calls, one slow outlier, exact call counts, and a real jitted function.
Each practice of the chapter's section 4 has its own check.
"""
from __future__ import annotations

import numpy as np

from grader.checks import ARRIVALS, CheckContext, Fail, Keys, Observations, check
from grader.i18n import T
from grader.primitives import timing

KEYS = Keys(
    start="{run}/start", result="{run}/result", truth="{run}/truth"
)
#: how far a harness's time of the real jitted function may be from the grader's (a ratio)
JAX_AGREES = (0.4, 2.5)


# =========================================================================== hidden inputs
def inputs(rng: np.random.Generator) -> dict:
    return {
        # a few milliseconds of work a call: long enough to time, short enough to grade quickly
        "duration": float(rng.uniform(0.004, 0.006)),
        "iters": int(rng.integers(5, 8)),
        "warmup_n": 4,
        "warmup_iters": 3,
        "warmup_slow": float(rng.uniform(0.06, 0.08)),
        "outlier_iters": 5,
        "outlier_pos": int(rng.integers(0, 4)),
        "outlier_factor": 25.0,
        "counts": [[0, 3], [int(rng.integers(2, 4)), int(rng.integers(2, 5))]],
        "eager_factor": float(rng.uniform(2.5, 4.0)),
        "matrix_seed": int(rng.integers(0, 2**31 - 1)),
        "jax_min_s": 0.004,
    }


# =========================================================================== probe (child)
def probe(ctx) -> None:
    from grader.primitives.timing import Instrument

    inp = ctx.inputs
    duration = inp["duration"]
    args = (np.zeros(3, np.float32), "arg")  # passed through *args; the instrument checks identity

    def run(name: str, instrument: Instrument, warmup: int, iters: int) -> tuple:
        # the grader's clock from here (its "go", not when it reads a record: a busy grader reads late)
        ctx.mark(KEYS.start(run=name))
        result = ctx.call(KEYS.result(run=name), "time_call", instrument, *args, warmup=warmup, iters=iters)
        report = instrument.report(warmup, iters)
        ctx.record(KEYS.truth(run=name), report)
        return result, report

    iters = inp["iters"]
    returned, report = run("seconds", Instrument(duration=duration, expected_args=args), 1, iters)
    unit = unit_of(returned, report["truth"]) if isinstance(returned, (float, np.floating)) else 1.0
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
        ctx.record(KEYS.result(run="jax"), {"status": "not_attempted", "function": "time_call"})
        ctx.record(KEYS.truth(run="jax"), {})
    else:
        _time_a_jitted_function(ctx, inp, iters, unit)

    eager = Instrument(duration=duration * inp["eager_factor"], expected_args=args)
    jitted = Instrument(duration=duration, expected_args=args)
    ctx.call(KEYS.result(run="speedup"), "speedup", eager, jitted, *args, warmup=1, iters=iters)
    ctx.record(KEYS.truth(run="speedup"), {"eager": eager.report(1, iters), "jit": jitted.report(1, iters)})


def _time_a_jitted_function(ctx, inp: dict, iters: int, unit: float, attempts: int = 3) -> None:
    import jax
    import jax.numpy as jnp

    from grader.primitives.timing import trusted_median

    # it returns a pytree, as real JAX code often does: jax.block_until_ready(out) waits on
    # every leaf, while out.block_until_ready() only exists on a single array. Its first leaf is
    # known on the host at once (the matrix's size), the second is what the device computes: a
    # harness that waits on the first output alone measures the dispatch, not the work
    slow = jax.jit(lambda a: (jnp.sum(a), jnp.tanh(a @ a) @ a))

    def chain(a):
        return (a.shape[0], *slow(a))

    rng = np.random.default_rng(inp["matrix_seed"])
    n = 128
    while True:
        a = jax.device_put(rng.normal(size=(n, n)).astype(np.float32) / np.sqrt(n))
        took = trusted_median(chain, (a,), warmup=1, iters=3)
        if took >= inp["jax_min_s"] or n >= 4096:
            break
        # the work grows as n**3: aim a little above the floor, by steps of at most 2x in n (doubling
        # alone can overshoot eightfold, and every call of the harness's and the grader's pays for it)
        grow = min(8.0, 1.5 * inp["jax_min_s"] / max(took, 1e-6)) ** (1 / 3)
        n = min(4096, max(n + 64, int(np.ceil(n * grow / 64)) * 64))
    # The grader's clock before and after the harness's: on a loaded machine one of the three can
    # catch a burst of other work, so a harness that disagrees with it is timed again (up to
    # ``attempts`` times, the last attempt recorded). A harness that does not wait disagrees every time.
    for attempt in range(1, attempts + 1):
        before = trusted_median(chain, (a,))
        outcome = ctx.invoke(ctx.get("time_call"), "time_call", chain, a, warmup=1, iters=iters)
        after = trusted_median(chain, (a,))
        returned = outcome.pop("_result", None)
        if outcome["status"] != "ok" or not isinstance(returned, (float, np.floating)) \
                or JAX_AGREES[0] <= (returned / unit) / grader_time(before, after) <= JAX_AGREES[1]:
            break
    ctx.record(KEYS.result(run="jax"), outcome)
    ctx.record(KEYS.truth(run="jax"), {"before": before, "after": after, "n": n, "attempts": attempt,
                                       "first_leaf": _first_output_time(chain, a)})


def _first_output_time(chain, a, rounds: int = 3) -> float:
    """The grader's time of the first output alone (what a harness that waits on nothing more sees);
    each call's work is waited on afterwards, untimed, so that none piles up."""
    import jax

    from grader.child.trusted import TRUSTED

    took: list[float] = []
    while len(took) < rounds:
        began = TRUSTED.perf_counter()
        out = chain(a)
        took.append(TRUSTED.perf_counter() - began)
        jax.block_until_ready(out)
    return float(np.median(took))


# =========================================================================== checks (grader)
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
        returned = _seconds(s, KEYS.result(run="seconds"), "time_call")
        truth = s.value(KEYS.truth(run="seconds"))["truth"]
    except Exception:  # noqa: BLE001 - judged by the seconds check itself
        return 1.0
    return unit_of(returned, truth)


def grader_time(before: float, after: float) -> float:
    """The grader's own time of the real jitted function: its medians before and after the harness ran."""
    return float(np.sqrt(before * after))


def unit_of(returned: float, truth: float) -> float:
    """The factor between what the harness returned and the truth in seconds: 1 when within 2x."""
    ratio = float(returned) / truth if truth and returned > 0 else 1.0
    return 1.0 if 0.5 <= ratio <= 2.0 else ratio


def _harness_ratio(s: Observations, run: str, what: str, *, low: float, high: float, reason,
                   unit: float = 1.0) -> dict:
    returned = _seconds(s, KEYS.result(run=run), what)
    truth = s.value(KEYS.truth(run=run))
    arrivals = s.value(ARRIVALS)
    start, end = KEYS.start(run=run), KEYS.truth(run=run)
    elapsed = arrivals[end] - arrivals[start] if s.has(start) and s.has(end) else None
    timing.expect_plausible(truth, elapsed, what=what)
    real = truth["truth"]
    ratio = (returned / unit) / real if real else float("inf")
    measured = {"returned_s": returned, "unit_factor": unit, "truth_s": real, "ratio": ratio,
                "calls": truth["calls"], "expected_calls": truth["expected_calls"]}
    if not (low <= ratio <= high):
        raise Fail(T("harness.ratio", what=what, returned=returned / unit, truth=real, ratio=ratio, reason=reason),
                   measured)
    return measured


@check("time_call.seconds")
def time_call_seconds(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    return _harness_ratio(s, "seconds", "time_call(fn, warmup=1)", low=0.5, high=2.0, reason=T("harness.units"))


@check("time_call.waits")
def time_call_waits(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    return _harness_ratio(s, "waits", "time_call(async fn)", low=0.5, high=3.0, reason=T("harness.no_wait"),
                          unit=_unit_factor(s))


@check("time_call.warmup")
def time_call_warmup(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    inp = ctx.inputs
    what = f"time_call(fn, warmup={inp['warmup_n']}, iters={inp['warmup_iters']})"
    return _harness_ratio(s, "warmup", what, low=0.5, high=2.5,
                          reason=T("harness.timed_warmup", warmup=inp["warmup_slow"]), unit=_unit_factor(s))


@check("time_call.median")
def time_call_median(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    inp = ctx.inputs
    what = f"time_call(fn, iters={inp['outlier_iters']})"
    outlier = inp["duration"] * inp["outlier_factor"]
    return _harness_ratio(s, "median", what, low=0.5, high=2.0, reason=T("harness.outlier", outlier=outlier),
                          unit=_unit_factor(s))


@check("time_call.call_count")
def time_call_call_count(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    runs = [("seconds", 1, ctx.inputs["iters"])] + [(f"count{i}", w, n) for i, (w, n) in
                                                    enumerate(ctx.inputs["counts"])]
    measured = {}
    for run, warmup, iters in runs:
        s.result(KEYS.result(run=run))
        truth = s.value(KEYS.truth(run=run))
        what = f"time_call(fn, warmup={warmup}, iters={iters})"
        measured[what] = truth["calls"]
        if truth["calls"] != warmup + iters:
            raise Fail(T("harness.calls", what=what, calls=truth["calls"], expected=warmup + iters), measured)
        if truth["bad_args"]:
            raise Fail(T("harness.args", what=what, bad=truth["bad_args"]), measured)
    return measured


@check("time_call.jax_async", depends=("time_call.waits",))
def time_call_jax_async(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    what = "time_call(jax.jit(f), a)"
    call = s.call(KEYS.result(run="jax"))
    if call["status"] == "raised" and "block_until_ready" in str(call.get("message", "")):
        from grader.checks import raised_text  # out.block_until_ready() on a pytree: the mistake itself

        raise Fail(raised_text(call), {"exception": call.get("type")})
    returned = _seconds(s, KEYS.result(run="jax"), what) / _unit_factor(s)
    truth = s.value(KEYS.truth(run="jax"))
    grader = grader_time(truth["before"], truth["after"])
    ratio = returned / grader if grader else float("inf")
    measured = {"returned_s": returned, "grader_s": grader, "ratio": ratio, "matrix": truth["n"],
                "attempts": truth.get("attempts", 1)}
    if not (JAX_AGREES[0] <= ratio <= JAX_AGREES[1]):
        first = truth.get("first_leaf")
        if ratio < JAX_AGREES[0] and first and returned <= 3 * first:  # the time of the quick first output
            raise Fail(T("harness.first_output", what=what, returned=returned, truth=grader, first=first),
                       {**measured, "first_leaf_s": first}, hint="first_output")
        raise Fail(T("harness.jax", what=what, returned=returned, truth=grader, ratio=ratio), measured)
    return measured


@check("speedup.value")
def speedup_value(s: Observations, r: Observations, ctx: CheckContext) -> dict:
    what = "speedup(eager_fn, jit_fn)"
    returned = _seconds(s, KEYS.result(run="speedup"), what)
    truth = s.value(KEYS.truth(run="speedup"))
    real = truth["eager"]["truth"] / truth["jit"]["truth"]
    ratio = returned / real
    measured = {"returned": returned, "truth": real, "ratio": ratio}
    if not (0.6 <= ratio <= 1.6):
        raise Fail(T("harness.speedup", what=what, returned=returned, truth=real), measured)
    return measured
