# expect-failed: softmax_raw.pure
# expect-hint: softmax_raw.pure=check:not_same
# why: a random factor (well within the tolerance) from a generator kept at module level: two calls on one input differ
# base: solution


import numpy as np

_noise = np.random.default_rng(0)  # seeded: the same run twice prints the same report

def softmax_raw(x):
    """数值稳定的 softmax（最后一个轴）。/ Numerically stable softmax over the last axis."""
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(shifted)
    return e / jnp.sum(e, axis=-1, keepdims=True) * (1 + 2e-6 * _noise.random())
