# expect-failed:
# why: correct, written differently: layer_norm donates x (donate_argnums=(0,), the train-step idiom): JAX deletes x after each call, so every call, timed ones too, needs inputs of its own
from functools import partial

import jax
import jax.numpy as jnp

# ===== 提供的代码，请勿修改 / PROVIDED CODE, DO NOT CHANGE =====


def heavy(x, w, b):
    """逐元素复合运算 + 归约（eager）。/ Elementwise work plus a reduction (eager)."""
    return jnp.mean(jnp.tanh(x @ w + b) ** 2, axis=-1)


def layer_norm_loop(x, gamma, beta, eps=1e-5):
    """逐行的 Python 循环版层归一化（eager）。/ Row-by-row Python-loop layer norm (eager)."""
    rows = []
    for i in range(x.shape[0]):
        row = x[i]
        mean = jnp.mean(row)
        var = jnp.mean((row - mean) ** 2)
        rows.append((row - mean) / jnp.sqrt(var + eps) * gamma + beta)
    return jnp.stack(rows)


# ===== 提供的代码结束 / END OF PROVIDED CODE =====


fast_heavy = jax.jit(heavy)


@partial(jax.jit, donate_argnums=(0,))
def layer_norm(x, gamma, beta, eps=1e-5):
    """向量化的层归一化（沿最后一个轴）。/ Vectorised layer norm over the last axis."""
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * gamma + beta
