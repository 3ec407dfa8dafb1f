"""Exercise 5, a correct timing harness: hidden inputs, probe and checks.

The student's ``time_call`` times instruments whose every call costs what the grader
scheduled, each call's record held to the grader's own clock
(:class:`grader.primitives.instrument.Instrument`): results that finish only when
waited on, slow first calls, timed calls that vary (fast ones, a spread, slow ones:
the minimum, the maximum, the mean and every trimmed mean stand apart from the
median on every seed), exact call counts, and a real jitted function. Each practice
of the chapter's section 4 has its own check, and only the median check judges which
statistic a harness takes (the others accept any figure within the range of the calls
it timed, so that a wrong statistic costs one check whatever noise the machine adds).
"""
from __future__ import annotations

from typing import Any, TypedDict, cast

import numpy as np

from grader.checks import ARRIVALS, CheckContext, Fail, Keys, Records, check
from grader.child.probe import ProbeContext
from grader.i18n import T
from grader.primitives import instrument
from grader.primitives.instrument import Schedule

from .jitted import JAX_AGREES, jax_agrees, time_a_jitted_function

KEYS = Keys(
    result="{run}/result", truth="{run}/truth", start="{run}/start", done="{run}/call{i}",
    waited="{run}/call{i}/waited"
)
#: how far a harness's seconds may be from the calls it timed (a ratio): what ``time_call.seconds`` accepts
SECONDS_AGREE = (0.5, 2.0)
#: how far a harness's median may be from the grader's (a ratio): what ``time_call.median`` accepts
MEDIAN_AGREES = (0.5, 2.0)
#: the median run's timed calls, as factors of the median call: (role, how many, lowest, highest).
#: Two calls far below the median (the minimum stays far below it, even if one is delayed), one
#: just above it (a correct median stays near it, even if a lower call is delayed), and three
#: slow calls that every mean trimmed by less than a third at each end still holds
SPREAD = (("fast", 2, 0.02, 0.08), ("below", 2, 0.6, 0.9), ("median", 1, 1.0, 1.0), ("above", 1, 1.05, 1.25),
          ("slow", 3, 10.0, 13.0))
#: the median's run and its runs again: one more while what the harness returned lies within the ranges of
#: two statistics of the calls (:func:`grader.primitives.instrument.run_told_apart`: a loaded machine stretched
#: the spans), up to three; the check judges the first run that tells them apart (at load 6 to 7 on two
#: cores, a batch once took a trimmed mean for the median, given the benefit of the doubt)
MEDIAN_RUNS = ("median", "median1", "median2")


#: the words for each wrong statistic (:func:`grader.primitives.instrument.statistics_of`)
STATISTIC_WORDS = {"min": "harness.stat.min", "max": "harness.stat.max", "mean": "harness.stat.mean",
                   "trimmed": "harness.stat.trimmed"}


# =========================================================================== hidden inputs
class Inputs(TypedDict):
    """The hidden inputs, as ``inputs(rng)`` draws them and the probe and the checks read them (:func:`plan`)."""

    duration: float
    iters: int
    warmup_n: int
    warmup_iters: int
    warmup_slow: float
    spread: list[float]
    #: (warmup, iters) of each call-count run
    counts: list[list[int]]
    eager_factor: float
    matrix_seed: int
    jax_min_s: float


def inputs(rng: np.random.Generator) -> Inputs:
    duration = float(rng.uniform(0.004, 0.006))
    return {
        # a few milliseconds of work a call: long enough to time, short enough to grade quickly
        "duration": duration,
        "iters": int(rng.integers(5, 8)),
        "warmup_n": 4,
        "warmup_iters": 3,
        # twelve times a measured call: a harness that times the warm-up returns one of these, told from the
        # measured calls' until the machine makes them this long (:func:`warmup_ceiling`; a loaded CI run
        # stretched one to 24 ms: not half as long would tell them apart)
        "warmup_slow": float(rng.uniform(0.055, 0.065)),
        "spread": spread(rng, duration),
        "counts": [[0, 3], [int(rng.integers(2, 4)), int(rng.integers(2, 5))]],
        "eager_factor": float(rng.uniform(2.5, 4.0)),
        "matrix_seed": int(rng.integers(0, 2**31 - 1)),
        # the real jitted function's fastest call: 2 ms, 30 to 45 times what a harness that does not wait
        # measures (JAX's dispatch, 40-70 us here), and half the CPU of the 4 ms it was (every call counts)
        "jax_min_s": 0.002,
    }


