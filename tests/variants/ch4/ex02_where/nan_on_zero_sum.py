# expect-failed: normalize_if_positive.values
# expect-hint: normalize_if_positive.values=check:divides_by_zero
# why: >= instead of >: a zero sum divides by zero
# base: solution


@jax.jit
def piecewise(x):
    return jnp.where(x > 0, x * x, 0.5 * x)

@jax.jit
def normalize_if_positive(x):
    total = jnp.sum(x)
    return jnp.where(total >= 0, x / total, x)

@jax.jit
def clip_by_norm(x, max_norm):
    norm = jnp.sqrt(jnp.sum(x * x))
    return jnp.where(norm > max_norm, x * (max_norm / jnp.where(norm > 0, norm, 1.0)), x)
