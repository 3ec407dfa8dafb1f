# expect-failed:
# why: correct, written differently: static_argnums instead of static_argnames, a dispatch table, expm1
# base: solution


def _poly(x, coeff):
    return 1.0 + coeff * (x * x)

poly = jax.jit(_poly)

def _repeat(x, n_steps):
    scale = 1.0
    for _ in range(n_steps):
        scale = scale * 1.5
    out = x
    for _ in range(n_steps):
        out = out * 1.5
    return out

repeat_scale = jax.jit(_repeat, static_argnums=1)

@partial(jax.jit, static_argnums=(1,))
def reduce_along(x, axis):
    return x.sum(axis)

_ACTIVATIONS = {
    "relu": lambda x, a: jax.nn.relu(x),
    "leaky_relu": lambda x, a: jnp.where(x > 0, x, a * x),
    "elu": lambda x, a: jnp.where(x > 0, x, a * jnp.expm1(x)),
    "tanh": lambda x, a: a * jnp.tanh(x),
}

@partial(jax.jit, static_argnums=1)
def activate(x, mode, alpha):
    try:
        fn = _ACTIVATIONS[mode]
    except KeyError:
        raise ValueError(f"unknown activation {mode}") from None
    return fn(x, alpha)
