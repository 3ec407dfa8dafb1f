# expect-failed: softmax_raw.pure
# expect-hint: softmax_raw.pure=check:mutated
# why: "saves memory" by shifting a NumPy input in place
# base: solution


import numpy as np

def softmax_raw(x):
    if isinstance(x, np.ndarray):
        x -= x.max(axis=-1, keepdims=True)
    else:
        x = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(x)
    return e / jnp.sum(e, axis=-1, keepdims=True)

@jax.jit
def log_softmax(x):
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
