"""The grader's own copy of ex06's provided code (the eager baselines).

The grader times and trusts this copy, never the one in the student's module: a
student who edits the provided code gains nothing. A test keeps it identical to the
provided block of solutions/ch4/ex06_speedup.py.
"""
import jax.numpy as jnp


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