def spread(rng: np.random.Generator, median: float) -> list[float]:
    """The median run's costs: a warm-up call, then the timed calls of :data:`SPREAD` in a random order."""
    timed = [median * float(rng.uniform(low, high)) for _, n, low, high in SPREAD for _ in range(n)]
    return [median] + [timed[i] for i in rng.permutation(len(timed))]


def plan(inp: Inputs) -> dict[str, Schedule]:
    """Every instrumented run: what its calls cost and how the harness is asked to time it."""
    d, iters = inp["duration"], inp["iters"]
    return {
        "seconds": Schedule(d, 1, iters),
        "waits": Schedule(d, 1, iters, asynchronous=True),
        "warmup": Schedule(d, inp["warmup_n"], inp["warmup_iters"], costs=(inp["warmup_slow"],) * inp["warmup_n"]),
        **{run: Schedule(d, 1, len(inp["spread"]) - 1, costs=tuple(inp["spread"])) for run in MEDIAN_RUNS},
        **{f"count{i}": Schedule(d / 4, warmup, n) for i, (warmup, n) in enumerate(inp["counts"])},
        "eager": Schedule(d * inp["eager_factor"], 1, iters),
        "jit": Schedule(d, 1, iters),
    }


# =========================================================================== probe (child)
def probe(ctx: ProbeContext[Inputs]) -> None:
    from grader.primitives.instrument import Instrument

    inp = ctx.inputs
    runs = plan(inp)
    args = (np.zeros(3, np.float32), "arg")  # passed through *args; the instrument checks identity

    def instrumented(name: str, seen: list | None = None) -> Instrument:
        # the run starts on the grader's clock, and each call's record leaves as the call ends: no
        # harness holds a record of its calls, and every one is held to the grader's clock
        def done(i: int, record: dict) -> None:
            ctx.record(KEYS.done(run=name, i=i), record)
            if seen is not None:
                seen.append(record)

        return Instrument(runs[name], expected_args=args, start=lambda: ctx.mark(KEYS.start(run=name)), done=done,
                          waited=lambda i, record: ctx.record(KEYS.waited(run=name, i=i), record))

    def run(name: str, seen: list | None = None) -> tuple[Any, float]:
        """The harness's figure of run ``name``, and when it returned (seconds from the run's start)."""
        timed = instrumented(name, seen)
        got = ctx.call(KEYS.result(run=name), "time_call", timed, *args, warmup=runs[name].warmup,
                       iters=runs[name].iters)
        return got, timed.since_start()

    # two jobs share the probe, side by side (exercise.toml's parts = 2), each sleeping in the instruments
    # about 0.35 s; the real jitted function, whose calls keep a core busy 0.1 s, comes last in the second,
    # once the first has slept its runs out (its CPU would delay their calls' wake-ups: a jitted call of
    # the speed-up's run, woken 30 ms late, once let an inverted ratio pass)
    if ctx.does(0):
        for name in ("seconds", "waits", "warmup", *(f"count{i}" for i in range(len(inp["counts"])))):
            run(name)
    if ctx.does(1):
        for name in MEDIAN_RUNS:
            seen: list[dict] = []
            if instrument.run_told_apart(runs[name], *run(name, seen), seen):
                break
        ctx.call(KEYS.result(run="speedup"), "speedup", instrumented("eager"), instrumented("jit"), *args,
                 warmup=runs["jit"].warmup, iters=runs["jit"].iters)
        # a real jitted function on JAX's asynchronous dispatch, sized to take a couple of milliseconds
        if not ctx.attempted("time_call", lambda: None, warmup=0, iters=1):
            ctx.record(KEYS.result(run="jax"), {"status": "not_attempted", "function": "time_call"})
            ctx.record(KEYS.truth(run="jax"), {})
        else:
            _time_a_jitted_function(ctx, inp, inp["iters"])


