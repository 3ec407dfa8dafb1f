# expect-failed: activate.values
# expect-skipped: activate.compiles
# expect-hint: activate.values=hint.exception.static_needed
# why: mode left dynamic: a string is not a valid JAX type
# base: solution


@jax.jit
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

@jax.jit
def activate(x, mode, alpha):
    if mode == "relu":
        return jnp.maximum(x, 0.0)
    return alpha * jnp.tanh(x)
