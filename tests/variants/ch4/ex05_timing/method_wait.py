# expect-failed: time_call.jax_async
# why: out.block_until_ready() (the method) instead of jax.block_until_ready(out): fails on a pytree
# base: solution


def time_call(fn, *args, warmup=1, iters=20):
    for _ in range(warmup):
        fn(*args).block_until_ready()
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        fn(*args).block_until_ready()
        samples.append(time.perf_counter() - start)
    return float(statistics.median(samples))

def speedup(eager_fn, jit_fn, *args, warmup=1, iters=20):
    return time_call(eager_fn, *args, warmup=warmup, iters=iters) / time_call(jit_fn, *args, warmup=warmup, iters=iters)
