"""An exercise that times nothing compiles its programs with XLA's classic CPU emitters, at LLVM's
optimization level 0 (:mod:`grader.child.quick_compile`): the same values to their last bits, the
same lowered program, the same cost analysis, keyed apart from programs compiled the default way;
what is timed is compiled as JAX compiles it by default; a jaxlib that does not know an option
compiles without it.

XLA's CPU compiler reads the options from the module's ``DebugOptions``
(openxla/xla ``xla/service/cpu/cpu_compiler.cc``: ``CpuCompiler::RunHloPassesThroughLayoutAssn``
and ``RunHloPassesAfterLayoutAssn`` read ``debug_options().xla_cpu_use_fusion_emitters()``;
without the emitters a scatter is expanded into a loop, and a fusion is emitted as LLVM IR;
``CodeGenOptLevel`` reads ``xla_backend_optimization_level()`` for the JIT, ``SimpleOrcJIT::Create``); a
compile is given them among its options (``CompileOptions.env_option_overrides``, which XLA
refuses by name when it does not know one: "No such compile option"), and JAX hashes those
options into a program's cache key (``jax/_src/cache_key.py``,
``_hash_serialized_compile_options``). JAX makes the options for every compile in
``jax/_src/compiler.py`` ``get_compile_options`` and hands them to ``compile_or_get_cached``,
which the job wraps.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from grader.chapter import load_chapter
from grader.child.quick_compile import QUICK, TIMED_CATEGORIES, setting

# A spy under the job's wrapper: the options each compile was given (``seen``), as XLA gets them.
_SPY = """
    seen = []
    inner = compiler.compile_or_get_cached
    def spy(backend, computation, devices, options, *args, **kwargs):
        seen.append(sorted(str(name) for name, _ in options.env_option_overrides))
        return inner(backend, computation, devices, options, *args, **kwargs)
    compiler.compile_or_get_cached = spy
"""

# Functions like the chapter's (its solutions' and a student's usual shapes), compiled the
# default way, quickly, or with an option XLA does not know; each compile's added options seen
# by a spy under the wrapper.
_SCRIPT = """
    import hashlib, json, sys
    import numpy as np, jax, jax.numpy as jnp
    from jax._src import compiler
    from grader.child import quick_compile
    mode, cache = sys.argv[1], sys.argv[2]
    if cache != "-":
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    hits = []
    jax.monitoring.register_event_listener(
        lambda name, **kw: hits.append(name) if name.endswith("cache_hits") else None)
""" + _SPY + """    if mode == "quick":
        assert quick_compile.quick_compiles()
    elif mode == "unknown":
        assert quick_compile.quick_compiles((("xla_cpu_no_such_option_anywhere", False),))
    if mode == "quick":  # an option of the student's own that XLA refuses: their error, raised, and quick stays on
        try:
            jax.jit(lambda v: v + 1).lower(np.float32(1)).compile({"xla_cpu_students_own_typo": True})
            raise SystemExit("a student's unknown option was not refused")
        except jax.errors.JaxRuntimeError as exc:
            assert "xla_cpu_students_own_typo" in str(exc)
        seen.clear()
    rng = np.random.default_rng(4)
    x = rng.normal(size=(50, 30)).astype(np.float32)
    w = rng.normal(size=(30, 20)).astype(np.float32)
    a = (rng.normal(size=(12, 12)) / 4).astype(np.float32)
    def softmax(x):
        e = jnp.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    def piecewise(x):
        return jnp.where(x > 0, x ** 2, jnp.where(x < -1, -x, jnp.sin(x)))
    def clip_by_norm(x):
        n = jnp.sqrt(jnp.sum(x * x))
        return jnp.where(n > 1.0, x / n, x)
    def mean_sq(x):
        return jnp.mean(x * x)
    def power_iteration(a):
        v = jnp.ones(a.shape[0]) / a.shape[0]
        v = jax.lax.fori_loop(0, 20, lambda i, v: (a @ v) / jnp.linalg.norm(a @ v), v)
        return v @ (a @ v)
    def ema(x):
        return jax.lax.scan(lambda c, r: (0.7 * c + 0.3 * r, c), jnp.zeros(x.shape[1]), x)[1]
    def layer_norm(x):
        return (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)
    def mlp(x, w):
        return jnp.tanh(x @ w) @ w.T
    def sum_exp(x):
        return jnp.sum(jnp.exp(x) * x + x * x)
    cases = [(softmax, (x,)), (piecewise, (x,)), (clip_by_norm, (x,)), (mean_sq, (x,)), (power_iteration, (a,)),
             (ema, (x,)), (layer_norm, (x,)), (mlp, (x, w)), (sum_exp, (x,))]
    out = {"values": [], "arrays": [], "lowered": [], "flops": []}
    for fn, args in cases:
        lowered = jax.jit(fn).lower(*args)
        out["lowered"].append(hashlib.sha256(lowered.as_text().encode()).hexdigest())
        out["flops"].append(float(lowered.compile().cost_analysis().get("flops", -1.0)))
        value = np.asarray(jax.jit(fn)(*args))
        out["values"].append(hashlib.sha256(value.tobytes()).hexdigest())
        out["arrays"].append(value.ravel().tolist())
    out["seen"], out["hits"] = seen, len(hits)
    print(json.dumps(out))
