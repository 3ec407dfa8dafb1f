# expect-failed: masked_mean_sq.compiles
# why: pads and converts on the device with eager jnp calls: each new length and dtype compiles
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
    x = jnp.asarray(x)
    n = x.shape[0]
    padded = jnp.pad(x.astype(jnp.float32), (0, bucket_length(n) - n))
    return _core(padded, n)
