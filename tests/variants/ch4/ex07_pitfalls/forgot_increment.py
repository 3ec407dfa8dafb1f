# expect-failed: normalize_and_count.values
# why: the count comes back unchanged
# base: solution


@jax.jit
def normalize_and_count(x, count):
    """返回 (x / ||x||, count + 1)。/ Returns (x / ||x||, count + 1)."""
    return x / jnp.linalg.norm(x), count
