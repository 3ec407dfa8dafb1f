# expect-failed: normalize_if_positive.traceable
# expect-skipped: normalize_if_positive.values, compiles
# why: the textbook mistake: if x.sum() > 0 inside jit
# base: solution


@jax.jit
def piecewise(x):
    return jnp.where(x > 0, x * x, 0.5 * x)

@jax.jit
def normalize_if_positive(x):
    if x.sum() > 0:
        return x / x.sum()
    return x

@jax.jit
def clip_by_norm(x, max_norm):
    norm = jnp.sqrt(jnp.sum(x * x))
    return jnp.where(norm > max_norm, x * (max_norm / jnp.where(norm > 0, norm, 1.0)), x)
