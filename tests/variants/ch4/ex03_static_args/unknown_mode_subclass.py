# expect-failed:
# why: correct, written differently: the unknown mode raises a subclass of ValueError, as jax.nn-style
#      libraries do (class UnknownActivationError(ValueError)); isinstance says it is a ValueError
"""第 4 章 · 练习 3：静态参数与动态参数（第三节）
Chapter 4 · Exercise 3: static versus dynamic arguments (section 3)

中文：
  四个函数都要用 jax.jit 编译。请判断每个参数是“动态”的（只作为张量参与运算，
  改值不重编译）还是“静态”的（值决定计算图的样子，用 static_argnums 或
  static_argnames 声明，值变化就重编译）。连续变化的浮点超参数不要设为静态。
  - poly(x, coeff)：coeff * x ** 2 + 1.0；coeff 动态。
  - repeat_scale(x, n_steps)：用 Python 循环把 x 乘以 1.5，共 n_steps 次；n_steps
    静态（评分时以关键字调用：repeat_scale(x, n_steps=3)）。
  - reduce_along(x, axis)：jnp.sum(x, axis=axis)；axis 静态。
  - activate(x, mode, alpha)：mode 为 "relu"（max(x, 0)，不用 alpha）、"leaky_relu"
    （x > 0 取 x，否则 alpha * x）、"elu"（x > 0 取 x，否则 alpha * (exp(x) - 1)）、
    "tanh"（alpha * tanh(x)）之一；mode 静态，alpha 是动态浮点数。未知的 mode
    抛出 ValueError。

English:
  All four are compiled with jax.jit. Decide for each argument whether it is dynamic
  (used only as a tensor value; changing it does not recompile) or static (its value
  shapes the graph; declare it with static_argnums or static_argnames; a new value
  recompiles). Continuous float hyper-parameters are not static.
  - poly(x, coeff): coeff * x ** 2 + 1.0; coeff dynamic.
  - repeat_scale(x, n_steps): multiply x by 1.5, n_steps times, with a Python loop;
    n_steps static (the grader calls it by keyword: repeat_scale(x, n_steps=3)).
  - reduce_along(x, axis): jnp.sum(x, axis=axis); axis static.
  - activate(x, mode, alpha): mode is one of "relu" (max(x, 0), alpha unused),
    "leaky_relu" (x if x > 0 else alpha * x), "elu" (x if x > 0 else
    alpha * (exp(x) - 1)), "tanh" (alpha * tanh(x)); mode static, alpha a dynamic
    float. An unknown mode raises ValueError.

运行 / Run:  grade exercises/ch4 -k ex03
"""
from functools import partial

import jax
import jax.numpy as jnp


@jax.jit
def poly(x, coeff):
    """coeff * x ** 2 + 1.0"""
    return coeff * x ** 2 + 1.0


@partial(jax.jit, static_argnames=("n_steps",))
def repeat_scale(x, n_steps):
    """用 Python 循环乘以 1.5，共 n_steps 次。/ Multiply by 1.5, n_steps times, in a Python loop."""
    for _ in range(n_steps):
        x = x * 1.5
    return x


@partial(jax.jit, static_argnames=("axis",))
def reduce_along(x, axis):
    """jnp.sum(x, axis=axis)"""
    return jnp.sum(x, axis=axis)


class UnknownActivationError(ValueError):
    """An activation this module does not know (a ValueError, as libraries write it)."""


@partial(jax.jit, static_argnames=("mode",))
def activate(x, mode, alpha):
    """按 mode 选择激活函数。/ The activation named by mode."""
    if mode == "relu":
        return jnp.maximum(x, 0.0)
    if mode == "leaky_relu":
        return jnp.where(x > 0, x, alpha * x)
    if mode == "elu":
        return jnp.where(x > 0, x, alpha * (jnp.exp(x) - 1.0))
    if mode == "tanh":
        return alpha * jnp.tanh(x)
    raise UnknownActivationError(f"unknown mode {mode!r}")
