# expect-failed: speedup.value
# why: the ratio is upside down
# base: solution


def time_call(fn, *args, warmup=1, iters=20):
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        samples.append(time.perf_counter() - start)
    return float(statistics.median(samples))

def speedup(eager_fn, jit_fn, *args, warmup=1, iters=20):
    return time_call(jit_fn, *args, warmup=warmup, iters=iters) / time_call(eager_fn, *args, warmup=warmup, iters=iters)
