# expect-failed: time_call.median
# why: returns the mean, then rewrites the instrument's record of each timed call to that mean (their sum kept), so that a median of the records would agree
# base: solution


def time_call(fn, *args, warmup=1, iters=20):
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        samples.append(time.perf_counter() - start)
    mean = statistics.mean(samples)
    records = getattr(fn, "actual", None)  # the instrument's own list of what each call took
    if isinstance(records, list) and len(records) >= warmup + iters:
        timed = records[warmup:warmup + iters]
        records[warmup:warmup + iters] = [sum(timed) / len(timed)] * len(timed)
    return float(mean)

def speedup(eager_fn, jit_fn, *args, warmup=1, iters=20):
    return time_call(eager_fn, *args, warmup=warmup, iters=iters) / time_call(jit_fn, *args, warmup=warmup, iters=iters)
