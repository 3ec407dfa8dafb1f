# expect-failed:
# why: correct, written differently: perf_counter_ns, the method form of block_until_ready, numpy median
# base: solution


import numpy as np

def _wait(out):
    return jax.tree_util.tree_map(lambda leaf: leaf.block_until_ready() if hasattr(leaf, "block_until_ready") else leaf, out)

def time_call(fn, *args, warmup=1, iters=20):
    for _ in range(warmup):
        _wait(fn(*args))
    samples_ns = np.empty(iters)
    for i in range(iters):
        t0 = time.perf_counter_ns()
        _wait(fn(*args))
        samples_ns[i] = time.perf_counter_ns() - t0
    return float(np.median(samples_ns) / 1e9)

def speedup(eager_fn, jit_fn, *args, warmup=1, iters=20):
    jitted = time_call(jit_fn, *args, warmup=warmup, iters=iters)
    eager = time_call(eager_fn, *args, warmup=warmup, iters=iters)
    return eager / jitted
