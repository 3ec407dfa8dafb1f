# expect-failed:
# why: correct, written differently: softmax wraps a functools.partial of softmax_raw (the axis bound), log_softmax a jax.named_call (the report names both, never "?")
# base: solution


import functools

def softmax_raw(x, axis=-1):
    shifted = x - jnp.max(x, axis=axis, keepdims=True)
    e = jnp.exp(shifted)
    return e / jnp.sum(e, axis=axis, keepdims=True)

softmax = jax.jit(functools.partial(softmax_raw, axis=-1))

@jax.jit
@functools.partial(jax.named_call, name="log_softmax_core")
def log_softmax(x):
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
