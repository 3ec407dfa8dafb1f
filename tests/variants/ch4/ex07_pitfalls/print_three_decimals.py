# expect-failed:
# why: correct, written differently: the norm printed rounded to three decimals ({:.3f}), judged at the
#      precision printed
"""第 4 章 · 练习 7：常见误区，改正它们（第四节 · 常见误区）
Chapter 4 · Exercise 7: common mistakes, fixed (section 4, pitfalls)

中文：
  五个函数都用 jax.jit 编译。jit 里的 Python 代码只在追踪时运行一次：print 只打印
  一次，全局变量的累加只发生一次，.item() / float() 无法作用于追踪中的值，Python
  循环会被展开成很长的计算图。
  - normalize_and_count(x, count)：返回 (x / ||x||, count + 1)；状态通过参数和返回值
    传递，不要保存在模块级全局变量里。
  - debug_norm(x)：每次调用都用 jax.debug.print 打印 `norm=<值>`，返回 x / ||x||。
  - mean_abs(x)：|x| 的均值，返回 0 维数组（不要 .item()，不要 float()）。
  - power_iteration(A, v0, n_steps)：从 v0 开始，重复 n_steps 次
    `v = A @ v; v = v / ||v||`，用 jax.lax.fori_loop；n_steps 是动态参数。
  - ema(xs, alpha)：沿 0 轴的指数滑动平均，用 jax.lax.scan：s[0] = xs[0]，
    s[t] = alpha * xs[t] + (1 - alpha) * s[t-1]；返回全部 s（形状同 xs）。

English:
  All five are jitted. Python code inside jit runs once, while tracing: print prints
  once, a global accumulator adds once, .item() / float() cannot read a traced value,
  and a Python loop unrolls into a long graph.
  - normalize_and_count(x, count): returns (x / ||x||, count + 1); the state goes
    through arguments and results, never into a module global.
  - debug_norm(x): prints `norm=<value>` on every call with jax.debug.print and
    returns x / ||x||.
  - mean_abs(x): the mean of |x| as a 0-d array (no .item(), no float()).
  - power_iteration(A, v0, n_steps): n_steps times `v = A @ v; v = v / ||v||`,
    starting from v0, with jax.lax.fori_loop; n_steps is dynamic.
  - ema(xs, alpha): exponential moving average along axis 0 with jax.lax.scan:
    s[0] = xs[0], s[t] = alpha * xs[t] + (1 - alpha) * s[t-1]; returns every s (same
    shape as xs).

运行 / Run:  grade exercises/ch4 -k ex07
"""
import jax
import jax.numpy as jnp


@jax.jit
def normalize_and_count(x, count):
    """返回 (x / ||x||, count + 1)。/ Returns (x / ||x||, count + 1)."""
    return x / jnp.linalg.norm(x), count + 1


@jax.jit
def debug_norm(x):
    """每次调用都打印 norm=<值>。/ Prints norm=<value> on every call."""
    norm = jnp.linalg.norm(x)
    jax.debug.print("norm={:.3f}", norm)
    return x / norm


@jax.jit
def mean_abs(x):
    """|x| 的均值，0 维数组。/ Mean of |x| as a 0-d array."""
    return jnp.mean(jnp.abs(x))


@jax.jit
def power_iteration(A, v0, n_steps):
    """幂迭代 n_steps 次（fori_loop）。/ n_steps power-iteration steps (fori_loop)."""
    def step(_, v):
        v = A @ v
        return v / jnp.linalg.norm(v)

    return jax.lax.fori_loop(0, n_steps, step, v0)


@jax.jit
def ema(xs, alpha):
    """沿 0 轴的指数滑动平均（scan）。/ Exponential moving average along axis 0 (scan)."""
    def step(state, x):
        state = alpha * x + (1 - alpha) * state
        return state, state

    _, rest = jax.lax.scan(step, xs[0], xs[1:])
    return jnp.concatenate([xs[:1], rest], axis=0)
