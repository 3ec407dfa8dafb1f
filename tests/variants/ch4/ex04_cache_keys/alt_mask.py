# expect-failed:
# why: correct, written differently: bit tricks for the bucket, a boolean mask argument, np.pad
import jax
import jax.numpy as jnp
import numpy as np


def bucket_length(n):
    return max(8, 1 << (int(n) - 1).bit_length())


@jax.jit
def _masked(padded, mask):
    count = jnp.sum(mask)
    return jnp.sum(jnp.where(mask, jnp.square(padded), 0.0)) / count


def masked_mean_sq(x):
    values = np.asarray(x).astype(np.float32).ravel()
    size = bucket_length(len(values))
    padded = np.pad(values, (0, size - len(values)))
    mask = np.arange(size) < len(values)
    return _masked(padded, mask)