"""


def _compile(mode: str, cache: Path | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_SCRIPT), mode, str(cache) if cache else "-"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


#: how far a quick program's values may be from the default way's, against the largest of them: three
#: units of float32's eps measured (a fori_loop's power iteration), four allowed
LAST_BITS = 4 * float(np.finfo(np.float32).eps)


def test_quick_programs_compute_what_the_default_ones_do_to_the_last_bits():
    default, quick = _compile("default"), _compile("quick")
    options = [name for name, _ in QUICK]
    assert default["seen"] and not any(name in seen for seen in default["seen"] for name in options)
    # every compile, the eager ones too, with every option
    assert quick["seen"] and all(name in seen for seen in quick["seen"] for name in options)
    for fast, usual in zip(quick["arrays"], default["arrays"], strict=True):
        fast, usual = np.float32(fast), np.float32(usual)
        assert fast.shape == usual.shape
        assert np.max(np.abs(fast - usual)) <= LAST_BITS * np.max(np.abs(usual)), (fast, usual)
    assert quick["lowered"] == default["lowered"]  # what a program-size check reads
    assert quick["flops"] == default["flops"]  # what ex08's flops_of reads


def test_an_option_xla_does_not_know_is_dropped_after_the_first_compile():
    default, unknown = _compile("default"), _compile("unknown")
    assert unknown["values"] == default["values"]
    tried = [seen for seen in unknown["seen"] if "xla_cpu_no_such_option_anywhere" in seen]
    assert len(tried) == 1  # the first compile, refused by XLA; that program and every later one without it
    assert len(unknown["seen"]) == len(default["seen"]) + 1


def test_programs_compiled_one_way_are_not_loaded_for_the_other(tmp_path):
    cache = tmp_path / "cache"
    first = _compile("quick", cache)
    assert first["hits"] == 0
    assert _compile("default", cache)["hits"] == 0  # the default way's keys are not the quick ones
    again = _compile("quick", cache)
    assert again["hits"] >= len(first["values"])  # each quick program, found again by its own key


def test_what_is_timed_is_compiled_the_default_way():
    chapter = load_chapter("ch4")
    quick = {ex.id: ex.quick_compile for ex in chapter.exercises}
    timing = {ex.id for ex in chapter.exercises if ex.timed or {c.category for c in ex.checks} & TIMED_CATEGORIES}
    assert timing == {"ex05_timing", "ex06_speedup"}
    assert {ex for ex, q in quick.items() if not q} == timing
    # ex06 compiles quickly what it does not time (its values, its compile window), until its timing begins
    assert {ex.id for ex in chapter.exercises if ex.quick_until_timed} == {"ex06_speedup"}
    assert setting({}, False, {"numeric", "compile"}) is True
    assert setting({}, True, {"numeric"}) is False
    assert setting({}, False, {"harness"}) is False
    assert setting({"quick_compile": False}, False, {"numeric"}) is False  # the author's word wins
    assert setting({"quick_compile": True}, False, {"speedup"}) is True


def test_an_exercise_toml_says_quick_compile_as_a_bool(tmp_path):
    import shutil
    import tomllib

    from grader.exercise_folder import ChapterError

    chapter = load_chapter("ch4")
    ex = next(e for e in chapter.exercises if e.id == "ex02_where")
    folder = tmp_path / "ch4"
    shutil.copytree(chapter.folder, folder)
    words = folder / ex.id / "exercise.toml"
    words.write_text('quick_compile = "yes"\n' + words.read_text(encoding="utf-8"), encoding="utf-8")
    from grader.exercise_folder import read_exercise

    data = tomllib.loads(words.read_text(encoding="utf-8"))
    with pytest.raises(ChapterError, match="quick_compile must be a bool"):
        read_exercise(folder / ex.id, data, "ch4", {ex.section: ex.error_sections[""]}, {}, {})


def test_the_class_compiler_compiles_with_the_option_it_was_sent():
    from jax._src.lib import xla_client as xc

    from grader.child.compiler import _without_dumps

    options = xc.CompileOptions()
    options.env_option_overrides = [("xla_dump_to", "/somewhere"), (QUICK[0][0], QUICK[0][1])]
    kept = _without_dumps(xc.CompileOptions.ParseFromString(options.SerializeAsString()))
    assert [name for name, _ in kept.env_option_overrides] == [QUICK[0][0]]


def test_a_grading_compiles_quickly_only_what_it_does_not_time(tmp_path):
    env = {**os.environ, "GRADER_CACHE_DIR": str(tmp_path / "cache"), "GRADER_BUILD": "0"}
    done = subprocess.run([sys.executable, "-m", "grader", "solutions/ch4", "-k", "ex02", "-k", "ex05", "--json",
                           "--report-dir", str(tmp_path / "report")], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["score"] == report["max_score"]
    timings = report["timings"]
    assert timings["ex02_where"]["student_work"]["quick"] == 1
    assert timings["ex02_where"]["reference_work"]["quick"] == 1
    assert timings["ex05_timing"]["student_work"]["quick"] == 0


# A job that compiles quickly until its timing begins (ex06: quick_until_timed): a function called at the same
# shapes before and after ``timing_begins`` compiles again, the second time without the quick options, and the
# program it then runs is the default way's; a job that never compiled quickly keeps its caches.
_UNTIL_TIMED = """
    import json, sys
    import numpy as np, jax, jax.numpy as jnp
    from jax._src import compiler
    from grader.child import quick_compile
