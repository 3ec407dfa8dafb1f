# expect-failed: flops_of.values
# why: adds the transcendental count to the FLOPs
# base: solution


def precompile(fn, *example_args):
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*example_args).compile()

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
    cost = precompile(fn, *args).cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0]
    return float(cost["flops"] + cost.get("transcendentals", 0.0))
