"""第 4 章 · 练习 6：加速实战（第四节）
Chapter 4 · Exercise 6: speed-up in practice (section 4)

中文：
  下面“提供的代码”是未编译（eager）的版本，请勿修改：评分器用自己的副本作为
  基准和参考值，改动它们得不到任何分数。
  - fast_heavy：heavy 的 jit 版本。
  - layer_norm(x, gamma, beta, eps=1e-5)：向量化并用 jit 编译的层归一化，数值与
    layer_norm_loop 相同（每行减去均值、除以 sqrt(有偏方差 + eps)，再 * gamma + beta）；
    eps 是动态参数。
  评分器在你的设备上交替测量你的版本和参考答案相对 eager 版本的加速比，你的
  加速收益需达到参考答案收益的一定比例。

English:
  The provided code below is the eager (uncompiled) version: do not change it. The
  grader times and trusts its own copy; altering it gains nothing.
  - fast_heavy: the jitted heavy.
  - layer_norm(x, gamma, beta, eps=1e-5): a vectorised, jitted layer norm with the
    same values as layer_norm_loop (subtract each row's mean, divide by
    sqrt(biased variance + eps), then * gamma + beta); eps is dynamic.
  The grader measures, on your device and alternating between the two, your
  version's and the reference's speed-up over the eager code; your gain must reach
  a set fraction of the reference's.

运行 / Run:  grade exercises/ch4 -k ex06
"""
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


# BEGIN SOLUTION
fast_heavy = jax.jit(heavy)
# END SOLUTION
# BEGIN STUB
#| # TODO(ex06)：fast_heavy 是 heavy 的 jit 版本；替换下面的占位函数。
#| # TODO(ex06): fast_heavy is the jitted heavy; replace this placeholder.
#| def fast_heavy(x, w, b):
#|     raise NotImplementedError("ex06: fast_heavy")
# END STUB


# BEGIN SOLUTION
@jax.jit
# END SOLUTION
# BEGIN STUB
#| # TODO(ex06)：用 jax.jit 编译；eps 是动态参数。/ TODO(ex06): jit it; eps is dynamic.
# END STUB
def layer_norm(x, gamma, beta, eps=1e-5):
    """向量化的层归一化（沿最后一个轴）。/ Vectorised layer norm over the last axis."""
    # BEGIN SOLUTION
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * gamma + beta
    # END SOLUTION
    # BEGIN STUB
    #| # TODO(ex06)：一次性对所有行计算均值与有偏方差（axis=-1, keepdims=True）。
    #| # TODO(ex06): mean and biased variance of all rows at once (axis=-1, keepdims=True).
    #| raise NotImplementedError("ex06: layer_norm")
    # END STUB
# BEGIN SOLUTION


def _layer_norm_float64(x, gamma, beta, eps):
    """评分器的 float64 参考值（在参考答案的进程中计算），不属于练习。
    The grader's float64 reference values (computed in the reference's process); not part of the exercise."""
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)
# END SOLUTION
# BEGIN STUB
# END STUB
