# expect-failed: clip_by_norm.values
# expect-hint: clip_by_norm.values=check:divides_by_zero
# why: x / norm * min(norm, max_norm): right for any x but the zero vector, where it is 0 / 0
# base: solution


@jax.jit
def clip_by_norm(x, max_norm):
    """范数超过 max_norm 时按比例缩小。/ Scale x down when its norm exceeds max_norm."""
    norm = jnp.sqrt(jnp.sum(x * x))
    return x / norm * jnp.minimum(norm, max_norm)
