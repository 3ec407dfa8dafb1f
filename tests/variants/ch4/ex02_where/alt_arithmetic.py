# expect-failed:
# why: correct, written differently: jnp.piecewise, and a minimum() instead of a branch
# base: solution


@jax.jit
def piecewise(x):
    return jnp.piecewise(x, [x > 0], [lambda v: v * v, lambda v: 0.5 * v])

@jax.jit
def normalize_if_positive(x):
    s = x.sum()
    positive = (s > 0).astype(x.dtype)
    return x / (positive * s + (1 - positive))

@jax.jit
def clip_by_norm(x, max_norm):
    norm = jnp.sqrt(jnp.vdot(x, x))
    return x * jnp.minimum(1.0, max_norm / norm)
