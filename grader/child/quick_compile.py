"""Programs of an exercise that times nothing, compiled by XLA's classic CPU emitters, unoptimized.

XLA's CPU compiler emits each fusion through MLIR by default (its "fusion emitters");
setting up MLIR for every fusion is much of what compiling a small program costs here.
Its classic emitters write the same loops as LLVM IR directly (and XLA expands a scatter
into a loop for them: openxla/xla ``xla/service/cpu/cpu_compiler.cc``). The rest is LLVM
optimizing that IR: XLA's ``xla_backend_optimization_level`` (3 unless set) is the level the
CPU compiler gives its JIT (``CodeGenOptLevel``, handed to ``SimpleOrcJIT::Create`` in the same
file). An exercise that times nothing asks for level 0: nothing it judges depends on how fast
its programs run (its inputs are small), only on what they compute.
Measured on the programs of ``tests/test_quick_compile.py`` (softmax, piecewise ``where``,
norms, a ``fori_loop``, a ``scan``, a dot and ``tanh``, a whole-array sum of ``exp``): 0.28 to
0.33 core-seconds for the nine against 1.61 to 1.68 the default way (1.72 to 1.75 with the classic
emitters at level 3), 5 to 6 times less
(2026-12-07; a whole-array sum of ``exp``, twice as slow to compile with the classic
emitters at level 3, 4 to 5 times quicker than the default way at level 0). Each call of a
small program then takes some tens of microseconds longer.

The values are the same but for their last bits (optimized code may fuse a multiply and an
add into one instruction, XLA allowing it, and add a reduction's terms across vector lanes,
XLA allowing reductions to be reassociated: ``allow_reassociation`` in the same file). Of the test's nine
programs five differ in their last bits (at most three units of float32's ``eps``, against
the largest value); of the chapter's gradings (``scripts/report_snapshot.py``: the solutions,
the stubs and every variant, 113 reports) every verdict is the same, and the numbers that
differ are the seventh digit of ex07's printed norms and an error of ``6e-8`` for ``3e-8``.
Both sides of an exercise compile alike, so what is compared is computed alike. The
lowered program, its cost analysis (``flops``) and every compile count are unchanged.

A job of an exercise whose checks time nothing (:attr:`grader.exercise_folder.ExerciseSpec.quick_compile`)
adds the options to the compiler's options of every program it compiles or looks up
(``env_option_overrides``, which JAX's cache key includes: a program compiled one way is
never loaded for the other, and the class's compiler, sent the options, compiles it the
same way). What is timed (a speed-up, a timing harness) is compiled as JAX compiles
it by default. An exercise that times some of its programs may compile the others quickly
(:attr:`~grader.exercise_folder.ExerciseSpec.quick_until_timed`: ex06, whose values, compile
window and repeated calls come first): its job compiles quickly until :func:`timing_begins`
(:meth:`grader.child.probe.ProbeContext.timing_begins`, which its probe calls before it
prepares what it times, and :func:`grader.primitives.timing.serve_timing` calls before its
own warm-up in any case), which empties JAX's in-memory caches: no program compiled quickly
is called again, and everything from there on, the eager baseline's operations too, is
compiled the default way (its key the default one). A jaxlib that does not know an option
says so on the first compile (``No such compile option``); that program and every later one
are compiled without them.
"""
from __future__ import annotations

#: the compiler's options an exercise that times nothing compiles with (name, value): the classic
#: emitters, and LLVM's optimization level 0
QUICK = (("xla_cpu_use_fusion_emitters", False), ("xla_backend_optimization_level", 0))
#: what XLA says of an option it does not know
UNKNOWN = "No such compile option"
#: whether this job compiles quickly now: ``quick_compiles`` installed it, ``timing_begins`` ended it
_NOW = {"on": False}


def quick_compiles(options: tuple = QUICK) -> bool:
    """Compile every program of this job with ``options`` added (see the module); ``False`` where JAX
    has no such place to hook (programs are compiled as before)."""
    from grader.child.jax_setup import around_compiles, unmark_compiles
    from grader.trusted import safe_str

    known = [True]

    def make(compile_or_get_cached):
        def quickly(backend, computation, devices, compile_options, *args, **kwargs):
            if not known[0] or not _NOW["on"] or not hasattr(compile_options, "env_option_overrides"):
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

    installed = around_compiles("quick", make)
    _NOW["on"] = installed
    return installed


def compiling_quickly() -> bool:
    """Whether this job's next program is compiled quickly."""
    return _NOW["on"]


def timing_begins() -> bool:
    """From here on this job compiles the default way, what it times and all else; where it compiled
    quickly until now, JAX's in-memory caches are emptied (``jax.clear_caches``: the jitted functions'
    programs and the eager operations'), so that nothing compiled quickly is called again: a function
    called next at the same shapes compiles (or loads) its program again, under the default key.
    ``True`` where it compiled quickly until now; else nothing is done."""
    if not _NOW["on"]:
        return False
    import jax

    _NOW["on"] = False
    jax.clear_caches()
    return True


#: the categories of checks whose verdicts rest on timing what was compiled
TIMED_CATEGORIES = frozenset({"speedup", "harness"})


def setting(data: dict, timed: bool, categories: set[str]) -> bool:
    """Whether an exercise's programs are compiled quickly: its ``exercise.toml``'s ``quick_compile``,
    else yes unless the exercise is timed or has a check of what is timed (a speed-up, a timing harness)."""
    if "quick_compile" in data:
        return bool(data["quick_compile"])
    return not timed and not categories & TIMED_CATEGORIES
