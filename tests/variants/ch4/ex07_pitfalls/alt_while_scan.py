# expect-failed:
# why: correct, written differently: while_loop, a scan over every row from xs[0], named debug.print fields
# base: solution


from functools import partial

@jax.jit
def normalize_and_count(x, count):
    n = jnp.sqrt(jnp.sum(jnp.square(x)))
    return (x / n, jnp.add(count, 1))

@jax.jit
def debug_norm(x):
    n = jnp.sqrt(jnp.vdot(x, x))
    jax.debug.print("norm={n}", n=n)
    return x / n

mean_abs = jax.jit(lambda x: jnp.abs(x).mean())

@jax.jit
def power_iteration(A, v0, n_steps):
    def cond(state):
        return state[0] < n_steps

    def body(state):
        i, v = state
        w = A @ v
        return i + 1, w / jnp.linalg.norm(w)

    return jax.lax.while_loop(cond, body, (0, v0))[1]

@jax.jit
def ema(xs, alpha):
    def step(prev, x):
        cur = alpha * x + (1.0 - alpha) * prev
        return cur, cur

    return jax.lax.scan(step, xs[0], xs)[1]
