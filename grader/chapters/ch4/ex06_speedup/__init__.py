"""Exercise 6, speed-up in practice: hidden inputs, probe, timing driver and checks.

``fast_heavy`` (the jitted provided ``heavy``) and a vectorised, jitted ``layer_norm``
must match the eager versions, keep ``eps`` dynamic, and be faster than the grader's
own copy of the provided eager code by a fraction of the reference's gain, measured in
the same run, the two processes timed in turn (:func:`drive`). In a student release's
preview (no reference process), the gain is judged against the bar the instructor sets
in the chapter (``[release_speedup_bar]`` of ``chapter.toml``), and the check is marked as decided at final grading.

The grader holds no layer norm of its own (a vectorised one is the exercise's answer):
the float64 values ``layer_norm`` is compared with are recorded by the reference's
process, from the reference module's own float64 helper (:data:`FLOAT64_REFERENCE`).
"""
from __future__ import annotations

from typing import TypedDict

import numpy as np

from grader.chapters.ch4.common import F32
from grader.checks import (NAMES, TIMING, CheckContext, Fail, GraderError, Keys, Pass, Records, check, exception_hint,
                           raised_text)
from grader.child.probe import ProbeContext
from grader.i18n import T
from grader.primitives import compiles, numeric, structure, timing
from grader.primitives.guards import attempted, returned
from grader.primitives.placing import put

from .driver import HEAVY_SIZES, LN_SIZES
from .driver import drive as drive  # the exercise's timing driver (TimedPackage)

KEYS = Keys(
    value="{name}/values/{i}", eager_heavy="heavy/eager/{i}", student_heavy="heavy/student",
    window="layer_norm/compiles", window_call="layer_norm/compiles/{i}", program="{name}/program",
    expected64="layer_norm/float64/{i}", repeat="{name}/repeated", warmed="{name}/timing_warmup",
    # the provided eager heavy's values and the float64 layer norm are the grader's own code, read
    # from the reference's run only: the student's job does not compute them; and they are all the
    # checks read from it (a fast_heavy's values are compared with the eager heavy's, a layer_norm's
    # with the float64 one's): its job calls nothing else of the module's but what it times
    reference=("eager_heavy", "expected64"), reference_only=("eager_heavy", "expected64"),
)
#: calls of each function with the same inputs after a first one, counted for compiles: a function
#: that makes a new jax.jit on every call compiles on every one of them (an eager one, on none)
REPEATS = 3
#: the reference module's float64 layer norm (NumPy), whose values layer_norm is judged against;
#: a student's module has none (the probe calls it only where it exists)
FLOAT64_REFERENCE = "_layer_norm_float64"


# =========================================================================== hidden inputs
def _heavy_args(rng: np.random.Generator, n: int, d: int, h: int) -> list[np.ndarray]:
    return [rng.normal(size=(n, d)).astype(F32), (rng.normal(size=(d, h)) * 0.05).astype(F32),
            rng.normal(scale=0.1, size=(h,)).astype(F32)]


def _ln_args(rng: np.random.Generator, n: int, d: int) -> list[np.ndarray]:
    # each row a mean of its own: a normalisation over the whole array, not each row, differs
    x = rng.normal(loc=rng.uniform(-1.0, 2.0, size=(n, 1)), scale=2.0, size=(n, d))
    return [x.astype(F32), rng.uniform(0.5, 1.5, size=d).astype(F32), rng.normal(scale=0.1, size=d).astype(F32)]


class LayerNormCase(TypedDict):
    """One layer_norm case: its arguments (x, gamma, beta) and its eps."""

    args: list[np.ndarray]
    eps: float


class Inputs(TypedDict):
    """The hidden inputs, as ``inputs(rng)`` draws them and the probe and the checks read them (the probe's may
    carry :data:`grader.primitives.timing.PREPARE` besides: :func:`~grader.primitives.timing.prepares`)."""

    #: fast_heavy's arguments (x, w, b) of each case
    heavy_values: list[list[np.ndarray]]
    ln_values: list[LayerNormCase]
    #: layer_norm's arguments in its compile window, one call per eps
    ln_compile: list[np.ndarray]
    ln_eps: list[float]
    #: the timing cases' arguments, by size (:data:`HEAVY_SIZES`, :data:`LN_SIZES`)
    heavy_sizes: dict[str, list[np.ndarray]]
    ln_sizes: dict[str, list[np.ndarray]]


