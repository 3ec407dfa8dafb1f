# expect-failed: repeat_scale.compiles
# expect-hint: repeat_scale.compiles=check:too_few
# why: a fori_loop with a dynamic n_steps compiles once; the exercise asks for a static n_steps
# base: solution


@jax.jit
def poly(x, coeff):
    return coeff * x ** 2 + 1.0

@jax.jit
def repeat_scale(x, n_steps):
    return jax.lax.fori_loop(0, n_steps, lambda i, v: v * 1.5, x)

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
