# expect-failed: softmax_raw.pure
# expect-hint: softmax_raw.pure=check:not_same
# why: a random factor (well within the tolerance) from a generator kept at module level: two calls on one input differ
"""第 4 章 · 练习 1：@jit 的两种写法（第一节）
Chapter 4 · Exercise 1: the two ways to write @jit (section 1)

中文：
  - softmax_raw(x)：普通 Python 函数（不要加 jit），沿最后一个轴计算数值稳定的
    softmax：先减去最大值，再取指数、归一化。输入的绝对值可达 1e4，结果必须有限。
  - softmax：用“包装写法”得到的 jit 版本，即把 softmax_raw 交给 jax.jit。
  - log_softmax(x)：用“装饰器写法”（@jax.jit）定义，沿最后一个轴的数值稳定 log-softmax。
  softmax_raw 必须是纯函数：同样的输入给出同样的输出，不修改全局变量，不打印。

English:
  - softmax_raw(x): a plain Python function (no jit) computing a numerically stable
    softmax over the last axis: subtract the maximum, exponentiate, normalise.
    Inputs reach magnitudes of 1e4 and the result must stay finite.
  - softmax: the jitted version obtained with the wrapped form, jax.jit applied to
    softmax_raw.
  - log_softmax(x): defined with the decorator form (@jax.jit); a numerically stable
    log-softmax over the last axis.
  softmax_raw must be pure: same input, same output; no global changes; no printing.

运行 / Run:  grade exercises/ch4 -k ex01
"""
import jax
import jax.numpy as jnp
import numpy as np

_noise = np.random.default_rng(0)  # seeded: the same run twice prints the same report


def softmax_raw(x):
    """数值稳定的 softmax（最后一个轴）。/ Numerically stable softmax over the last axis."""
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(shifted)
    return e / jnp.sum(e, axis=-1, keepdims=True) * (1 + 2e-6 * _noise.random())


softmax = jax.jit(softmax_raw)


@jax.jit
def log_softmax(x):
    """数值稳定的 log-softmax（最后一个轴）。/ Numerically stable log-softmax over the last axis."""
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
