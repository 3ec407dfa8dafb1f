# expect-failed: activate.values
# expect-skipped: activate.compiles
# expect-hint: activate.values=hint.exception.tracer_bool
# why: a Python if on the dynamic alpha inside jit (and a clamp the statement does not ask for)
# base: solution


@partial(jax.jit, static_argnames=("mode",))
def activate(x, mode, alpha):
    """按 mode 选择激活函数。/ The activation named by mode."""
    if mode == "relu":
        return jnp.maximum(x, 0.0)
    if mode == "leaky_relu":
        return jnp.where(x > 0, x, alpha * x)
    if mode == "elu":
        return jnp.where(x > 0, x, alpha * (jnp.exp(x) - 1.0))
    if mode == "tanh":
        if alpha > 1.0:  # "clamp" the scale, with a Python if on the traced alpha
            alpha = 1.0
        return alpha * jnp.tanh(x)
    raise ValueError(f"unknown mode {mode!r}")
