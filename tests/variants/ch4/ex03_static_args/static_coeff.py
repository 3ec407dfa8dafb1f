# expect-failed: poly.compiles
# why: coeff made static: five values, five compiles
# base: solution


@partial(jax.jit, static_argnums=1)
def poly(x, coeff):
    return coeff * x ** 2 + 1.0

@partial(jax.jit, static_argnames=("n_steps",))
def repeat_scale(x, n_steps):
    for _ in range(n_steps):
        x = x * 1.5
    return x

@partial(jax.jit, static_argnames=("axis",))
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
