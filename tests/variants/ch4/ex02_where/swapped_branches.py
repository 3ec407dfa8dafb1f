# expect-failed: piecewise.values
# why: the branches are swapped
# base: solution


@jax.jit
def piecewise(x):
    return jnp.where(x > 0, 0.5 * x, x * x)

@jax.jit
def normalize_if_positive(x):
    total = jnp.sum(x)
    return jnp.where(total > 0, x / jnp.where(total > 0, total, 1.0), x)

@jax.jit
def clip_by_norm(x, max_norm):
    norm = jnp.sqrt(jnp.sum(x * x))
    return jnp.where(norm > max_norm, x * (max_norm / jnp.where(norm > 0, norm, 1.0)), x)
