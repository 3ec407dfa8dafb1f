# expect-failed:
# why: correct, written differently: jnp.select, jax.lax.cond, static_argnums-free wrapped forms
# base: solution


@jax.jit
def piecewise(x):
    return jnp.select([x > 0], [x * x], 0.5 * x)

def _normalize(x):
    total = x.sum()
    return jax.lax.cond(total > 0, lambda v: v / total, lambda v: v, x)

normalize_if_positive = jax.jit(_normalize)

@jax.jit
def clip_by_norm(x, max_norm):
    norm = jnp.linalg.norm(x.reshape(-1))
    return jax.lax.cond(norm > max_norm, lambda v: v * (max_norm / norm), lambda v: v, x)
