# expect-failed:
# why: correct, written differently: flops_of lowers from jax.ShapeDtypeStruct placeholders and keeps its own estimates by shape (a cache of what it computed, unlike a lookup of the release's records)
import collections

import jax
from jax.extend.core import jaxprs_in_params


def precompile(fn, *example_args):
    """提前编译。/ Compile ahead of time."""
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*example_args).compile()


def count_primitives(fn, *args):
    """每一层嵌套中各原语的出现次数。/ Primitive counts over every nesting level."""
    counts = collections.Counter()

    def visit(jaxpr):
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] += 1
            for sub in jaxprs_in_params(eqn.params):
                visit(sub)

    visit(jax.make_jaxpr(fn)(*args).jaxpr)
    return dict(counts)


_estimates = {}  # its own estimates, by function and argument shapes: computed once, never looked up elsewhere


def flops_of(fn, *args):
    """编译器估计的浮点运算次数（按形状缓存）。/ The compiler's FLOP estimate (cached by shape)."""
    shapes = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args)
    key = (fn, tuple((s.shape, str(s.dtype)) for s in shapes))
    if key not in _estimates:
        compiled = jax.jit(fn).lower(*shapes).compile()  # lowered from shapes alone, no values
        _estimates[key] = float(compiled.cost_analysis()["flops"])
    return _estimates[key]
