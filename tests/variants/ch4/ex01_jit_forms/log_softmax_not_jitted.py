# expect-failed: log_softmax.jitted
# expect-skipped: compiles
# why: the decorator is missing
# base: solution


def softmax_raw(x):
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(shifted)
    return e / jnp.sum(e, axis=-1, keepdims=True)

def log_softmax(x):
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
