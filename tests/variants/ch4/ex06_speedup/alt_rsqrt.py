# expect-failed:
# why: correct, written differently: a decorated copy for fast_heavy, rsqrt and jnp.var
import jax
import jax.numpy as jnp
import numpy as np

# ===== 提供的代码，请勿修改 / PROVIDED CODE, DO NOT CHANGE =====


def heavy(x, w, b):
    return jnp.mean(jnp.tanh(x @ w + b) ** 2, axis=-1)


def layer_norm_loop(x, gamma, beta, eps=1e-5):
    rows = []
    for i in range(x.shape[0]):
        row = x[i]
        mean = jnp.mean(row)
        var = jnp.mean((row - mean) ** 2)
        rows.append((row - mean) / jnp.sqrt(var + eps) * gamma + beta)
    return jnp.stack(rows)


# ===== 提供的代码结束 / END OF PROVIDED CODE =====


@jax.jit
def fast_heavy(x, w, b):
    h = jnp.tanh(jnp.dot(x, w) + b)
    return (h * h).mean(axis=-1)


from functools import partial


@partial(jax.jit)
def layer_norm(x, gamma, beta, eps=1e-5):
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred * jax.lax.rsqrt(jnp.var(x, axis=-1, keepdims=True) + eps) * gamma + beta
