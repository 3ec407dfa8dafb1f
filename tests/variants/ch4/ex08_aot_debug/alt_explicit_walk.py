# expect-failed:
# why: correct, written differently: trace().lower().compile(), an explicit walk of every param
# base: solution


def precompile(fn, *example_args):
    traced = (fn if hasattr(fn, "trace") else jax.jit(fn)).trace(*example_args)
    return traced.lower().compile()

def _jaxprs(value):
    if hasattr(value, "eqns"):
        yield value
    elif hasattr(value, "jaxpr") and hasattr(value.jaxpr, "eqns"):
        yield value.jaxpr
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _jaxprs(item)

def count_primitives(fn, *args):
    counts = {}
    stack = [jax.make_jaxpr(fn)(*args).jaxpr]
    while stack:
        jaxpr = stack.pop()
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
            for value in eqn.params.values():
                stack.extend(_jaxprs(value))
    return counts

def flops_of(fn, *args):
    analysis = precompile(fn, *args).cost_analysis()
    first = analysis[0] if isinstance(analysis, list) else analysis
    return float(first.get("flops", 0.0))
