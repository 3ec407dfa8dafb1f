# expect-failed:
# why: correct, written differently: the norm printed rounded to three decimals ({:.3f}), judged at the
#      precision printed
# base: solution


@jax.jit
def debug_norm(x):
    """每次调用都打印 norm=<值>。/ Prints norm=<value> on every call."""
    norm = jnp.linalg.norm(x)
    jax.debug.print("norm={:.3f}", norm)
    return x / norm
