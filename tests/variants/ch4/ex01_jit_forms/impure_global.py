# expect-failed: softmax_raw.pure
# expect-hint: softmax_raw.pure=check:globals
# why: records every input in a module-level list
# base: solution


seen_shapes = []

def softmax_raw(x):
    seen_shapes.append(tuple(x.shape))
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(shifted)
    return e / jnp.sum(e, axis=-1, keepdims=True)

@jax.jit
def log_softmax(x):
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
