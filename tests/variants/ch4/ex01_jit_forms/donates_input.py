# expect-failed:
# why: correct, written differently: softmax and log_softmax donate their input (donate_argnums=(0,)): JAX deletes it after the call, so the grader never hands an array over twice
# base: solution


from functools import partial

softmax = jax.jit(softmax_raw, donate_argnums=(0,))

@partial(jax.jit, donate_argnums=(0,))
def log_softmax(x):
    """数值稳定的 log-softmax（最后一个轴）。/ Numerically stable log-softmax over the last axis."""
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