def _time_a_jitted_function(ctx: ProbeContext[Inputs], inp: Inputs, iters: int) -> None:
    """The real jitted function's run (:func:`.jitted.time_a_jitted_function`), recorded."""
    outcome, truth = time_a_jitted_function(ctx, inp["matrix_seed"], inp["jax_min_s"], iters)
    ctx.record(KEYS.result(run="jax"), outcome)
    ctx.record(KEYS.truth(run="jax"), truth)


# =========================================================================== checks (grader)
def _seconds(s: Records, key: str, what: str) -> float:
    """The harness's return value, which must be a float (a NumPy float is one too)."""
    got = s.result(key)
    if got.get("t") == "scalar" and got.get("type") == "float":
        return float(got["value"])
    if got.get("t") == "array" and str(got.get("type", "")).startswith("numpy.float") \
            and np.asarray(got["value"]).shape == ():
        return float(got["value"])
    kind = got.get("type") or got.get("t")
    raise Fail(T("harness.not_float", what=what, type=kind), {"type": kind})


def _unit_factor(s: Records, ctx: CheckContext[Inputs]) -> float:
    """How far the harness's unit is from seconds (1000 for milliseconds); 1 when right.

    Measured once, by "seconds", and divided out of the other checks so that one
    mistake costs one check.
    """
    try:
        returned = _seconds(s, KEYS.result(run="seconds"), "time_call")
        calls, real, works = _observed(s, ctx, "seconds", "time_call")
    except Exception:  # noqa: BLE001 - judged by the seconds check itself
        return 1.0
    lowest, highest = _bounds(s, ctx, "seconds", calls, real, works)
    # (lowest and highest are None only where real is: not reached then)
    if not real or not works \
            or SECONDS_AGREE[0] * cast(float, lowest) <= returned <= SECONDS_AGREE[1] * cast(float, highest):
        return 1.0  # what the seconds check accepts: no unit to divide out
    return unit_of(returned, real)


def grader_time(before: float, after: float) -> float:
    """The grader's own time of the real jitted function: its medians before and after the harness ran."""
    return float(np.sqrt(before * after))


def unit_of(returned: float, truth: float) -> float:
    """The factor between what the harness returned and the truth in seconds: 1 when within 3x.

    A unit mistake is far from 1 (1000 for milliseconds, ``iters`` for a total); a noisy
    measure is not divided out of every other check.
    """
    ratio = float(returned) / truth if truth and returned > 0 else 1.0
    return 1.0 if 1 / 3 <= ratio <= 3.0 else ratio


def _observed(s: Records, ctx: CheckContext[Inputs], run: str, what: str) -> tuple[list, float | None, list[float]]:
    """The calls of ``run`` (each record held to the grader's clock and schedule), the median the
    harness should have returned, and the work of each call it should have timed."""
    schedule = plan(ctx.inputs)[run]
    calls = instrument.observed_calls(s, KEYS.start, KEYS.done, run, schedule, KEYS.waited)
    instrument.expect_trustworthy(calls, schedule, what=what)
    return calls, instrument.truth(calls, schedule), instrument.timed_works(calls, schedule)


def _spans(s: Records, ctx: CheckContext[Inputs], run: str, calls: list) -> list[float]:
    """The longest each timed call of ``run`` may have looked on the harness's clock
    (:func:`grader.primitives.instrument.timed_spans`): up to the next call, or to the moment
    the grader read the harness's result."""
    arrivals = s.value(ARRIVALS)
    start, result = KEYS.start(run=run), KEYS.result(run=run)
    returned = arrivals[result] - arrivals[start] if start in arrivals and result in arrivals else None
    return instrument.timed_spans(calls, plan(ctx.inputs)[run], returned)