""" + _SPY + """    quick = sys.argv[1] == "quick"
    if quick:
        assert quick_compile.quick_compiles()
    f = jax.jit(lambda x: jnp.sum(jnp.exp(x) * x))
    x = jnp.asarray(np.linspace(-1, 1, 300, dtype=np.float32))
    before = float(f(x))
    during = quick_compile.compiling_quickly()
    first = len(seen)
    began = quick_compile.timing_begins()
    after = float(f(x))
    print(json.dumps({"seen": seen, "first": first, "during": during, "began": began,
                      "again": quick_compile.timing_begins(), "now": quick_compile.compiling_quickly(),
                      "before": before, "after": after}))
"""


@pytest.mark.parametrize("mode", ["quick", "default"])
def test_timing_begins_compiles_what_follows_the_default_way_and_drops_the_quick_programs(mode):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_UNTIL_TIMED), mode], capture_output=True,
                          text=True, cwd=ROOT, timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    options = {name for name, _ in QUICK}
    quick = [s for s in out["seen"][:out["first"]] if options <= set(s)]
    later = out["seen"][out["first"]:]
    if mode == "quick":
        assert out["during"] and out["began"] and not out["again"] and not out["now"]
        assert quick, out["seen"]  # the function's program, compiled quickly before the timing
        # after it, the same call at the same shapes compiles again (the quick program is not called), the default way
        assert later and not any(options & set(s) for s in later), later
        assert abs(out["after"] - out["before"]) <= LAST_BITS * abs(out["before"])
    else:  # never quick: timing_begins changes nothing, and the program compiled before is called again
        assert not out["during"] and not out["began"] and not quick
        assert later == [] and out["after"] == out["before"]


_SERVE = """
    import json
    from grader.primitives import timing
    from grader.protocol import ToJob, message
    said = []
    class Probe:
        def timing_begins(self):
            said.append("timing_begins")
        def request(self):
            return message(ToJob.STOP)
        def reply(self, answer):
            said.append("reply")
        def record(self, key, value):
            said.append(key)
    timing.serve_timing(Probe(), {"case": (lambda: said.append("baseline"), lambda: said.append("candidate"), ())})
    print(json.dumps(said))
"""


def test_serve_timing_begins_the_timing_before_its_own_warm_up():
    """Where a probe did not call ``timing_begins`` before preparing what it times, ``serve_timing`` does
    before warming it up again: what it times is compiled the default way, never a quick program. (In a
    process of its own: serving pins the process to one CPU.)"""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_SERVE)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said[0] == "timing_begins" and "baseline" in said and "candidate" in said, said


def test_ex06_compiles_quickly_until_it_times_and_its_verdicts_hold(tmp_path):
    chapter = load_chapter("ch4")
    assert [ex.id for ex in chapter.exercises if ex.quick_until_timed] == ["ex06_speedup"]
    env = {**os.environ, "GRADER_CACHE_DIR": str(tmp_path / "cache"), "GRADER_BUILD": "0"}
    done = subprocess.run([sys.executable, "-m", "grader", "solutions/ch4", "-k", "ex06", "--json",
                           "--report-dir", str(tmp_path / "report")], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["score"] == report["max_score"]
    assert report["timings"]["ex06_speedup"]["student_work"]["quick"] == 1
    assert report["timings"]["ex06_speedup"]["reference_work"]["quick"] == 1
