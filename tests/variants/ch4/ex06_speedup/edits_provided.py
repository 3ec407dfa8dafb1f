# expect-failed: fast_heavy.values
# expect-skipped: fast_heavy.speedup
# expect-hint: fast_heavy.values=check:provided_changed
# why: "optimises" the provided heavy itself; the grader compares with and times its own copy
import jax
import jax.numpy as jnp

# ===== 提供的代码，请勿修改 / PROVIDED CODE, DO NOT CHANGE =====


def heavy(x, w, b):
    return jnp.zeros(x.shape[0], jnp.float32)


def layer_norm_loop(x, gamma, beta, eps=1e-5):
    import time

    time.sleep(0.05)  # a slower baseline would flatter the speed-up, if the grader used it
    return (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + eps) * gamma + beta


# ===== 提供的代码结束 / END OF PROVIDED CODE =====

fast_heavy = jax.jit(heavy)


@jax.jit
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * gamma + beta
