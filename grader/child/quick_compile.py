"""Programs of an exercise that times nothing, compiled by XLA's classic CPU emitters.

XLA's CPU compiler emits each fusion through MLIR by default (its "fusion emitters");
setting up MLIR for every fusion is most of what compiling a small program costs here.
Its classic emitters write the same loops as LLVM IR directly (and XLA expands a scatter
into a loop for them: openxla/xla ``xla/service/cpu/cpu_compiler.cc``): compiling a typical
small program takes about 30 % less CPU, and every value of ``tests/test_quick_compile.py``
(elementwise work, reductions, dots, loops, scans; exp, sin, tanh, log1p) is the same bit
for bit, run as fast. Elsewhere a value may differ in its last bits (a sum over a whole
array may add its terms in another order: of the chapter's gradings, one mistaken
softmax's error changed in its ninth digit, ``scripts/report_snapshot.py``); every verdict
stayed the same, and both sides of an exercise compile alike. A few kinds of program
take longer: a whole-array reduction
of a transcendental (``sum(exp(x) * x)``) about twice as long, LLVM's vectorizer unrolling
it (narrower vectors would fix that, but change the order of a dot's sums: values would
differ in their last bit). The compiled module's text differs only in how a lone
reduction is wrapped (``Compiled.as_text()``); the lowered program, its cost analysis
(``flops``) and every compile count are unchanged.

A job of an exercise whose checks time nothing (:attr:`grader.exercise_folder.ExerciseSpec.quick_compile`)
adds the option to the compiler's options of every program it compiles or looks up
(``env_option_overrides``, which JAX's cache key includes: a program compiled one way is
never loaded for the other, and the class's compiler, sent the options, compiles it the
same way). What is timed (a speed-up, a timing harness) is compiled as JAX compiles
it by default. A jaxlib that does not know the option says so on the first compile
(``No such compile option``); that program and every later one are compiled without it.
"""
from __future__ import annotations

#: the compiler's options an exercise that times nothing compiles with (name, value)
QUICK = (("xla_cpu_use_fusion_emitters", False),)
#: what XLA says of an option it does not know
UNKNOWN = "No such compile option"


def quick_compiles(options: tuple = QUICK) -> bool:
    """Compile every program of this job with ``options`` added (see the module); ``False`` where JAX
    has no such place to hook (programs are compiled as before)."""
    from grader.child.jax_setup import around_compiles, unmark_compiles
    from grader.trusted import safe_str

    known = [True]

    def make(compile_or_get_cached):
        def quickly(backend, computation, devices, compile_options, *args, **kwargs):
            if not known[0] or not hasattr(compile_options, "env_option_overrides"):
                return compile_or_get_cached(backend, computation, devices, compile_options, *args, **kwargs)
            before = list(compile_options.env_option_overrides or [])
            named = {str(name) for name, _ in before}
            added = [(name, value) for name, value in options if name not in named]
            compile_options.env_option_overrides = before + added
            try:
                return compile_or_get_cached(backend, computation, devices, compile_options, *args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - told apart below: only an unknown option of ours is ours
                said = safe_str(exc)
                if not added or UNKNOWN not in said or not any(name in said for name, _ in added):
                    raise  # the program's own error, or an option the student's code gave
                known[0] = False
                compile_options.env_option_overrides = before
                unmark_compiles()  # the reference's mark of the program under the key it will never have
                return compile_or_get_cached(backend, computation, devices, compile_options, *args, **kwargs)

        return quickly

    return around_compiles("quick", make)


#: the categories of checks whose verdicts rest on timing what was compiled
TIMED_CATEGORIES = frozenset({"speedup", "harness"})


def setting(data: dict, timed: bool, categories: set[str]) -> bool:
    """Whether an exercise's programs are compiled quickly: its ``exercise.toml``'s ``quick_compile``,
    else yes unless the exercise is timed or has a check of what is timed (a speed-up, a timing harness)."""
    if "quick_compile" in data:
        return bool(data["quick_compile"])
    return not timed and not categories & TIMED_CATEGORIES
