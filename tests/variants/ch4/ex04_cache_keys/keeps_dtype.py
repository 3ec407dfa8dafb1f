# expect-failed: masked_mean_sq.compiles
# expect-hint: masked_mean_sq.compiles=check:core_recompiles
# why: pads to the bucket but keeps each input's dtype: every dtype compiles the core again
# base: solution


def masked_mean_sq(x):
    """真实元素上 x**2 的均值（float32 0 维数组）。/ Mean of x**2 over the real elements (float32, 0-d)."""
    values = np.asarray(x).reshape(-1)  # keeps the input's dtype (float64, int32, ...)
    length = values.shape[0]
    padded = np.zeros(bucket_length(length), dtype=values.dtype)
    padded[:length] = values
    return _mean_sq_core(padded, length).astype(jnp.float32)
