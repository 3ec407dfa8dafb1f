# expect-failed: power_iteration.program_size
# expect-skipped: power_iteration.compiles
# why: a Python loop over a static n_steps, unrolled into n_steps copies
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

@partial(jax.jit, static_argnames=("n_steps",))
def power_iteration(A, v0, n_steps):
    v = v0
    for _ in range(n_steps):
        v = A @ v
        v = v / jnp.linalg.norm(v)
    return v

@jax.jit
def ema(xs, alpha):
    def step(state, x):
        state = alpha * x + (1 - alpha) * state
        return state, state

    _, rest = jax.lax.scan(step, xs[0], xs[1:])
    return jnp.concatenate([xs[:1], rest], axis=0)
