# expect-failed:
# why: correct, written differently: flops_of lowers from jax.ShapeDtypeStruct placeholders and keeps its own estimates by shape (a cache of what it computed, unlike a lookup of the release's records)
# base: solution


_estimates = {}  # its own estimates, by function and argument shapes: computed once, never looked up elsewhere

def flops_of(fn, *args):
    """编译器估计的浮点运算次数（按形状缓存）。/ The compiler's FLOP estimate (cached by shape)."""
    shapes = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args)
    key = (fn, tuple((s.shape, str(s.dtype)) for s in shapes))
    if key not in _estimates:
        compiled = jax.jit(fn).lower(*shapes).compile()  # lowered from shapes alone, no values
        _estimates[key] = float(compiled.cost_analysis()["flops"])
    return _estimates[key]
