# expect-failed: fast_heavy.speedup
# expect-hint: fast_heavy.speedup=check:callback
# why: jitted, but the work goes back to the host through a callback to NumPy on every call
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


def _heavy_numpy(x, w, b):
    h = np.tanh(np.asarray(x) @ np.asarray(w) + np.asarray(b))
    return np.mean(h * h, axis=-1).astype(np.float32)


@jax.jit
def fast_heavy(x, w, b):
    out = jax.ShapeDtypeStruct((x.shape[0],), jnp.float32)
    return jax.pure_callback(_heavy_numpy, out, x, w, b)


@jax.jit
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * gamma + beta
