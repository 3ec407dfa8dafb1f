# expect-failed: clip_by_norm.traceable
# expect-skipped: clip_by_norm.values, compiles
# why: a Python if on the traced norm
# base: solution


@jax.jit
def piecewise(x):
    return jnp.where(x > 0, x * x, 0.5 * x)

@jax.jit
def normalize_if_positive(x):
    total = jnp.sum(x)
    return jnp.where(total > 0, x / jnp.where(total > 0, total, 1.0), x)

@jax.jit
def clip_by_norm(x, max_norm):
    norm = jnp.linalg.norm(x)
    if norm > max_norm:
        return x * (max_norm / norm)
    return x
