# expect-failed: mean_abs.values
# expect-hint: mean_abs.values=hint.dtype
# why: "saves memory" by returning float16
# base: solution


@jax.jit
def mean_abs(x):
    """|x| 的均值，0 维数组。/ Mean of |x| as a 0-d array."""
    return jnp.mean(jnp.abs(x)).astype(jnp.float16)
