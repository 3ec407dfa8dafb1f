# expect-failed: normalize_if_positive.values
# why: total > 1 for total > 0: a sum in (0, 1] is returned unchanged (it survived every seed before
#      the hidden inputs held such a sum)
# base: solution


@jax.jit
def normalize_if_positive(x):
    """和为正时除以和，否则原样返回。/ Divide by the sum when it is positive, else return x."""
    total = jnp.sum(x)
    positive = total > 1
    safe_total = jnp.where(positive, total, 1.0)
    return jnp.where(positive, x / safe_total, x)
