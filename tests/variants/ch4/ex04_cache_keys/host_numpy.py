# expect-failed: masked_mean_sq.compiles
# expect-hint: masked_mean_sq.compiles=check:no_core
# why: pads to the bucket on the host, then computes the mean with NumPy too: right values and no recompiles, but no jitted core at all (jnp.asarray only puts the result on the device)
import jax.numpy as jnp
import numpy as np


def bucket_length(n):
    length = 8
    while length < n:
        length *= 2
    return length


def masked_mean_sq(x):
    values = np.asarray(x, dtype=np.float32).reshape(-1)
    length = values.shape[0]
    padded = np.zeros(bucket_length(length), dtype=np.float32)
    padded[:length] = values
    return jnp.asarray(np.float32(np.sum(padded * padded) / length))
