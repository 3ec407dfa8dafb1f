# expect-failed:
# why: correct, written differently: the unknown mode raises a subclass of ValueError, as jax.nn-style
#      libraries do (class UnknownActivationError(ValueError)); isinstance says it is a ValueError
# base: solution


class UnknownActivationError(ValueError):
    """An activation this module does not know (a ValueError, as libraries write it)."""

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
        return alpha * jnp.tanh(x)
    raise UnknownActivationError(f"unknown mode {mode!r}")
