# expect-failed: softmax.values
# why: exp without subtracting the max overflows for |x| ~ 1e4
# base: solution


def softmax_raw(x):
    e = jnp.exp(x)
    return e / jnp.sum(e, axis=-1, keepdims=True)

@jax.jit
def log_softmax(x):
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
