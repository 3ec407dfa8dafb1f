# expect-failed: fast_heavy.jitted
# expect-skipped: fast_heavy.speedup
# why: fast_heavy is the eager function itself
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


fast_heavy = heavy


@jax.jit
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * gamma + beta
