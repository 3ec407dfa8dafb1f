# expect-failed: piecewise.traceable
# expect-skipped: piecewise.values, compiles
# expect-hint: piecewise.traceable=hint.exception
# why: a typo (y for x): a NameError, reported as what it is, with its line and no hint about Python ifs
# base: solution


@jax.jit
def piecewise(x):
    """x > 0 处为 x*x，否则 0.5*x。/ x*x where x > 0, else 0.5*x."""
    return jnp.where(x > 0, x * x, 0.5 * y)
