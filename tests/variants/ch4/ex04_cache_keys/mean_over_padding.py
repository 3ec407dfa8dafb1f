# expect-failed: masked_mean_sq.values
# why: divides by the padded length, so the padding counts
import jax
import jax.numpy as jnp
import numpy as np


def bucket_length(n):
    length = 8
    while length < n:
        length *= 2
    return length


@jax.jit
def _core(padded):
    return jnp.mean(padded * padded)


def masked_mean_sq(x):
    values = np.asarray(x, dtype=np.float32).reshape(-1)
    padded = np.zeros(bucket_length(values.shape[0]), np.float32)
    padded[: values.shape[0]] = values
    return _core(padded)
