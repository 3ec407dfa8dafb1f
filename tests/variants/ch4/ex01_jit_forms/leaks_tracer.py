# expect-failed: softmax_raw.pure
# expect-hint: softmax_raw.pure=check:tracers
# why: keeps its first input in a module global; that first call is traced under jit, so a tracer leaks
# base: solution


_last_input = [None]

def softmax_raw(x):
    """数值稳定的 softmax（最后一个轴）。/ Numerically stable softmax over the last axis."""
    if _last_input[0] is None:
        _last_input[0] = x  # "for debugging": the first call, under jit, stores a tracer
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(shifted)
    return e / jnp.sum(e, axis=-1, keepdims=True)
