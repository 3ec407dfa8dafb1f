# expect-failed: precompile.compiled
# expect-skipped: precompile.calls
# expect-hint: precompile.compiled=check:compiles_lazily
# why: returns the jitted function: it compiles on its first call, not ahead of time
# base: solution


def precompile(fn, *example_args):
    return fn if hasattr(fn, "lower") else jax.jit(fn)

def count_primitives(fn, *args):
    counts = collections.Counter()

    def visit(jaxpr):
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] += 1
            for sub in jaxprs_in_params(eqn.params):
                visit(sub)

    visit(jax.make_jaxpr(fn)(*args).jaxpr)
    return dict(counts)

def flops_of(fn, *args):
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    cost = jitted.lower(*args).compile().cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0]
    return float(cost["flops"])
