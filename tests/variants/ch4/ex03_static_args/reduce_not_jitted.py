# expect-failed: reduce_along.compiles
# why: not jitted at all (eager jnp.sum also compiles once per axis: the count alone would not tell)
# base: solution


@jax.jit
def poly(x, coeff):
    return coeff * x ** 2 + 1.0

@partial(jax.jit, static_argnames=("n_steps",))
def repeat_scale(x, n_steps):
    for _ in range(n_steps):
        x = x * 1.5
    return x

def reduce_along(x, axis):
    return jnp.sum(x, axis=axis)

@partial(jax.jit, static_argnames=("mode",))
def activate(x, mode, alpha):
    if mode == "relu":
        return jnp.maximum(x, 0.0)
    if mode == "leaky_relu":
        return jnp.where(x > 0, x, alpha * x)
    if mode == "elu":
        return jnp.where(x > 0, x, alpha * (jnp.exp(x) - 1.0))
    if mode == "tanh":
        return alpha * jnp.tanh(x)
    raise ValueError(mode)
