# expect-failed: mean_abs.values
# expect-hint: mean_abs.values=hint.exception.tracer_array
# why: NumPy on a traced value inside jit
# base: solution


import numpy as np

@jax.jit
def mean_abs(x):
    """|x| 的均值，0 维数组。/ Mean of |x| as a 0-d array."""
    return np.mean(np.abs(x))
