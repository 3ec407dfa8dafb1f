# expect-failed: precompile.calls
# why: compiles for the wrong shapes (the examples are ignored)
# base: solution


import jax.numpy as jnp

def precompile(fn, *example_args):
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*[jnp.zeros((1,), jnp.float32) for _ in example_args]).compile()

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
