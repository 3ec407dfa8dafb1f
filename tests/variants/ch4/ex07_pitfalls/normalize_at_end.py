# expect-failed: power_iteration.values
# expect-hint: power_iteration.values=check:overflow
# why: normalises once at the end: A^n v0 overflows float32 for large n
# base: solution


@jax.jit
def power_iteration(A, v0, n_steps):
    """幂迭代 n_steps 次（fori_loop）。/ n_steps power-iteration steps (fori_loop)."""
    v = jax.lax.fori_loop(0, n_steps, lambda _, v: A @ v, v0)
    return v / jnp.linalg.norm(v)
