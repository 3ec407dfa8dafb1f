# expect-failed: softmax.jitted
# expect-skipped: compiles
# why: softmax is an alias of the plain function, not the jitted one
# base: solution


def softmax_raw(x):
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(shifted)
    return e / jnp.sum(e, axis=-1, keepdims=True)

softmax = softmax_raw

@jax.jit
def log_softmax(x):
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
