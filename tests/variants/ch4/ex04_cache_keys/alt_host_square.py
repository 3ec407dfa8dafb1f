# expect-failed:
# why: correct, written differently: squares and pads on the host with np.pad, and only the masked sum and the division run in the jitted core (a lambda), the length as an array
import jax
import jax.numpy as jnp
import numpy as np


def bucket_length(n):
    return 8 if n <= 8 else 2 ** (int(n) - 1).bit_length()


_core = jax.jit(lambda squares, n: jnp.where(jnp.arange(squares.shape[0]) < n, squares, 0.0).sum() / n)


def masked_mean_sq(x):
    values = np.asarray(x, dtype=np.float32).ravel()
    squares = np.pad(values * values, (0, bucket_length(values.size) - values.size))
    return _core(squares, np.int32(values.size))
