"""Exercise 4, shape recompiles and buckets: hidden inputs, probe and checks.

``bucket_length`` on 1..5000 against the reference's own values; ``masked_mean_sq`` on
random lengths that hit every bucket in every input type, at most one compile per
bucket over all its calls, whatever helper does the compiling.
"""
from __future__ import annotations

from typing import Any, Mapping, TypedDict

import numpy as np

from grader.checks import CheckContext, Fail, GraderError, Keys, Records, check
from grader.child.probe import ProbeContext
from grader.i18n import T
from grader.primitives import compiles, numeric
from grader.primitives.guards import any_attempted

KEYS = Keys(
    buckets="bucket_length/values", window="masked_mean_sq/compiles", value="masked_mean_sq/values/{i}",
    cores="masked_mean_sq/jitted_core",
    reference=("buckets", "value"),  # the reference's run gives the values compared: no compile window
)
BUCKETS = (8, 16, 32, 64, 128, 256, 512, 1024)
INPUT_KINDS = ("float32", "float64", "int32", "list")


# =========================================================================== hidden inputs
class Call(TypedDict):
    """One call of masked_mean_sq: its input's type (one of :data:`INPUT_KINDS`) and its data."""

    kind: str
    data: np.ndarray


class Inputs(TypedDict):
    """The hidden inputs, as ``inputs(rng)`` draws them and the probe and the checks read them."""

    #: bucket_length is called on every length up to this
    bucket_max: int
    #: masked_mean_sq's calls, in a drawn order
    calls: list[Call]


def inputs(rng: np.random.Generator) -> Inputs:
    calls = []
    # the range's ends, each in an input type of its own: a length of 1, and of 1024
    shortest, longest = rng.choice(len(INPUT_KINDS), size=2, replace=False)
    for k, kind in enumerate(INPUT_KINDS):
        low = 1
        lengths = []
        for bucket in BUCKETS:  # every bucket, in every input type
            lengths.append(int(rng.integers(low, bucket + 1)))
            low = bucket + 1
        if k == shortest:
            lengths[0] = 1
        if k == longest:
            lengths[-1] = BUCKETS[-1]
        # a length that is its own bucket (no padding), and any length
        lengths += [int(rng.choice(BUCKETS)), int(rng.integers(1, 1025))]
        for n in lengths:
            if kind == "int32":
                data = rng.integers(-50, 51, size=n).astype(np.int32)
            else:
                data = rng.normal(scale=2.0, size=n).astype(np.float64 if kind == "float64" else np.float32)
            calls.append({"kind": kind, "data": data})
    order = rng.permutation(len(calls))
    return {"bucket_max": 5000, "calls": [calls[i] for i in order]}


def regimes(inp: Inputs) -> dict[str, bool]:
    """What the contract tells apart, present in these inputs (tests/test_input_coverage.py)."""
    calls = inp["calls"]

    def bucket(n: int) -> int:
        return next(b for b in BUCKETS if b >= n)

    by_kind = {kind: [len(c["data"]) for c in calls if c["kind"] == kind] for kind in INPUT_KINDS}
    lengths = [n for ns in by_kind.values() for n in ns]
    return {
        # every bucket in every input type: a core that recompiles per dtype or per length shows
        "every bucket in every input type": all({bucket(n) for n in ns} == set(BUCKETS) for ns in by_kind.values()),
        # real elements and padding: a mean over the padding is wrong
        "padding needed in every input type": all(any(n != bucket(n) for n in ns) for ns in by_kind.values()),
        # the boundaries: a length that is its own bucket, below the floor of 8, 1 and 1024
        "a length equal to its bucket": any(n == bucket(n) for n in lengths),
        "a length below 8": any(n < 8 for n in lengths),
        "length 1": 1 in lengths,
        "length 1024": 1024 in lengths,
        "negative values in every input type": all(any(np.min(c["data"]) < 0 for c in calls if c["kind"] == kind)
                                                   for kind in INPUT_KINDS),
    }


