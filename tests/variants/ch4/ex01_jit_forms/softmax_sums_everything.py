# expect-failed: softmax.values
# expect-hint: softmax.values=check:formula
# why: divides by the sum over the whole array, not over the last axis: finite but wrong values
# base: solution


def softmax_raw(x):
    """数值稳定的 softmax（最后一个轴）。/ Numerically stable softmax over the last axis."""
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(shifted)
    return e / jnp.sum(e)
