# expect-failed: bucket_length.values, masked_mean_sq.compiles
# expect-hint: masked_mean_sq.compiles=check:core_recompiles
# why: no floor of 8 (buckets 1, 2, 4 too): the hidden length 1 (always there) compiles a bucket of its own
import jax
import jax.numpy as jnp
import numpy as np


def bucket_length(n):
    length = 1
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
    return _core(padded, n)
