# expect-failed:
# why: correct, written differently: softmax_raw made by a factory (a closure over its settings), with a default argument and a mutable default it only reads: state that never changes is not state
# base: solution


def _make_softmax(axis):
    def softmax_raw(x, keepdims=True, _options={"shift": "max"}):
        assert _options["shift"] == "max"
        shifted = x - jnp.max(x, axis=axis, keepdims=keepdims)
        e = jnp.exp(shifted)
        return e / jnp.sum(e, axis=axis, keepdims=keepdims)

    return softmax_raw

softmax_raw = _make_softmax(-1)

@jax.jit
def log_softmax(x, axis=-1):
    shifted = x - jnp.max(x, axis=axis, keepdims=True)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True))
