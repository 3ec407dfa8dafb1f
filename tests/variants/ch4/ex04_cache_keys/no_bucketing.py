# expect-failed: masked_mean_sq.compiles
# expect-hint: masked_mean_sq.compiles=check:core_recompiles
# why: no bucketing: one compile per distinct length
import jax
import jax.numpy as jnp
import numpy as np


def bucket_length(n):
    length = 8
    while length < n:
        length *= 2
    return length


@jax.jit
def _core(values):
    return jnp.mean(values * values)


def masked_mean_sq(x):
    return _core(np.asarray(x, dtype=np.float32))