def _bounds(s: Records, ctx: CheckContext[Inputs], run: str, calls: list, real: float | None, works: list[float],
            statistic: bool = False) -> tuple[float | None, float | None]:
    """What a harness's figure of ``run`` is held between (before the check's tolerance): where the
    median of its samples lies (``statistic``: :func:`grader.primitives.instrument.median_range`),
    else the fastest work up to the longest span."""
    if not works:
        return real, real
    spans = _spans(s, ctx, run, calls)
    return instrument.median_range(works, spans) if statistic else (min(works), max(spans))


def warmup_ceiling(calls: list, schedule: Schedule, spans: list[float]) -> float | None:
    """The most a harness that timed only the measured calls of the warm-up run can have returned:
    the geometric mean of the longest span of those calls and the shortest work of a warm-up call.

    Any statistic of samples each within its call's span is at most the longest span; a harness
    that timed the slow warm-up calls (4 of 7 calls) returns about one of them, and is nearer
    their work than the measured calls' spans. The tolerance of :func:`_harness_ratio` alone
    (2.5 times the longest span) lets it pass once a loaded machine stretches one measured call's
    span to 40% of a warm-up call (it passed in the CI run of 2026-12-05, two test runs on two cores).
    ``None`` where a span is as long as a warm-up call: nothing tells them apart."""
    warm = [c.work for c in calls[:schedule.warmup] if c.work is not None]
    if not warm or not spans or max(spans) >= min(warm):
        return None
    return float(np.sqrt(max(spans) * min(warm)))


def _harness_ratio(s: Records, ctx: CheckContext[Inputs], run: str, what: str, *, low: float, high: float, reason,
                   unit: float = 1.0, statistic: bool = False, warmup: bool = False) -> dict:
    """The harness's figure against the work of the calls it timed, within ``low`` and ``high`` times it.

    Only the median check (``statistic``) holds the figure to the median, and to be nearer the
    median of the calls than any other statistic of them; the others accept any figure between
    the fastest and the slowest of those calls (give or take their tolerance): which statistic a
    harness takes is judged once, on calls made to tell statistics apart, not again on calls
    that differ only by the machine's noise. For the warm-up run (``warmup``) the figure is
    also held below :func:`warmup_ceiling`.
    """
    returned = _seconds(s, KEYS.result(run=run), what)
    calls, real, works = _observed(s, ctx, run, what)
    ratio = (returned / unit) / real if real else float("inf")
    lowest, highest = _bounds(s, ctx, run, calls, real, works, statistic)
    schedule = plan(ctx.inputs)[run]
    measured: dict[str, Any] = {"returned_s": returned, "unit_factor": unit, "truth_s": real, "ratio": ratio,
                "calls": len(calls), "expected_calls": schedule.warmup + schedule.iters}
    spans = _spans(s, ctx, run, calls) if works else []
    nearest = instrument.nearest_statistic(returned / unit, works, spans) if statistic and works else ("median", real)
    if not statistic and works:
        measured.update(fastest_s=lowest, slowest_s=highest)
    if statistic:
        measured.update(nearest=nearest[0], truth_span_s=highest)
    ceiling = warmup_ceiling(calls, schedule, spans) if warmup else None
    if ceiling is not None:
        measured["warmup_ceiling_s"] = ceiling
    lowest, highest = cast(float, lowest), cast(float, highest)  # None only where real is: not reached then
    if not real or not (low * lowest <= returned / unit <= min(high * highest, ceiling or float("inf"))) \
            or nearest[0] != "median":
        why = reason(nearest, works) if callable(reason) else reason
        raise Fail(T("harness.ratio", what=what, returned=returned / unit, truth=real or 0.0, ratio=ratio, reason=why),
                   measured)
    return measured


