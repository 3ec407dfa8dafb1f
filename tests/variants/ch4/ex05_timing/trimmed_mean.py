# expect-failed: time_call.median
# why: a trimmed mean: drops the fastest and the slowest call and averages the rest, which the other slow calls still pull
# base: solution


def time_call(fn, *args, warmup=1, iters=20):
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        samples.append(time.perf_counter() - start)
    kept = sorted(samples)[1:-1] if len(samples) > 2 else samples
    return sum(kept) / len(kept)

def speedup(eager_fn, jit_fn, *args, warmup=1, iters=20):
    return time_call(eager_fn, *args, warmup=warmup, iters=iters) / time_call(jit_fn, *args, warmup=warmup, iters=iters)
