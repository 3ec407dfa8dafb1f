# expect-failed: softmax_raw.pure
# expect-hint: softmax_raw.pure=check:hidden_state
# why: keeps every input's shape in a mutable default argument (_seen=[]): hidden state that changes no module global
# base: solution


def softmax_raw(x, _seen=[]):
    _seen.append(tuple(x.shape))
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(shifted)
    return e / jnp.sum(e, axis=-1, keepdims=True)

@jax.jit
def log_softmax(x):
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
