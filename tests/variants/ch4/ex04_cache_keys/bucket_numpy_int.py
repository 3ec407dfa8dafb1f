# expect-failed: bucket_length.values
# why: bucket_length returns numpy.int64, not the Python int the contract asks for; the buckets are right,
#      so masked_mean_sq pads and compiles right and loses nothing
"""第 4 章 · 练习 4：形状重编译与分桶（第二节）
Chapter 4 · Exercise 4: shape recompiles and buckets (section 2)

中文：
  jit 的缓存键包含输入的形状与 dtype：每出现一种新长度就会重新编译一次。把长度
  “分桶”（向上补齐到 2 的幂），就能让任意长度只落在少数几个形状上。
  - bucket_length(n)：不小于 n、且不小于 8 的最小 2 的幂（普通 Python int 进出，
    n >= 1）。
  - masked_mean_sq(x)：x 是长度 1..1024 的一维数据（NumPy float32、float64、int32
    数组，或 Python 列表）；返回真实元素上 x ** 2 的均值，类型为 float32 的 0 维
    JAX 数组。要求：在主机上（用 NumPy）补齐到 bucket_length(len(x))，再调用一个
    jit 编译的核心函数，把真实长度或掩码作为动态参数传入。这样，所有长度和这些
    dtype 加起来，每个桶最多编译一次。注意：在 jit 之外调用的 jnp 运算（如
    jnp.pad、jnp.asarray(x, dtype)）也会触发编译，同样计入次数。

English:
  jit's cache key holds the input shapes and dtypes: every new length compiles
  again. Rounding lengths up into buckets (powers of two) maps any length onto a few
  shapes.
  - bucket_length(n): the smallest power of two that is >= n and >= 8 (a plain
    Python int in and out; n >= 1).
  - masked_mean_sq(x): x is 1-D data of length 1..1024 (a NumPy float32, float64 or
    int32 array, or a Python list); return the mean of x ** 2 over its real elements
    as a float32 0-d JAX array. Pad to bucket_length(len(x)) on the host (with NumPy)
    and call one jitted core with the real length or a mask as a dynamic argument,
    so that all lengths and those dtypes together cost at most one compile per
    bucket. Mind that jnp operations called outside jit (jnp.pad,
    jnp.asarray(x, dtype), ...) compile too, and they count.

运行 / Run:  grade exercises/ch4 -k ex04
"""
import jax
import jax.numpy as jnp
import numpy as np


def bucket_length(n):
    """>= n 且 >= 8 的最小 2 的幂。/ The smallest power of two >= n and >= 8."""
    return np.int64(max(8, 1 << (int(n) - 1).bit_length()))


@jax.jit
def _mean_sq_core(padded, length):
    mask = jnp.arange(padded.shape[0]) < length
    return jnp.sum(jnp.where(mask, padded * padded, 0.0)) / length


def masked_mean_sq(x):
    """真实元素上 x**2 的均值（float32 0 维数组）。/ Mean of x**2 over the real elements (float32, 0-d)."""
    values = np.asarray(x, dtype=np.float32).reshape(-1)
    length = values.shape[0]
    padded = np.zeros(bucket_length(length), dtype=np.float32)
    padded[:length] = values
    return _mean_sq_core(padded, length)
