# expect-failed: count_primitives.values
# why: counts the top level only: nested programs are skipped
# base: solution


def precompile(fn, *example_args):
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*example_args).compile()

def count_primitives(fn, *args):
    counts = collections.Counter(eqn.primitive.name for eqn in jax.make_jaxpr(fn)(*args).jaxpr.eqns)
    return dict(counts)

def flops_of(fn, *args):
    cost = precompile(fn, *args).cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0]
    return float(cost["flops"])
