# expect-failed:
# why: correct, written differently: every function donates its array (donate_argnums=(0,)): JAX deletes it after the call
# base: solution


from functools import partial

@partial(jax.jit, donate_argnums=(0,))
def piecewise(x):
    """x > 0 处为 x*x，否则 0.5*x。/ x*x where x > 0, else 0.5*x."""
    return jnp.where(x > 0, x * x, 0.5 * x)

@partial(jax.jit, donate_argnums=(0,))
def normalize_if_positive(x):
    """和为正时除以和，否则原样返回。/ Divide by the sum when it is positive, else return x."""
    total = jnp.sum(x)
    positive = total > 0
    safe_total = jnp.where(positive, total, 1.0)
    return jnp.where(positive, x / safe_total, x)

@partial(jax.jit, donate_argnums=(0,))
def clip_by_norm(x, max_norm):
    """范数超过 max_norm 时按比例缩小。/ Scale x down when its norm exceeds max_norm."""
    norm = jnp.sqrt(jnp.sum(x * x))
    too_long = norm > max_norm
    scale = max_norm / jnp.where(too_long, norm, 1.0)
    return jnp.where(too_long, x * scale, x)
