# expect-failed:
# why: correct, written differently: normalize_and_count, debug_norm and ema donate their array, power_iteration its v0 (donate_argnums): JAX deletes them after the call
# base: solution


from functools import partial

@partial(jax.jit, donate_argnums=(0,))
def normalize_and_count(x, count):
    """返回 (x / ||x||, count + 1)。/ Returns (x / ||x||, count + 1)."""
    return x / jnp.linalg.norm(x), count + 1

@partial(jax.jit, donate_argnums=(0,))
def debug_norm(x):
    """每次调用都打印 norm=<值>。/ Prints norm=<value> on every call."""
    norm = jnp.linalg.norm(x)
    jax.debug.print("norm={}", norm)
    return x / norm

@partial(jax.jit, donate_argnums=(1,))
def power_iteration(A, v0, n_steps):
    """幂迭代 n_steps 次（fori_loop）。/ n_steps power-iteration steps (fori_loop)."""
    def step(_, v):
        v = A @ v
        return v / jnp.linalg.norm(v)

    return jax.lax.fori_loop(0, n_steps, step, v0)

@partial(jax.jit, donate_argnums=(0,))
def ema(xs, alpha):
    """沿 0 轴的指数滑动平均（scan）。/ Exponential moving average along axis 0 (scan)."""
    def step(state, x):
        state = alpha * x + (1 - alpha) * state
        return state, state

    _, rest = jax.lax.scan(step, xs[0], xs[1:])
    return jnp.concatenate([xs[:1], rest], axis=0)