@check("time_call.seconds")
def time_call_seconds(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    return _harness_ratio(s, ctx, "seconds", "time_call(fn, warmup=1)", low=SECONDS_AGREE[0],
                          high=SECONDS_AGREE[1], reason=T("harness.units"))


@check("time_call.waits")
def time_call_waits(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    return _harness_ratio(s, ctx, "waits", "time_call(async fn)", low=0.5, high=3.0, reason=T("harness.no_wait"),
                          unit=_unit_factor(s, ctx))


@check("time_call.warmup")
def time_call_warmup(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    inp = ctx.inputs
    what = f"time_call(fn, warmup={inp['warmup_n']}, iters={inp['warmup_iters']})"
    return _harness_ratio(s, ctx, "warmup", what, low=0.5, high=2.5,
                          reason=T("harness.timed_warmup", warmup=inp["warmup_slow"]), unit=_unit_factor(s, ctx),
                          warmup=True)


@check("time_call.median")
def time_call_median(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    schedule = plan(ctx.inputs)["median"]
    what = f"time_call(fn, iters={schedule.iters})"

    def reason(nearest: tuple[str, float], works: list[float]):
        name, value = nearest
        spread = {"fastest": min(works or schedule.timed()), "slowest": max(works or schedule.timed())}
        if name == "median":
            return T("harness.spread_far", **spread)
        kind = "trimmed" if name.startswith("trimmed") else name
        return T("harness.spread", **spread, value=value,
                 statistic=T(STATISTIC_WORDS[kind], cut=int(name[len("trimmed"):]) if kind == "trimmed" else 0))

    unit = _unit_factor(s, ctx)
    made = [MEDIAN_RUNS[0], *(run for run in MEDIAN_RUNS[1:] if s.made(KEYS.result(run=run)))]
    judged = next((run for run in made if _median_told_apart(s, ctx, run, unit)), made[0])
    which = {"runs": len(made), "judged_run": made.index(judged) + 1} if len(made) > 1 else {}
    try:
        return {**_harness_ratio(s, ctx, judged, what, low=MEDIAN_AGREES[0], high=MEDIAN_AGREES[1], reason=reason,
                                 unit=unit, statistic=True), **which}
    except Fail as failed:
        if isinstance(failed.measured, dict):
            failed.measured.update(which)
        raise


def _median_told_apart(s: Records, ctx: CheckContext[Inputs], run: str, unit: float) -> bool:
    """Whether run ``run``'s records, by the grader's clock, say which statistic the harness returned
    (:func:`grader.primitives.instrument.told_apart`); ``True`` where the run is judged otherwise (no
    float returned, no calls)."""
    try:
        returned = _seconds(s, KEYS.result(run=run), "time_call")
        calls, _, works = _observed(s, ctx, run, "time_call")
    except Exception:  # noqa: BLE001 - the check's own judgement says what is wrong with the run
        return True
    return not works or instrument.told_apart(returned / unit, works, _spans(s, ctx, run, calls))


@check("time_call.call_count")
def time_call_call_count(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    runs = plan(ctx.inputs)
    measured = {}
    for run in ("seconds", *(f"count{i}" for i in range(len(ctx.inputs["counts"])))):
        s.result(KEYS.result(run=run))
        schedule = runs[run]
        warmup, iters = schedule.warmup, schedule.iters
        calls = instrument.observed_calls(s, KEYS.start, KEYS.done, run, schedule, KEYS.waited)
        what = f"time_call(fn, warmup={warmup}, iters={iters})"
        measured[what] = len(calls)
        if len(calls) != warmup + iters:
            raise Fail(T("harness.calls", what=what, calls=len(calls), expected=warmup + iters), measured)
        bad = sum(1 for c in calls if not c.args_ok)
        if bad:
            raise Fail(T("harness.args", what=what, bad=bad), measured)
    return measured


@check("time_call.jax_async", depends=("time_call.waits",))
def time_call_jax_async(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    what = "time_call(jax.jit(f), a)"
    call = s.call(KEYS.result(run="jax"))
    if call["status"] == "raised" and "block_until_ready" in str(call.get("message", "")):
        from grader.checks import raised_text  # out.block_until_ready() on a pytree: the mistake itself

        raise Fail(raised_text(call), {"exception": call.get("type")})
    returned = _seconds(s, KEYS.result(run="jax"), what) / _unit_factor(s, ctx)
    truth = s.value(KEYS.truth(run="jax"))
    grader = grader_time(truth["before"], truth["after"])
    ratio = returned / grader if grader else float("inf")
    fastest, slowest = truth.get("fastest", grader), truth.get("slowest", grader)
    measured = {"returned_s": returned, "grader_s": grader, "ratio": ratio, "fastest_s": fastest,
                "slowest_s": slowest, "rounds": truth.get("rounds"), "attempts": truth.get("attempts", 1)}
    first = truth.get("first_leaf")
    if grader and jax_agrees(returned, fastest, slowest):
        return measured  # within the grader's own calls: it waited for the work (its statistic is the median check's)
    if ratio < JAX_AGREES[0] and first and returned <= 3 * first:  # the time of the quick first output
        raise Fail(T("harness.first_output", what=what, returned=returned, truth=grader, first=first),
                   {**measured, "first_leaf_s": first}, hint="first_output")
    raise Fail(T("harness.jax", what=what, returned=returned, truth=grader, ratio=ratio), measured)


#: how many times as long as each jitted call every eager call is scheduled to work (by the inputs, at least
#: 2.5) for a speed-up under 1 to read as upside down
INVERTED_FACTOR = 2.0
#: ... and the least eager-over-jitted ratio of the calls' median works (a loaded machine adds to every sleep)
MEDIANS_AGREE = 1.5


@check("speedup.value")
def speedup_value(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    what = "speedup(eager_fn, jit_fn)"
    returned = _seconds(s, KEYS.result(run="speedup"), what)
    runs = plan(ctx.inputs)
    # each side's median and range (a side the harness timed no call of: its work as the grader scheduled it)
    (eager_calls, eager, eager_works), (jitted_calls, jitted, jitted_works) = (
        _observed(s, ctx, run, what) for run in ("eager", "jit"))
    # (one result for both sides, read after both: each side's last timed call counts its work alone)
    eager_spans = _spans(s, ctx, "eager", eager_calls) or [runs["eager"].default]
    jitted_spans = _spans(s, ctx, "jit", jitted_calls) or [runs["jit"].default]
    eager_works, jitted_works = eager_works or [runs["eager"].default], jitted_works or [runs["jit"].default]
    real = (eager or runs["eager"].default) / (jitted or runs["jit"].default)
    ratio = returned / real
    # as for the other checks, any statistic of the calls: from the fastest eager over the slowest jitted call
    # to the slowest eager over the fastest jitted one (each call as long as its span on the harness's clock)
    lowest, highest = min(eager_works) / max(jitted_spans), max(eager_spans) / min(jitted_works)
    measured = {"returned": returned, "truth": real, "ratio": ratio, "lowest": lowest, "highest": highest}
    # the grader schedules every eager call to work at least INVERTED_FACTOR times as long as every jitted one,
    # and the medians of the calls as they ran agree: a figure under 1 is the ratio upside down, whatever
    # statistic the harness took (a jitted call woken late on a loaded machine stretches its span, its work
    # and the bounds below with it, far enough for the inverted ratio to pass)
    # and the medians of the calls as they ran agree, a figure under 1 is the ratio upside down, unless a
    # statistic taken the right way up explains it better: the slowest eager call over the slowest jitted one
    # is under 1 when one jitted call was preempted (a harness that takes the maximum is wrong in
    # time_call.median, not here)
    inverted = returned < 1 and runs["eager"].default >= INVERTED_FACTOR * runs["jit"].default \
        and real >= MEDIANS_AGREE and instrument.upside_down(returned, eager_spans, jitted_spans)
    measured["upside_down"] = inverted
    if inverted or not (0.6 * lowest <= returned <= 1.6 * highest):
        raise Fail(T("harness.speedup", what=what, returned=returned, truth=real), measured)
    return measured
