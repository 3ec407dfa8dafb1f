# expect-failed:
# why: correct, written differently: logsumexp, keyword axis, jax.nn for the log form
import functools

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp


def softmax_raw(x):
    return jnp.exp(x - logsumexp(x, axis=-1, keepdims=True))


softmax = jax.jit(softmax_raw)


@functools.partial(jax.jit)
def log_softmax(x):
    return jax.nn.log_softmax(x, axis=-1)