def inputs(rng: np.random.Generator) -> Inputs:
    return {
        "heavy_values": [_heavy_args(rng, *size) for size in ((4, 16, 32), (33, 64, 17))],
        "ln_values": [{"args": _ln_args(rng, 5, 48), "eps": 1e-5}, {"args": _ln_args(rng, 12, 7), "eps": 1e-3}],
        "ln_compile": _ln_args(rng, 6, 24),
        "ln_eps": [1e-5, float(rng.uniform(1e-4, 1e-2))],
        "heavy_sizes": {k: _heavy_args(rng, *v) for k, v in HEAVY_SIZES.items()},
        "ln_sizes": {k: _ln_args(rng, *v) for k, v in LN_SIZES.items()},
    }


def regimes(inp: Inputs) -> dict[str, bool]:
    """What the contract tells apart, present in these inputs (tests/test_input_coverage.py)."""
    # dividing by sqrt(var + eps) instead of sqrt(var) changes a row by about eps / (2 var): beyond
    # the check's tolerance (1e-5) where that is well above it (the grader holds no layer norm)
    effect = [c["eps"] / (2 * np.var(c["args"][0].astype(np.float64), axis=-1).min()) for c in inp["ln_values"]]
    return {
        # eps is dynamic and changes the values: its default and another value, beyond the tolerance
        "eps 1e-5 and another eps": {c["eps"] for c in inp["ln_values"]} > {1e-5},
        "eps changes a value beyond the tolerance": max(effect) > 1e-4,
        "two eps values in the compile window": len(set(inp["ln_eps"])) == 2,
        # rows of other means: a normalisation over the whole array (not each row) differs
        "rows of different means": all(np.ptp(c["args"][0].mean(axis=1)) > 0.05 for c in inp["ln_values"]),
        "heavy: rows, inputs and hidden units differ": all(len({x.shape[0], x.shape[1], w.shape[1]}) == 3
                                                           for x, w, _ in inp["heavy_values"]),
    }


# =========================================================================== probe (child)
def probe(ctx: ProbeContext[Inputs]) -> None:
    from grader.chapters.ch4 import provided

    # every call gets inputs of its own, placed anew: a layer_norm that donates its input
    # (donate_argnums) deletes what it was given, and nothing given is ever used again
    inp = ctx.inputs
    for i, case in enumerate(inp["heavy_values"]):
        ctx.call(KEYS.value(name="fast_heavy", i=i), "fast_heavy", *put(case))
        if ctx.wants(KEYS.eager_heavy(i=i)):  # the reference's run only (Keys(reference_only=...))
            ctx.record(KEYS.eager_heavy(i=i), np.asarray(provided.heavy(*put(case))))
    ctx.call(KEYS.student_heavy(), "heavy", *put(inp["heavy_values"][0]))  # the module's own copy, unchanged?
    for i, ln in enumerate(inp["ln_values"]):
        ctx.call(KEYS.value(name="layer_norm", i=i), "layer_norm", *put(ln["args"]), eps=ln["eps"])
        reference64 = ctx.get(FLOAT64_REFERENCE)
        if reference64 is not None:  # the reference's process: the expected values, as plain data
            made = ctx.invoke(reference64, FLOAT64_REFERENCE, *ln["args"], ln["eps"]).record
            ctx.record(KEYS.expected64(i=i), made.get("value") or {"t": "object", "type": made["status"]})
    fresh = [put(inp["ln_compile"]) for _ in inp["ln_eps"]]
    with ctx.compiles(KEYS.window()):
        for i, (eps, args) in enumerate(zip(inp["ln_eps"], fresh)):
            ctx.call(KEYS.window_call(i=i), "layer_norm", *args, eps=eps)
    # what the jitted programs hold (host callbacks, say), and whether each call compiles anew
    anew = set()
    for name, args in (("fast_heavy", inp["heavy_values"][0]), ("layer_norm", inp["ln_values"][0]["args"])):
        fn = ctx.get(name)
        if fn is not None and ctx.wants(KEYS.program(name=name)):  # the student's job's (not the reference's)
            ctx.announce(name)
            ctx.record(KEYS.program(name=name), structure.program_size(fn, *put(args)))
            ctx.invoke(fn, name, *put(args))  # whatever a first call compiles, once; then the calls that follow
            fresh = [put(args) for _ in range(REPEATS)]
            with ctx.compiles(KEYS.repeat(name=name), fresh=False) as seen:
                for placed in fresh:
                    ctx.invoke(fn, name, *placed)
            if seen.get("count", 0) >= REPEATS:
                anew.add(name)

    # timing: the grader's own eager code against the student's function, on each candidate size, compiled the
    # default way (what came before was compiled quickly: quick_until_timed)
    ctx.timing_begins()
    cases: dict[str, timing.TimedCase] = {}
    for name, baseline, sizes in (("fast_heavy", provided.heavy, inp["heavy_sizes"]),
                                  ("layer_norm", provided.layer_norm_loop, inp["ln_sizes"])):
        candidate = ctx.get(name)
        if candidate is None or name in anew:  # compiled on every call: timing it would take the exercise's
            continue  # whole time limit, and its jitted check says why already
        warmed = {"status": "ok"}  # or the first call that failed before any timing, for the check to say
        for size, arrays in sizes.items():
            if not timing.prepares(inp, f"{name}/{size}"):
                continue  # another size was the clearest when every one was last timed here
            timed = _timing_case(ctx, name, candidate, baseline, arrays)
            if isinstance(timed, dict):
                warmed = timed if warmed["status"] == "ok" else warmed
            else:
                cases[f"{name}/{size}"] = timed
        ctx.record(KEYS.warmed(name=name), warmed)
    timing.serve_timing(ctx, cases)


