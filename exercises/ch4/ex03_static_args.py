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


# TODO(ex03)：用 jax.jit 编译；coeff 是动态参数。/ TODO(ex03): jit it; coeff is dynamic.
def poly(x, coeff):
    """coeff * x ** 2 + 1.0"""
    raise NotImplementedError("ex03: poly")


# TODO(ex03)：用 jax.jit 编译；n_steps 决定循环展开多少次，该是静态还是动态？
# TODO(ex03): jit it; n_steps decides how far the loop unrolls: static or dynamic?
def repeat_scale(x, n_steps):
    """用 Python 循环乘以 1.5，共 n_steps 次。/ Multiply by 1.5, n_steps times, in a Python loop."""
    raise NotImplementedError("ex03: repeat_scale")


# TODO(ex03)：用 jax.jit 编译；axis 是轴编号。/ TODO(ex03): jit it; axis is an axis number.
def reduce_along(x, axis):
    """jnp.sum(x, axis=axis)"""
    raise NotImplementedError("ex03: reduce_along")


# TODO(ex03)：用 jax.jit 编译；mode 选择分支，alpha 是连续的超参数。
# TODO(ex03): jit it; mode picks a branch, alpha is a continuous hyper-parameter.
def activate(x, mode, alpha):
    """按 mode 选择激活函数。/ The activation named by mode."""
    # TODO(ex03)：未知的 mode 抛出 ValueError。/ TODO(ex03): an unknown mode raises ValueError.
    raise NotImplementedError("ex03: activate")
