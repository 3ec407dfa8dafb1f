"""The grader never reuses what it handed over (issue 26).

A jitted function may donate its inputs (``jax.jit(f, donate_argnums=(0,))``, the
train-step idiom): JAX then deletes the arrays it was given once the call has run, on
CPU too (``jax._src.pjit``: a donated buffer that an output can reuse is consumed; the
array reads "Array has been deleted" afterwards). A grader that hands the same array to
a second call, or uses it itself afterwards, blames the student for its own doing.

Here every exercise's probe runs in this process (no sandbox: the reference solutions
only, which are trusted) against the reference module, each of whose contract functions
deletes every JAX array it was given as soon as it returns, as a donating function does
(an array it returns as it is stays, as JAX's aliasing keeps it). Every call the probe
makes must then still succeed: its inputs are always its own. ex06's timing cases are
timed once each the same way. ex05 is left out: its calls hand over the grader's
instruments, never arrays, and another branch reworks it.

The real thing, graded end to end with ``donate_argnums``, is in the donating variants
(``tests/variants/ch4/*/donates_input.py``, ``ex06_speedup/layer_norm_donates.py``).
"""
from __future__ import annotations

import importlib.util
import types

import numpy as np
import pytest

from conftest import SOLUTIONS

from grader.chapter import load_chapter

CHAPTER = load_chapter("ch4")
EXERCISES = [ex for ex in CHAPTER.exercises if ex.id != "ex05_timing"]


class _Channel:
    """What the probe sends, kept; every request it makes is answered "stop"."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send(self, message: dict) -> bool:
        self.sent.append(message)
        return True

    def recv(self) -> dict:
        return {"op": "stop"}


def _leaves(tree) -> list:
    if isinstance(tree, (list, tuple)):
        return [leaf for item in tree for leaf in _leaves(item)]
    if isinstance(tree, dict):
        return [leaf for item in tree.values() for leaf in _leaves(item)]
    return [tree]


def _donating(fn):
    """``fn`` that deletes the concrete JAX arrays it was given once it returns (not those it returns)."""
    import jax

    def call(*args, **kwargs):
        out = fn(*args, **kwargs)
        kept = {id(leaf) for leaf in _leaves(out)}
        for leaf in _leaves([args, kwargs]):
            if isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer) and id(leaf) not in kept:
                leaf.delete()
        return out

    call.__name__ = getattr(fn, "__name__", "donating")
    return call


def _module(ex, donating: bool) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"fresh_{ex.id}", SOLUTIONS / ex.filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if donating:
        for name in ex.functions:
            setattr(module, name, _donating(getattr(module, name)))
    return module


def _run_probe(ex, module, monkeypatch) -> tuple[dict, list[str]]:
    """The records of ``ex``'s probe on ``module``, and the timing cases that failed (ex06)."""
    from grader.child.probe import ProbeContext, prepare
    from grader.primitives import timing

    prepare()
    timing_failures: list[str] = []
    served: list[str] = []

    def serve_once(ctx, cases):  # each case timed once, as the grader's requests would, unpinned
        for name, case in cases.items():
            baseline, candidate, args, fresh = (*case, None)[:4]
            served.append(name)
            try:
                timing.time_batches(baseline, candidate, args, reps=1, batch_baseline=1, batch_candidate=2,
                                    fresh=fresh)
            except Exception as exc:  # noqa: BLE001 - the failure is what this test reports
                timing_failures.append(f"{name}: {type(exc).__name__}: {exc}")

    monkeypatch.setattr(timing, "serve_timing", serve_once)
    channel = _Channel()
    ctx = ProbeContext(channel, module, ex.inputs(7), str(SOLUTIONS.resolve()), str(SOLUTIONS.resolve()))
    ex.package.probe(ctx)
    records = {m["key"]: m["value"] for m in channel.sent if m.get("op") == "obs"}
    if ex.timed:
        records["served"] = served
    return records, timing_failures


def _reused(records: dict) -> list[str]:
    """Records of calls that met an array already deleted."""
    return [f"{key}: {value.get('type')}: {str(value.get('message'))[:120]}" for key, value in records.items()
            if isinstance(value, dict) and value.get("status") == "raised"
            and any(word in str(value.get("message", "")) for word in ("deleted", "donated"))]


@pytest.mark.parametrize("ex", EXERCISES, ids=[ex.id for ex in EXERCISES])
def test_no_call_gets_an_input_another_call_was_given(ex, monkeypatch):
    records, timing_failures = _run_probe(ex, _module(ex, donating=True), monkeypatch)
    assert not _reused(records), f"{ex.id}: calls got deleted inputs: {_reused(records)}"
    assert not timing_failures, f"{ex.id}: timing met deleted inputs: {timing_failures}"
    statuses = {k: v.get("status") for k, v in records.items() if isinstance(v, dict) and "status" in v}
    plain, _ = _run_probe(ex, _module(ex, donating=False), monkeypatch)
    assert statuses == {k: v.get("status") for k, v in plain.items() if isinstance(v, dict) and "status" in v}
    if ex.timed:
        assert records["served"] == plain["served"] and records["served"], records["served"]


def test_a_donated_array_is_deleted_on_this_backend():
    """What the test above simulates is what JAX does here: a donated input is deleted."""
    import jax

    x = jax.device_put(np.ones((4, 3), np.float32))
    jax.jit(lambda a: a * 2.0, donate_argnums=(0,))(x)
    assert x.is_deleted()
