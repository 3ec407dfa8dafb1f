# expect-failed: layer_norm.speedup
# expect-hint: layer_norm.speedup=check:callback
# why: jitted, but computed on the host with NumPy through a callback
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


fast_heavy = jax.jit(heavy)


def _ln_numpy(x, gamma, beta, eps):
    x, gamma, beta, eps = (np.asarray(a) for a in (x, gamma, beta, eps))
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + eps) * gamma + beta).astype(np.float32)


@jax.jit
def layer_norm(x, gamma, beta, eps=1e-5):
    return jax.pure_callback(_ln_numpy, jax.ShapeDtypeStruct(x.shape, jnp.float32), x, gamma, beta, eps)
