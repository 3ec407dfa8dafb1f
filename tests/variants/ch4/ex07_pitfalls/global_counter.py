# expect-failed: normalize_and_count.globals
# why: a module-level counter, incremented inside jit (only while tracing)
# base: solution


from functools import partial

calls = 0

@jax.jit
def normalize_and_count(x, count):
    global calls
    calls += 1
    return x / jnp.linalg.norm(x), count + 1

@jax.jit
def debug_norm(x):
    norm = jnp.linalg.norm(x)
    jax.debug.print("norm={}", norm)
    return x / norm

@jax.jit
def mean_abs(x):
    return jnp.mean(jnp.abs(x))

@jax.jit
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
