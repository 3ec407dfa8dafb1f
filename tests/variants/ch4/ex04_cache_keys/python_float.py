# expect-failed: masked_mean_sq.values
# expect-hint: masked_mean_sq.values=hint.return_type
# why: returns a Python float instead of a float32 0-d JAX array
import jax
import jax.numpy as jnp
import numpy as np


def bucket_length(n):
    length = 8
    while length < n:
        length *= 2
    return length


@jax.jit
def _core(padded, length):
    mask = jnp.arange(padded.shape[0]) < length
    return jnp.sum(jnp.where(mask, padded * padded, 0.0)) / length


def masked_mean_sq(x):
    values = np.asarray(x, dtype=np.float32).reshape(-1)
    n = values.shape[0]
    padded = np.zeros(bucket_length(n), np.float32)
    padded[:n] = values
    return float(_core(padded, n))
