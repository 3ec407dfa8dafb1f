# expect-failed: debug_norm.values
# why: prints the norm but returns x itself
# base: solution


@jax.jit
def debug_norm(x):
    """每次调用都打印 norm=<值>。/ Prints norm=<value> on every call."""
    norm = jnp.linalg.norm(x)
    jax.debug.print("norm={}", norm)
    return x