def _timing_case(ctx, name: str, candidate, baseline, arrays: list) -> tuple | dict:
    """``(baseline, candidate, args, fresh)`` for :func:`grader.primitives.timing.serve_timing`,
    compiled and warmed up; ``fresh`` makes the candidate's inputs anew for each call when it
    donates them (``None`` when it does not). When a call fails, its record instead (the
    speed-up check says why there is no timing)."""
    import jax

    from grader.trusted import defined_at, safe_str

    def renew() -> tuple:
        return tuple(put(arrays))

    donated = False
    for _ in range(2):  # compile before any timing, on inputs of its own each time
        placed = renew()
        called = ctx.invoke(candidate, name, *placed)
        outcome = called.record
        if called.ok:
            try:
                jax.block_until_ready(called.result)
            except BaseException as exc:  # noqa: BLE001 - its work failed on the device
                outcome = {"status": "raised", "function": name, "type": type(exc).__name__,
                           "message": safe_str(exc), "where": None, "defined": defined_at(candidate, ctx.student_dir)}
        if outcome["status"] != "ok":
            return outcome
        donated = donated or any(isinstance(a, jax.Array) and a.is_deleted() for a in placed)
    args = renew()
    jax.block_until_ready(baseline(*args))
    return baseline, candidate, args, renew if donated else None


# =========================================================================== checks (grader)
def _jitted(s: Records, name: str) -> dict:
    attempted(s, KEYS.value(name=name, i=0))
    try:
        return structure.expect_jitted(s.value(NAMES(name=name)), name=name)
    except Fail as failure:  # not jitted: a jax.jit made anew inside, on every call, says so by its compiles
        repeated = s.value(KEYS.repeat(name=name)) if s.has(KEYS.repeat(name=name)) else {}
        if isinstance(repeated, dict) and repeated.get("count", 0) >= REPEATS:
            raise Fail(T("ch4.ex06.rejit", name=name, calls=REPEATS, compiles=repeated["count"]),
                       {**failure.measured, "compiles": repeated["count"], "calls": REPEATS}, hint="rejit") from None
        raise


