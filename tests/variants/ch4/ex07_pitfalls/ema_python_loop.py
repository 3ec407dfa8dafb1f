# expect-failed: ema.program_size
# why: a Python loop over the rows, unrolled
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

@jax.jit
def power_iteration(A, v0, n_steps):
    def step(_, v):
        v = A @ v
        return v / jnp.linalg.norm(v)

    return jax.lax.fori_loop(0, n_steps, step, v0)

@jax.jit
def ema(xs, alpha):
    states = [xs[0]]
    for t in range(1, xs.shape[0]):
        states.append(alpha * xs[t] + (1 - alpha) * states[-1])
    return jnp.stack(states)
