# expect-failed:
# why: correct, written differently: timeit.repeat for the samples, the middle of the sorted list
# base: solution


import timeit

def time_call(fn, *args, warmup=1, iters=20):
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    samples = sorted(timeit.repeat(lambda: jax.block_until_ready(fn(*args)), repeat=iters, number=1))
    middle = len(samples) // 2
    return samples[middle] if len(samples) % 2 else (samples[middle - 1] + samples[middle]) / 2

def speedup(eager_fn, jit_fn, *args, warmup=1, iters=20):
    return time_call(eager_fn, *args, warmup=warmup, iters=iters) / time_call(jit_fn, *args, warmup=warmup, iters=iters)
