# expect-failed:
# why: correct, written differently: jax.nn.softmax inside, a lambda-free wrapped form
# base: solution


def softmax_raw(x):
    x = jnp.asarray(x)
    return jax.nn.softmax(x, axis=x.ndim - 1)

def _log_softmax(x):
    m = jax.lax.stop_gradient(x.max(axis=-1, keepdims=True))
    z = x - m
    return z - jnp.log(jnp.exp(z).sum(axis=-1, keepdims=True))

log_softmax = jax.jit(_log_softmax)
