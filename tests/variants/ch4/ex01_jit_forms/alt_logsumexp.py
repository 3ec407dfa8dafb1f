# expect-failed:
# why: correct, written differently: logsumexp, keyword axis, jax.nn for the log form
# base: solution


import functools

from jax.scipy.special import logsumexp

def softmax_raw(x):
    return jnp.exp(x - logsumexp(x, axis=-1, keepdims=True))

@functools.partial(jax.jit)
def log_softmax(x):
    return jax.nn.log_softmax(x, axis=-1)
