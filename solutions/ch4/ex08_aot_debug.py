"""第 4 章 · 练习 8：提前编译与检查计算图（第二、四节）
Chapter 4 · Exercise 8: ahead-of-time compilation and inspection (sections 2, 4)

中文：
  - precompile(fn, *example_args)：返回针对这些参数形状编译好的可执行对象：fn 还
    没有 jit 时用 jax.jit(fn).lower(...).compile()，已经 jit 过时用
    fn.lower(...).compile()。之后用同样形状的新数值调用它，不会再编译。
  - count_primitives(fn, *args)：fn 在 args 上追踪出的计算图（jax.make_jaxpr）中
    各个原语名出现的次数，dict[str, int]。要统计每一层嵌套：容器方程本身
    （jit/pjit、while、cond、scan 等）以及它们所含子图中的每一个方程。
  - flops_of(fn, *args)：编译器对 fn 在 args 上的浮点运算次数估计，取自编译产物的
    cost_analysis()，返回 float。

English:
  - precompile(fn, *example_args): return the executable compiled for those argument
    shapes: jax.jit(fn).lower(...).compile() when fn is not jitted yet, else
    fn.lower(...).compile(). Calling it later on new values of the same shapes
    compiles nothing.
  - count_primitives(fn, *args): a dict[str, int] of the primitive names in the
    traced program (jax.make_jaxpr) of fn on args, counting every equation at every
    nesting level: the container equations (jit/pjit, while, cond, scan, ...) and
    every equation of every sub-program they hold.
  - flops_of(fn, *args): the compiler's floating-point operation estimate for fn on
    args, from the compiled executable's cost_analysis(), as a float.

运行 / Run:  grade exercises/ch4 -k ex08
"""
import collections

import jax
from jax.extend.core import jaxprs_in_params


def precompile(fn, *example_args):
    """提前编译。/ Compile ahead of time."""
    # BEGIN SOLUTION
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*example_args).compile()
    # END SOLUTION
    # BEGIN STUB
    #| # TODO(ex08)：lower(...) 之后还要 compile()。/ TODO(ex08): lower(...), then compile().
    #| raise NotImplementedError("ex08: precompile")
    # END STUB


def count_primitives(fn, *args):
    """每一层嵌套中各原语的出现次数。/ Primitive counts over every nesting level."""
    # BEGIN SOLUTION
    counts = collections.Counter()

    def visit(jaxpr):
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] += 1
            for sub in jaxprs_in_params(eqn.params):
                visit(sub)

    visit(jax.make_jaxpr(fn)(*args).jaxpr)
    return dict(counts)
    # END SOLUTION
    # BEGIN STUB
    #| # TODO(ex08)：遍历 jax.make_jaxpr(fn)(*args).jaxpr 的 eqns，并递归进入子图
    #| #             （eqn.params 中的 jaxpr；jax.extend.core.jaxprs_in_params 可以帮忙）。
    #| # TODO(ex08): walk the eqns of jax.make_jaxpr(fn)(*args).jaxpr and recurse into
    #| #             sub-programs (the jaxprs in eqn.params;
    #| #             jax.extend.core.jaxprs_in_params helps).
    #| raise NotImplementedError("ex08: count_primitives")
    # END STUB


def flops_of(fn, *args):
    """编译器估计的浮点运算次数。/ The compiler's FLOP estimate."""
    # BEGIN SOLUTION
    cost = precompile(fn, *args).cost_analysis()
    if isinstance(cost, (list, tuple)):  # older JAX versions return one dict per device
        cost = cost[0]
    return float(cost["flops"])
    # END SOLUTION
    # BEGIN STUB
    #| # TODO(ex08)：precompile(...).cost_analysis()["flops"]。
    #| raise NotImplementedError("ex08: flops_of")
    # END STUB
