# expect-failed: time_call.median
# why: keeps the fastest of the timed calls (best of N)
# base: solution


def time_call(fn, *args, warmup=1, iters=20):
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(iters):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best

def speedup(eager_fn, jit_fn, *args, warmup=1, iters=20):
    return time_call(eager_fn, *args, warmup=warmup, iters=iters) / time_call(jit_fn, *args, warmup=warmup, iters=iters)
