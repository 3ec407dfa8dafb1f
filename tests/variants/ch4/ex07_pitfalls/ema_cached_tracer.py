# expect-failed: ema.values
# expect-hint: ema.values=hint.exception.tracer_leak
# why: keeps the first traced alpha in a module dict; the next trace (a new shape) uses it
# base: solution


_memo = {}

@jax.jit
def ema(xs, alpha):
    """沿 0 轴的指数滑动平均（scan）。/ Exponential moving average along axis 0 (scan)."""
    def step(state, x):
        state = alpha * x + (1 - alpha) * state
        return state, state

    if "alpha" not in _memo:  # "remembers" the first alpha: a tracer, used again by later traces
        _memo["alpha"] = alpha
    alpha = _memo["alpha"]
    _, rest = jax.lax.scan(step, xs[0], xs[1:])
    return jnp.concatenate([xs[:1], rest], axis=0)
