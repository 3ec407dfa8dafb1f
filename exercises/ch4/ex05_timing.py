"""第 4 章 · 练习 5：写一个正确的计时工具（第四节）
Chapter 4 · Exercise 5: a correct timing harness (section 4)

中文：
  可信的计时要做到：先预热（首次调用包含追踪与编译）；每次调用后用
  jax.block_until_ready 等结果真正算完（JAX 是异步派发的）；用 time.perf_counter
  逐次计时并取中位数（不受偶发的慢调用影响）；单位是秒。
  - time_call(fn, *args, warmup=1, iters=20)：先不计时地调用 fn(*args) 共 warmup 次，
    再调用 iters 次，每次用 time.perf_counter 计时并等待结果完成；返回每次调用的
    秒数的中位数（Python float）。fn 恰好被调用 warmup + iters 次。
  - speedup(eager_fn, jit_fn, *args, warmup=1, iters=20)：eager_fn 的 time_call
    除以 jit_fn 的 time_call，返回 float。

English:
  A trustworthy timing warms up first (the first call traces and compiles), waits
  for each result with jax.block_until_ready (JAX dispatches asynchronously), times
  every call with time.perf_counter and takes the median (robust to an occasional
  slow call), and reports seconds.
  - time_call(fn, *args, warmup=1, iters=20): call fn(*args) `warmup` times untimed,
    then `iters` times, timing each call with time.perf_counter and waiting for its
    result; return the median seconds per call as a Python float. fn is called
    exactly warmup + iters times.
  - speedup(eager_fn, jit_fn, *args, warmup=1, iters=20): time_call of eager_fn over
    time_call of jit_fn, as a float.

运行 / Run:  grade exercises/ch4 -k ex05
"""
import statistics
import time

import jax


def time_call(fn, *args, warmup=1, iters=20):
    """每次调用的秒数中位数。/ Median seconds per call."""
    # TODO(ex05)：预热、block_until_ready、perf_counter、中位数、秒。
    # TODO(ex05): warm up, block_until_ready, perf_counter, median, seconds.
    raise NotImplementedError("ex05: time_call")


def speedup(eager_fn, jit_fn, *args, warmup=1, iters=20):
    """eager 耗时 / jit 耗时。/ Eager time over jitted time."""
    # TODO(ex05)：复用 time_call。/ TODO(ex05): reuse time_call.
    raise NotImplementedError("ex05: speedup")
