# expect-failed: time_call.jax_async
# expect-hint: time_call.jax_async=check:first_output
# why: waits on the first leaf of the result only: a pytree's other outputs may still be computing
# base: solution


def time_call(fn, *args, warmup=1, iters=20):
    for _ in range(warmup):
        jax.block_until_ready(jax.tree_util.tree_leaves(fn(*args))[0])
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        jax.block_until_ready(jax.tree_util.tree_leaves(fn(*args))[0])
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)

def speedup(eager_fn, jit_fn, *args, warmup=1, iters=20):
    return time_call(eager_fn, *args, warmup=warmup, iters=iters) / time_call(jit_fn, *args, warmup=warmup,
                                                                              iters=iters)
