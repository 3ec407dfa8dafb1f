# expect-failed:
# why: correct, written differently: poly, repeat_scale and activate donate x (donate_argnums=(0,), beside their static arguments): JAX deletes it after the call
# base: solution


@partial(jax.jit, donate_argnums=(0,))
def poly(x, coeff):
    """coeff * x ** 2 + 1.0"""
    return coeff * x ** 2 + 1.0

@partial(jax.jit, static_argnames=("n_steps",), donate_argnums=(0,))
def repeat_scale(x, n_steps):
    """用 Python 循环乘以 1.5，共 n_steps 次。/ Multiply by 1.5, n_steps times, in a Python loop."""
    for _ in range(n_steps):
        x = x * 1.5
    return x

@partial(jax.jit, static_argnames=("mode",), donate_argnums=(0,))
def activate(x, mode, alpha):
    """按 mode 选择激活函数。/ The activation named by mode."""
    if mode == "relu":
        return jnp.maximum(x, 0.0)
    if mode == "leaky_relu":
        return jnp.where(x > 0, x, alpha * x)
    if mode == "elu":
        return jnp.where(x > 0, x, alpha * (jnp.exp(x) - 1.0))
    if mode == "tanh":
        return alpha * jnp.tanh(x)
    raise ValueError(f"unknown mode {mode!r}")