# =========================================================================== probe (child)
def probe(ctx: ProbeContext[Inputs]) -> None:
    inp = ctx.inputs
    # bucket_length on 1..N: plain Python, one record for the whole range
    fn = ctx.get("bucket_length")
    outcome: Mapping[str, Any] = ctx.invoke(fn, "bucket_length", 1).record
    if outcome["status"] == "ok":
        values, bad = [], None
        for n in range(1, int(inp["bucket_max"]) + 1):
            got = ctx.invoke(fn, "bucket_length", n)
            if not got.ok:
                bad = {"n": n, **got.record}
                break
            values.append(got.result if type(got.result) is int else repr(got.result)[:40])
        outcome = {"status": "ok", "function": "bucket_length", "value": {"t": "list", "values": values},
                   "failed_at": bad}
    ctx.record(KEYS.buckets(), outcome)

    calls = [item["data"].tolist() if item["kind"] == "list" else item["data"] for item in inp["calls"]]
    with ctx.compiles(KEYS.window()) as window:
        for i, data in enumerate(calls):
            ctx.call(KEYS.value(i=i), "masked_mean_sq", data)
    # the functions of the submission that jax.jit traced during the calls: its jitted core
    ctx.record(KEYS.cores(), compiles.traced_in(window, ctx.student_dir))


# =========================================================================== checks (grader)
@check("bucket_length.values")
def bucket_length_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    """Against the reference's own bucket_length on the same range (the grader holds no copy of the answer)."""
    record = s.result(KEYS.buckets())
    failed_at = s.call(KEYS.buckets()).get("failed_at")
    if failed_at:
        from grader.checks import raised_text

        raise Fail(T("ch4.ex04.bucket_raised", n=failed_at["n"], error=raised_text(failed_at))
                   if failed_at.get("status") == "raised" else T("check.not_attempted", function="bucket_length"))
    values = record.get("values", [])
    expected = r.result(KEYS.buckets()).get("values", [])
    n_max = int(ctx.inputs["bucket_max"])
    if len(expected) != n_max:
        raise GraderError(f"the reference's bucket_length gave {len(expected)} values for 1..{n_max}")
    wrong = [(n, got) for n, got, want in zip(range(1, n_max + 1), values, expected) if got != want]
    if wrong or len(values) != n_max:
        n, got = wrong[0] if wrong else (len(values) + 1, None)
        raise Fail(T("ch4.ex04.bucket_wrong", n=n, got=got, expected=expected[n - 1], bad=len(wrong),
                     total=n_max), {"wrong": len(wrong), "first_wrong": n})
    return {"checked": n_max}


@check("masked_mean_sq.values")
def masked_mean_sq_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    cases = [(KEYS.value(i=i), f"masked_mean_sq({c['kind']}[{len(c['data'])}])")
             for i, c in enumerate(ctx.inputs["calls"])]
    return numeric.compare_calls(s, r, cases, dtype="float32", array_type="jax.Array", rtol=1e-5, atol=1e-6)


@check("masked_mean_sq.compiles")
def masked_mean_sq_compiles(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict:
    """Measured whatever bucket_length.values found (a ``numpy.int64`` bucket, the wrong type for the contract,
    pads right and compiles right): one slip costs its own points. A bucket_length without the floor of 8 fails
    here too, by what it costs: lengths 1 to 7 compile buckets 1, 2 and 4 of their own."""
    calls = ctx.inputs["calls"]
    any_attempted(s, {"masked_mean_sq": KEYS.value(i=0)})
    raised = [i for i in range(len(calls)) if s.call(KEYS.value(i=i))["status"] == "raised"]
    if raised:
        raise Fail(T("ch4.ex04.calls_raised", n=len(raised), total=len(calls)), {"raised": len(raised)})
    kinds = sorted({c["kind"] for c in calls})
    observed = s.value(KEYS.window())
    try:
        measured = compiles.expect(observed, what=T("ch4.ex04.calls", n=len(calls), kinds=", ".join(kinds)),
                                   at_most=len(BUCKETS))
    except Fail as failure:
        if len(observed.get("names", {})) == 1:  # only the jitted core compiled, once per length or dtype
            failure.hint = "core_recompiles"
        raise
    measured["calls"] = len(calls)
    cores = s.value(KEYS.cores())
    if not cores:  # computed on the host (or by eager jnp calls alone): no jitted core ran
        raise Fail(T("ch4.ex04.no_core", n=len(calls), compiles=measured["compiles"]), {**measured, "cores": []},
                   hint="no_core")
    measured["cores"] = cores
    return measured
