# expect-failed: log_softmax.values
# expect-hint: log_softmax.values=check:formula
# why: subtracts the sum of exponentials instead of its log: finite but wrong values
# base: solution


@jax.jit
def log_softmax(x):
    """数值稳定的 log-softmax（最后一个轴）。/ Numerically stable log-softmax over the last axis."""
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    return shifted - jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True)
