# expect-failed: jitted
# expect-skipped: compiles
# why: piecewise lost its decorator
# base: solution


def piecewise(x):
    return jnp.where(x > 0, x * x, 0.5 * x)

@jax.jit
def normalize_if_positive(x):
    total = jnp.sum(x)
    return jnp.where(total > 0, x / jnp.where(total > 0, total, 1.0), x)

@jax.jit
def clip_by_norm(x, max_norm):
    norm = jnp.sqrt(jnp.sum(x * x))
    return jnp.where(norm > max_norm, x * (max_norm / jnp.where(norm > 0, norm, 1.0)), x)
