# expect-failed: log_softmax.values
# why: log(softmax(x)) underflows to -inf for large |x|
# base: solution


def softmax_raw(x):
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(shifted)
    return e / jnp.sum(e, axis=-1, keepdims=True)

@jax.jit
def log_softmax(x):
    return jnp.log(softmax_raw(x))
