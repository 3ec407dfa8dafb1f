# expect-failed: power_iteration.compiles
# why: fori_loop, but n_steps static: one compile per value
# base: solution


from functools import partial

@jax.jit
def normalize_and_count(x, count):
    return x / jnp.linalg.norm(x), count + 1

@jax.jit
def debug_norm(x):
    norm = jnp.linalg.norm(x)
    jax.debug.print("norm={}", norm)
    return x / norm

@jax.jit
def mean_abs(x):
    return jnp.mean(jnp.abs(x))

@partial(jax.jit, static_argnums=2)
def power_iteration(A, v0, n_steps):
    def step(_, v):
        v = A @ v
        return v / jnp.linalg.norm(v)

    return jax.lax.fori_loop(0, n_steps, step, v0)

@jax.jit
def ema(xs, alpha):
    def step(state, x):
        state = alpha * x + (1 - alpha) * state
        return state, state

    _, rest = jax.lax.scan(step, xs[0], xs[1:])
    return jnp.concatenate([xs[:1], rest], axis=0)