@check("fast_heavy.jitted")
def fast_heavy_jitted(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    return _jitted(s, "fast_heavy")


@check("fast_heavy.values")
def fast_heavy_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    """Against the eager heavy, run by the grader's copy in the reference's process."""
    cases = [(KEYS.value(name="fast_heavy", i=i), f"fast_heavy(x: f32[{x.shape[0]},{x.shape[1]}], w, b)")
             for i, (x, w, b) in enumerate(ctx.inputs["heavy_values"])]

    def provided_changed(failures: list[numeric.CaseFailure]) -> str | None:
        """The student's own ``heavy`` no longer computes what the provided code does."""
        try:
            mine = numeric.as_array(s.result(KEYS.student_heavy()), what="heavy")
            return None if np.allclose(mine, r.value(KEYS.eager_heavy(i=0)), **tolerance) else "provided_changed"
        except Exception:  # noqa: BLE001 - no heavy of the student's to compare: not this mistake
            return None

    tolerance = numeric.on_device(ctx.device, rtol=2e-5, atol=1e-6)  # both sides' values on the same device
    return numeric.compare_calls(s, r, cases, expected=lambda key: r.value(KEYS.eager_heavy(i=key.rsplit("/", 1)[1])),
                                 dtype="float32", diagnose=provided_changed, **tolerance)


@check("layer_norm.jitted")
def layer_norm_jitted(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    return _jitted(s, "layer_norm")


@check("layer_norm.values")
def layer_norm_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    """Against the float64 layer norm recorded in the reference's process (:data:`FLOAT64_REFERENCE`)."""
    cases = ctx.inputs["ln_values"]
    labels = [(KEYS.value(name="layer_norm", i=i), f"layer_norm(x: f32[{c['args'][0].shape[0]},"
                                                   f"{c['args'][0].shape[1]}], gamma, beta, eps={c['eps']:g})")
              for i, c in enumerate(cases)]

    def expected(key: str) -> np.ndarray:
        made = r.value(KEYS.expected64(i=key.rsplit("/", 1)[1]))
        if made.get("t") != "array":
            raise GraderError(f"the reference's float64 layer norm gave {made.get('type')}, not an array")
        return np.asarray(made["value"])

    measured = numeric.compare_calls(s, r, labels, expected=expected, dtype="float32",
                                     **numeric.on_device(ctx.device, rtol=1e-5, atol=1e-5))
    return {**measured, "reference": "float64"}


@check("layer_norm.compiles", depends=("layer_norm.jitted",))
def layer_norm_compiles(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    eps = ctx.inputs["ln_eps"]
    returned(s, *(KEYS.window_call(i=i) for i in range(len(eps))))
    return compiles.expect(s.value(KEYS.window()), what=T("ch4.ex06.eps", values=", ".join(f"{e:g}" for e in eps)),
                           exactly=1)


def _speedup(s: Records, ctx: CheckContext[Inputs], name: str) -> Pass:
    results = s.value(TIMING)
    result = results.get(name)
    warmed = s.value(KEYS.warmed(name=name)) if s.has(KEYS.warmed(name=name)) else {}
    if result is None:  # a call failed before any timing (recorded), or the reference could not be timed
        if warmed.get("status") == "raised":
            raise Fail(T("speedup.no_measure", what=name, error=raised_text(warmed)), hint=exception_hint(warmed))
        why = T("ch4.ex06.untimed.reference") if results.get("error") == "reference" else T("ch4.ex06.untimed.other")
        raise Fail(T("speedup.no_measure", what=name, error=why))
    reference = result.get("reference")
    if reference is not None and "error" in reference and reference.get("speedup") is None:
        raise GraderError(f"the reference could not be timed: {reference['error']}")
    what = f"{name} [{result['case']}]"
    program = s.value(KEYS.program(name=name)) if s.has(KEYS.program(name=name)) else {}
    calls = program.get("host_calls") or []
    # how it was measured, in the report whether it passed or not
    how = {"case": result["case"], "calibration": result.get("calibration"), "phases_s": results.get("phases"),
           "method": {"rounds": result.get("rounds"), "reps_per_round": result.get("reps_per_round"),
                      "batches": result.get("batches"), "cpu_dispatch": "synchronous, one CPU"
                      if ctx.exercise.sync_cpu_dispatch else "default",
                      "sides": "in turn, each alone on a device that serves one process at a time"
                      if result.get("in_turn") else "alternating rounds"}}
    try:
        if ctx.preview:  # a release: no reference here, the chapter's bar over the provided eager code
            measured = timing.expect_speedup_over(result["student"], bar=_release_bar(ctx, name), what=what)
        else:
            measured = timing.expect_speedup(result["student"], reference, fraction=ctx.exercise.speedup_fraction,
                                             what=what)
    except Fail as failure:
        failure.measured = {**(failure.measured or {}), **how}
        if calls:  # slow, and why: the work goes back to the host on every call
            failure.message = [failure.message, T("ch4.ex06.host_calls", name=name, calls=", ".join(calls))]
            failure.measured["host_calls"] = calls
            failure.hint = "callback"
        raise
    if calls:  # the mistake all the same, whatever this device times: it costs more on an accelerator
        raise Fail(T("ch4.ex06.callback", name=name, calls=", ".join(calls), student=result["student"].get("speedup")),
                   {**measured, **how, "host_calls": calls}, hint="callback")
    measured.update(how)
    if ctx.preview:
        return Pass(T("release.speedup_passed", student=result["student"]["speedup"], bar=measured["bar"]), measured)
    return Pass(T("speedup.passed", student=result["student"]["speedup"], reference=reference["speedup"],
                  bar=measured["bar"]), measured)


def _release_bar(ctx: CheckContext[Inputs], name: str) -> float:
    """The speed-up over the provided eager code that a release's preview asks of ``name``."""
    bar = ctx.exercise.release_speedup_bar.get(name)
    if bar is None:
        raise GraderError(f"chapter.toml's [release_speedup_bar] sets no bar for {name}: add "
                          f"{ctx.exercise.id} = {{ {name} = ... }}")
    return bar


@check("fast_heavy.speedup", depends=("fast_heavy.jitted", "fast_heavy.values"))
def fast_heavy_speedup(s: Records, r: Records, ctx: CheckContext[Inputs]) -> Pass:
    return _speedup(s, ctx, "fast_heavy")


@check("layer_norm.speedup", depends=("layer_norm.jitted", "layer_norm.values"))
def layer_norm_speedup(s: Records, r: Records, ctx: CheckContext[Inputs]) -> Pass:
    return _speedup(s, ctx, "layer_norm")
