"""Exercise 5's real jitted function: a student's harness timing JAX's asynchronous dispatch (in the child),
and whether a harness's figure agrees with the grader's own calls of it (in the grader too).

The package (``__init__.py``) holds the exercise's inputs, its instrumented runs, its probe and its checks;
this module the one part of the probe that runs JAX: a program sized to this machine, the student's
``time_call`` on it, and the grader's clock around it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from grader.child.probe import ProbeContext
from grader.word_fields import CallRecord

#: how far a harness's time of the real jitted function may be from the grader's (a ratio)
JAX_AGREES = (0.4, 2.5)


def time_a_jitted_function(ctx: ProbeContext[Any], matrix_seed: int, min_s: float, iters: int,
                           attempts: int = 3) -> tuple[CallRecord, dict[str, float | int]]:
    """The student's ``time_call`` on a real jitted function on JAX's asynchronous dispatch, sized to take
    ``min_s`` here: the call's record, and the grader's own calls of it (the truth the checks compare with)."""
    import jax
    import jax.numpy as jnp

    from grader.primitives.timing import clocked_calls

    # it returns a pytree, as real JAX code often does: jax.block_until_ready(out) waits on
    # every leaf, while out.block_until_ready() only exists on a single array. Its first leaf is
    # known on the host at once (the matrix's size), the second is what the device computes: a
    # harness that waits on the first output alone measures the dispatch, not the work.
    # Its work is a number of rounds of a matrix product, the number an argument of the program:
    # one program (one shape) whatever the machine, so that sizing the work to the machine compiles
    # nothing more (each matrix size tried was a program of its own, loaded or compiled in turn)
    slow = jax.jit(lambda a, rounds: (jnp.sum(a), jax.lax.fori_loop(0, rounds, lambda _, x: jnp.tanh(x @ a), a)))

    rng = np.random.default_rng(matrix_seed)
    a = jax.device_put(rng.normal(size=(MATRIX, MATRIX)).astype(np.float32) / np.sqrt(MATRIX))

    def chained(count):
        def chain(a):
            return (a.shape[0], *slow(a, count))

        return chain

    rounds = 1
    while True:
        chain = chained(jax.device_put(np.int32(rounds)))
        took = min(clocked_calls(chain, (a,), 3, warm=1)[1:])  # the fastest: load makes the median long
        if took >= min_s or rounds >= MOST_ROUNDS:
            break
        # the work grows with the rounds: aim a little above the floor, by steps of at most 8x (every
        # call of the harness's and the grader's pays for an overshoot)
        grow = min(8.0, 1.5 * min_s / max(took, 1e-6))
        rounds = min(MOST_ROUNDS, max(rounds + 1, int(np.ceil(rounds * grow))))
    # The grader's clock before and after the harness's (nine calls each, after two warm ones): on a
    # loaded machine one of the three can catch a burst of other work, so a harness that disagrees
    # with it is timed again (up to ``attempts`` times, the last attempt recorded): one that agrees in
    # seconds, or in milli- or microseconds (a unit the checks divide out: the seconds run's), is not.
    # A harness that does not wait disagrees every time.
    for attempt in range(1, attempts + 1):
        before = clocked_calls(chain, (a,), 9, warm=2)[2:]
        called = ctx.invoke(ctx.get("time_call"), "time_call", chain, a, warmup=1, iters=iters)
        after = clocked_calls(chain, (a,), 9, warm=2)[2:]
        outcome, returned = called.record, called.result
        if not called.ok or not isinstance(returned, (float, np.floating)) \
                or any(jax_agrees(returned / unit, min(before + after), max(before + after)) for unit in UNITS):
            break
    return outcome, {"before": float(np.median(before)), "after": float(np.median(after)),
                     "fastest": min(before + after), "slowest": max(before + after), "rounds": rounds,
                     "sized_s": took, "attempts": attempt, "first_leaf": _first_output_time(chain, a)}


#: the real jitted function's matrix (``MATRIX`` square), multiplied ``rounds`` times a call, as many as
#: make a call last ``jax_min_s`` on this machine (at most ``MOST_ROUNDS``: a call of a fast GPU stays short)
MATRIX, MOST_ROUNDS = 128, 20_000
#: the units a harness may return the jitted function's time in without being timed again: seconds, and
#: the milli- and microseconds that ``time_call.seconds`` fails and the other checks divide out
UNITS = (1.0, 1e3, 1e6)


def jax_agrees(returned: float | np.floating, fastest: float, slowest: float) -> bool:
    """A harness's time of the real jitted function agrees with the grader's calls of it: within
    :data:`JAX_AGREES` of the range from the grader's fastest call to its slowest (as for the
    instruments, which statistic it takes is the median check's alone to judge)."""
    return bool(JAX_AGREES[0] * fastest <= returned <= JAX_AGREES[1] * slowest)


def _first_output_time(chain, a, rounds: int = 3) -> float:
    """The grader's time of the first output alone (what a harness that waits on nothing more sees);
    each call's work is waited on afterwards, untimed, so that none piles up."""
    import jax

    from grader.trusted import TRUSTED

    took: list[float] = []
    while len(took) < rounds:
        began = TRUSTED.perf_counter()
        out = chain(a)
        took.append(TRUSTED.perf_counter() - began)
        jax.block_until_ready(out)
    return float(np.median(took))


