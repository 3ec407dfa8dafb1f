# expect-failed: time_call.median
# why: the best of the repeats, min(timeit.repeat(...)): the benchmark template of several libraries' docs; it reports a lucky fast call
# base: solution


import timeit

def time_call(fn, *args, warmup=1, iters=20):
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    return min(timeit.repeat(lambda: jax.block_until_ready(fn(*args)), repeat=iters, number=1))

def speedup(eager_fn, jit_fn, *args, warmup=1, iters=20):
    return time_call(eager_fn, *args, warmup=warmup, iters=iters) / time_call(jit_fn, *args, warmup=warmup, iters=iters)
