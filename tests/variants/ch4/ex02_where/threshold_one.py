# expect-failed: normalize_if_positive.values
# why: total > 1 for total > 0: a sum in (0, 1] is returned unchanged (it survived every seed before
#      the hidden inputs held such a sum)
"""第 4 章 · 练习 2：把 Python 的 if 换成 jnp.where（第一节）
Chapter 4 · Exercise 2: a Python `if` becomes `jnp.where` (section 1)

中文：
  三个函数都已经用 @jax.jit 装饰，对任意形状的数组逐元素成立。在 jit 里，
  `if x.sum() > 0:` 这样依赖具体数值的 Python 分支会报错（追踪时数值未知），
  请用 jnp.where 同时算出两条分支、再按条件选择。
  - piecewise(x)：x > 0 处取 x * x，否则取 0.5 * x。
  - normalize_if_positive(x)：若 x.sum() > 0 返回 x / x.sum()，否则原样返回 x
    （和为 0 时也返回 x，不能出现 NaN 或 inf）。
  - clip_by_norm(x, max_norm)：若 ||x||（所有元素的 L2 范数）> max_norm，返回
    x * (max_norm / ||x||)，否则返回 x。max_norm 是动态的浮点数，不要设为静态参数。

English:
  All three are already decorated with @jax.jit and work elementwise on arrays of any
  shape. Inside jit a Python branch on a value, such as `if x.sum() > 0:`, fails (the
  value is unknown while tracing): compute both branches and choose with jnp.where.
  - piecewise(x): x * x where x > 0, else 0.5 * x.
  - normalize_if_positive(x): x / x.sum() if x.sum() > 0, else x unchanged (a zero
    sum returns x, never NaN or inf).
  - clip_by_norm(x, max_norm): x * (max_norm / ||x||) if ||x|| (the L2 norm over all
    elements) > max_norm, else x. max_norm is a dynamic float: do not make it static.

运行 / Run:  grade exercises/ch4 -k ex02
"""
import jax
import jax.numpy as jnp


@jax.jit
def piecewise(x):
    """x > 0 处为 x*x，否则 0.5*x。/ x*x where x > 0, else 0.5*x."""
    return jnp.where(x > 0, x * x, 0.5 * x)


@jax.jit
def normalize_if_positive(x):
    """和为正时除以和，否则原样返回。/ Divide by the sum when it is positive, else return x."""
    total = jnp.sum(x)
    positive = total > 1
    safe_total = jnp.where(positive, total, 1.0)
    return jnp.where(positive, x / safe_total, x)


@jax.jit
def clip_by_norm(x, max_norm):
    """范数超过 max_norm 时按比例缩小。/ Scale x down when its norm exceeds max_norm."""
    norm = jnp.sqrt(jnp.sum(x * x))
    too_long = norm > max_norm
    scale = max_norm / jnp.where(too_long, norm, 1.0)
    return jnp.where(too_long, x * scale, x)
