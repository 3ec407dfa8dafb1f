"""What makes a grading fast, each shown to do its work and to change no result.

* the grader's own bytecode is written once and reused (:func:`grader.bytecode.keep_bytecode`);
* TOML files are parsed once per content (:func:`grader.i18n.read_toml`);
* folder digests are read again when a file changes (:func:`grader.outcomes.folder_digest`);
* accelerator plugins are told from their metadata folders' names (:func:`grader.outcomes.machine`);
* the reference's job makes only the records its checks read (``Keys(reference=...)``);
* a job lowers its programs in one MLIR context and compiles the same programs;
* a host freezes what it imported before it forks jobs, and looks for JAX plugins once for them.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from conftest import ROOT, SOLUTIONS, variant

from grader import bytecode, i18n, outcomes, store
from grader.checks import Keys
from grader.child.probe import FAILED, ProbeContext


# ------------------------------------------------------------------ bytecode
def test_bytecode_is_written_once_and_again_when_a_module_changes(tmp_path):
    package = tmp_path / "pkg"
    shutil.copytree(ROOT / "grader" / "primitives", package, ignore=shutil.ignore_patterns("__pycache__"))
    sources = sorted(package.rglob("*.py"))
    assert bytecode.keep_bytecode(package) == len(sources)
    tag = sys.implementation.cache_tag
    assert all((s.parent / "__pycache__" / f"{s.stem}.{tag}.pyc").is_file() for s in sources)
    assert bytecode.keep_bytecode(package) == 0  # up to date: nothing compiled again

    changed = sources[0]
    changed.write_text(changed.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    os.utime(changed, (changed.stat().st_atime, changed.stat().st_mtime + 5))
    assert bytecode.keep_bytecode(package) == 1

    # Python itself accepts what was written (timestamped bytecode for this source)
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r}); "
                           "sys.dont_write_bytecode = True; import importlib.util, pkg.numeric; "
                           "print(pkg.numeric.__cached__)"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_file()


def test_bytecode_that_cannot_be_written_is_left_alone(tmp_path):
    """A package the grader may not write to (here: ``__pycache__`` is a file, which stops root
    too) costs nothing but the compiling: no error, nothing written."""
    package = tmp_path / "ro"
    package.mkdir()
    (package / "m.py").write_text("x = 1\n", encoding="utf-8")
    (package / "__pycache__").write_text("not a folder\n", encoding="utf-8")
    assert bytecode.keep_bytecode(package) == 0
    assert (package / "__pycache__").read_text(encoding="utf-8") == "not a folder\n"


def test_a_grading_leaves_the_graders_bytecode_for_the_next(tmp_path, monkeypatch):
    """After one grading, every module of the grader has bytecode its hosts can read."""
    from grader.grading import GradeOptions, grade

    grade(SOLUTIONS, GradeOptions(exercises=("ex02",), seed=5))
    tag = sys.implementation.cache_tag
    missing = [str(p.relative_to(ROOT)) for p in (ROOT / "grader").rglob("*.py")
               if not (p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc").is_file()]
    assert not missing, missing


# ------------------------------------------------------------------ TOML
def test_toml_is_read_from_its_cache_with_the_same_table(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('[greeting]\nen = "hello"\nzh = "你好"\n[n]\nen = "1"\nzh = "一"\n', encoding="utf-8")
    first = i18n.read_toml(path)
    assert first == tomllib.loads(path.read_text(encoding="utf-8"))
    i18n._tables.clear()  # a new process: the table comes from the cache folder
    assert i18n.read_toml(path) == first
    stored = list((store.root() / "toml").glob("*.json"))
    assert any(json.loads(p.read_text(encoding="utf-8")) == first for p in stored)


def test_a_changed_toml_file_is_parsed_again(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('a = "one"\n', encoding="utf-8")
    assert i18n.read_toml(path) == {"a": "one"}
    path.write_text('a = "two"\n', encoding="utf-8")  # same size, same second
    assert i18n.read_toml(path) == {"a": "two"}
    path.write_text('a = "two\n', encoding="utf-8")
    with pytest.raises(tomllib.TOMLDecodeError):
        i18n.read_toml(path)


# ------------------------------------------------------------------ digests and the machine
def test_a_folder_digest_follows_its_files(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    first = outcomes.folder_digest(tmp_path)
    assert outcomes.folder_digest(tmp_path) == first
    (tmp_path / "a.py").write_text("x = 2\n", encoding="utf-8")  # same size
    assert outcomes.folder_digest(tmp_path) != first
    (tmp_path / "notes.txt").write_text("not code\n", encoding="utf-8")
    second = outcomes.folder_digest(tmp_path)
    (tmp_path / "b.toml").write_text("k = 1\n", encoding="utf-8")
    assert outcomes.folder_digest(tmp_path) != second


def test_a_folder_digest_follows_its_subfolders(tmp_path):
    """A chapter's exercises are folders: a change to one exercise's code or words is a change
    of the chapter; a moved file too (the same bytes under another exercise)."""
    (tmp_path / "ex01_a").mkdir()
    (tmp_path / "ex01_a" / "__init__.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "ex01_a" / "exercise.toml").write_text("k = 1\n", encoding="utf-8")
    first = outcomes.folder_digest(tmp_path)
    (tmp_path / "ex01_a" / "exercise.toml").write_text("k = 2\n", encoding="utf-8")  # same size
    second = outcomes.folder_digest(tmp_path)
    assert second != first
    (tmp_path / "ex01_a" / "__init__.py").rename(tmp_path / "__init__.py")
    assert outcomes.folder_digest(tmp_path) != second
    (tmp_path / "ex01_a" / "__pycache__").mkdir()
    third = outcomes.folder_digest(tmp_path)
    (tmp_path / "ex01_a" / "__pycache__" / "stale.py").write_text("y = 1\n", encoding="utf-8")
    assert outcomes.folder_digest(tmp_path) == third  # what Python writes for itself is no content


def test_an_accelerator_plugin_changes_the_machine(tmp_path, monkeypatch):
    plain = outcomes.machine()
    site = tmp_path / "site"
    (site / "jax_cuda12_plugin-0.10.2.dist-info").mkdir(parents=True)
    (site / "numpy-2.0.0.dist-info").mkdir()
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    outcomes._machine.cache_clear()
    try:
        assert outcomes.machine() == plain + "|jax-cuda12-plugin"
    finally:
        outcomes._machine.cache_clear()


# ------------------------------------------------------------------ the reference's records
class _Channel:
    def __init__(self):
        self.sent = []

    def send(self, message):
        self.sent.append(message)


def test_keys_name_what_the_reference_records():
    keys = Keys(value="{name}/values/{case}", window="{name}/compiles", reference=("value",))
    assert keys.for_reference(keys.value(name="f", case="a"))
    assert not keys.for_reference(keys.window(name="f"))
    assert Keys(value="v/{i}").for_reference("v/1")  # no declaration: everything
    with pytest.raises(ValueError, match="window"):
        Keys(value="v/{i}", reference=("value", "window"))


def test_a_reference_job_skips_the_work_of_records_no_check_reads(tmp_path):
    import types

    keys = Keys(value="{name}/values/{case}", window="{name}/compiles", trace="{name}/trace", reference=("value",))
    calls = []
    module = types.SimpleNamespace(f=lambda x: calls.append(x) or x * 2)
    for keep, expected_calls, expected_keys in ((None, [1, 2, 3], {"f/values/a", "f/compiles", "f/trace"}),
                                                (keys.for_reference, [3], {"f/values/a"})):
        calls.clear()
        channel = _Channel()
        ctx = ProbeContext(channel, module, {}, str(tmp_path), str(tmp_path), keep=keep)
        with ctx.compiles(keys.window(name="f")):
            assert ctx.call("f/compiles/0", "f", 1) is (FAILED if keep else 2)
            ctx.call(None, "f", 2) if keep is None else None
        ctx.record(keys.trace(name="f"), {"status": "ok"})
        assert ctx.call(keys.value(name="f", case="a"), "f", 3) == 6
        recorded = {m["key"] for m in channel.sent if m["op"] == "obs"}
        assert calls == expected_calls
        assert recorded - {"f/compiles/0"} == expected_keys


def test_keys_name_what_only_the_reference_records():
    keys = Keys(value="{name}/values/{i}", eager="eager/{i}", reference_only=("eager",))
    assert keys.for_student(keys.value(name="f", i=0)) and not keys.for_student(keys.eager(i=0))
    assert keys.for_reference(keys.eager(i=0))
    assert Keys(value="v/{i}").for_student("v/1")  # no declaration: everything
    with pytest.raises(ValueError, match="eager"):
        Keys(value="v/{i}", reference_only=("eager",))
    with pytest.raises(ValueError, match="reference_only"):
        Keys(value="v/{i}", eager="e/{i}", reference=("value",), reference_only=("eager",))


def _both_outcomes(monkeypatch, exercise: str, **options):
    """Grade the solutions' ``exercise`` (full marks); the student's and the reference's job outcomes."""
    import grader.sides
    from grader.grading import GradeOptions, grade

    seen = {}
    original = grader.sides.judge

    def spy(ex, student, reference, **kwargs):
        seen[ex.id] = (student, reference)
        return original(ex, student, reference, **kwargs)

    monkeypatch.setattr(grader.sides, "judge", spy)
    report = grade(SOLUTIONS, GradeOptions(exercises=(exercise,), seed=11, **options))
    assert report.score == report.exercises[0].max_score
    return next(iter(seen.values()))


def test_the_students_job_of_ex06_skips_the_graders_own_eager_heavy(monkeypatch):
    """ex06's checks read the provided eager ``heavy``'s values from the reference's run alone: the student's
    job neither computes nor records them (it cost every student a dozen eager programs); the reference's does."""
    student, reference = _both_outcomes(monkeypatch, "ex06")
    assert not [key for key in student.records if key.startswith("heavy/eager/")]
    assert {"heavy/eager/0", "heavy/eager/1"} <= set(reference.records)
    assert "fast_heavy/values/0" in student.records and "heavy/student" in student.records


def test_the_reference_job_writes_no_xla_dump_and_records_values_only(monkeypatch):
    student, reference = _both_outcomes(monkeypatch, "ex02", compile_cache=False)
    assert student.xla_compiles and student.xla_compiles > 0  # the student's compiles are counted by XLA too
    assert reference.xla_compiles is None
    assert reference.records and all("/values/" in key for key in reference.records)
    assert any("/trace" in key for key in student.records)


# ------------------------------------------------------------------ in the child
def _child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_one_mlir_context_lowers_the_same_programs():
    done = _child("""
        import jax, jax.numpy as jnp
        from jax._src.interpreters import mlir
        fns = [lambda x: jnp.where(x > 0, x * 2.0, -x), lambda x: jnp.tanh(x).sum(), lambda x: x @ x.T]
        x = jnp.arange(12.0).reshape(3, 4) - 5
        before = [jax.jit(f).lower(x).as_text() for f in fns]
        values = [jax.jit(f)(x) for f in fns]
        from grader.child.jax_setup import LOWERINGS_PER_CONTEXT, one_mlir_context
        one_mlir_context()
        first = mlir.make_ir_context()
        assert all(mlir.make_ir_context() is first for _ in range(LOWERINGS_PER_CONTEXT - 1))
        assert mlir.make_ir_context() is not first  # a fresh one now and then: constants are not kept forever
        after = [jax.jit(f).lower(x).as_text() for f in fns]
        assert before == after, "the programs differ"
        jax.clear_caches()
        again = [jax.jit(f)(x) for f in fns]
        assert all((a == b).all() for a, b in zip(values, again))
        print("same")
    """)
    assert done.returncode == 0 and done.stdout.strip() == "same", done.stderr[-2000:]


def test_a_host_makes_its_jobs_first_mlir_context_before_forking_and_stays_one_thread():
    done = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os
        from grader.child import jax_setup, preloading
        preloading.preload_frozen([], [])
        threads = len(os.listdir("/proc/self/task"))  # forking with a second thread would be unsafe
        made = list(jax_setup._PREMADE)
        assert len(made) == 1, made
        from jax._src.interpreters import mlir
        jax_setup.one_mlir_context()
        assert mlir.make_ir_context() is made[0]  # the job's first lowering uses it: no dialects loaded again
        import jax, jax.numpy as jnp
        assert float(jax.jit(lambda x: x * 2)(jnp.ones(3)).sum()) == 6.0
        print(threads)
    """)], capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})  # as a host's scrubbed environment sets it
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "1"


def test_a_host_hears_at_once_that_a_job_ended():
    """The host tells the grader a job ended as it ends (its SIGCHLD wakes it), not at its next poll of
    the grader's orders (every 50 ms): each grading's jobs end one after another. The poll is stretched
    to 5 s here (``orders.POLL_S``): the mean held to 12 ms of a 50 ms poll failed on a loaded machine,
    which delays a woken host too; an end heard by the poll now takes seconds, one woken for far less."""
    done = _child("""
        import os, socket, statistics, threading, time
        from grader.child import orders
        from grader.wire import Channel

        orders.POLL_S = 5.0  # only a child's end wakes the loop sooner
        ours, theirs = socket.socketpair()
        grader, control = Channel(ours), Channel(theirs)
        children, ended, heard = {}, {}, []

        def fork_and_listen():
            while not orders._WAKE:  # the host's loop has its wake-up: a job ended before would be heard late
                time.sleep(0.001)
            for i in range(20):
                time.sleep(0.013 * (i % 4))  # at various points of the host's poll
                read, write = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.read(read, 1)
                    os._exit(0)
                children[pid] = f"job{i}"
                ended[f"job{i}"] = time.monotonic()
                os.write(write, b"x")  # the child exits now
                message = grader.recv(timeout=30)
                heard.append(time.monotonic() - ended[message["job"]])
                os.close(read), os.close(write)
            grader.send({"op": "exit"})

        listener = threading.Thread(target=fork_and_listen)
        listener.start()
        orders.take_orders(control, 2, lambda m, f: None, children,
                         lambda name, *_: control.send({"op": "exited", "job": name}))
        listener.join()
        print(round(statistics.mean(heard) * 1000, 1), round(max(heard) * 1000, 1))
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    mean_ms, slowest_ms = map(float, done.stdout.split())
    # a fifth of the poll: heard by the poll, an end would come about 5 s after it
    assert slowest_ms < 1000, f"a job's end was heard {slowest_ms} ms after it (mean {mean_ms} ms)"


def test_a_host_freezes_what_it_imported_before_forking():
    done = _child("""
        import gc
        from grader.child import preloading
        preloading.preload_frozen([], [])
        assert gc.isenabled()
        print(gc.get_freeze_count())
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.strip()) > 100_000  # JAX's objects, skipped by every job's collections


# ------------------------------------------------------------------ a first grading's cache
_TIERED = """
    import os, sys, jax, jax.numpy as jnp
    from grader.child.jax_setup import portable_cache_keys, use_compile_caches
    own, read = (sys.argv[1] if sys.argv[1] != "-" else None), sys.argv[2:]
    portable_cache_keys()
    use_compile_caches(own, read)
    x = jnp.arange(12.0).reshape(3, 4)
    def piecewise(x):
        return jnp.where(x > 2.0, x * x, 0.5 * x)
    def other(x):
        return jnp.where(x > 2.0, x - 1.0, x)
    print(float(jax.jit(piecewise)(x).sum()), float(jax.jit(other)(x).sum()))
"""


def _programs(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.name.endswith("-cache")} if folder.exists() else set()


def test_a_job_loads_the_references_programs_by_key_and_writes_only_its_own(tmp_path):
    reference, student = tmp_path / "reference", tmp_path / "student"
    first = subprocess.run([sys.executable, "-c", textwrap.dedent(_TIERED), str(reference)], capture_output=True,
                           text=True, cwd=ROOT, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    compiled = _programs(reference)
    assert any(n.startswith("jit_piecewise") for n in compiled) and any(n.startswith("jit_other") for n in compiled)
    os.remove(next(reference / n for n in compiled if n.startswith("jit_other")))  # one the reference never ran
    second = subprocess.run([sys.executable, "-c", textwrap.dedent(_TIERED), str(student), str(reference)],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout == first.stdout  # the same values, from the program loaded or compiled
    mine = _programs(student)
    assert not any(n.startswith("jit_piecewise") for n in mine)  # loaded from the reference's, by its key
    assert any(n.startswith("jit_other") for n in mine)  # compiled, and written to its own cache only
    assert _programs(reference) == compiled - {n for n in compiled if n.startswith("jit_other")}
    assert all(oct((student / n).stat().st_mode & 0o777) == "0o644" for n in mine)


def test_a_job_without_a_cache_of_its_own_writes_nowhere(tmp_path):
    reference = tmp_path / "reference"
    subprocess.run([sys.executable, "-c", textwrap.dedent(_TIERED), str(reference)], check=True, cwd=ROOT,
                   capture_output=True, timeout=300)
    before = _programs(reference)
    student = textwrap.dedent(_TIERED).replace("x = jnp.arange(12.0)", "x = jnp.arange(20.0).reshape(4, 5)  #")
    done = subprocess.run([sys.executable, "-c", student, "-", str(reference)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _programs(reference) == before  # a batch's student: the reference's cache is read, never written


def test_a_job_without_a_cache_of_its_own_does_not_serialize_what_it_compiles(tmp_path):
    """JAX serializes and compresses every program it compiles before handing it to the cache (whose
    put then drops it): a batch's student job, whose cache is read-only, has it skip that work; a job with
    a cache of its own still writes (above)."""
    reference = tmp_path / "reference"
    subprocess.run([sys.executable, "-c", textwrap.dedent(_TIERED), str(reference)], check=True, cwd=ROOT,
                   capture_output=True, timeout=300)
    counting = textwrap.dedent(_TIERED).replace("x = jnp.arange(12.0)", textwrap.dedent("""\
        from jax._src import compilation_cache
        serialized = []
        put = compilation_cache.put_executable_and_time
        compilation_cache.put_executable_and_time = lambda *a, **k: serialized.append(a[1]) or put(*a, **k)
        x = jnp.arange(20.0).reshape(4, 5)  #"""))
    counting += "print('serialized', len(serialized))\n"
    done = subprocess.run([sys.executable, "-c", counting, "-", str(reference)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "serialized 0"
    own = subprocess.run([sys.executable, "-c", counting, str(tmp_path / "own"), str(reference)], capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert own.returncode == 0 and own.stdout.splitlines()[-1] != "serialized 0", own.stderr[-2000:]


def test_cached_programs_are_keyed_by_the_program_not_the_folder(tmp_path):
    """Without it, JAX puts the cache folder's path into every key (through XLA's GPU autotuning
    caches): the same program in two folders would be two entries, and seeding would never hit."""
    code = """
        import os, sys, jax, jax.numpy as jnp
        from grader.child.jax_setup import portable_cache_keys
        if sys.argv[2] == "portable":
            portable_cache_keys()
        jax.config.update("jax_compilation_cache_dir", sys.argv[1])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        jax.jit(lambda x: jnp.where(x > 0, x * 2.0, -x))(jnp.ones((5, 6)))
        print(" ".join(sorted(n for n in os.listdir(sys.argv[1]) if n.startswith("jit__lambda"))))
    """
    names = {}
    for mode in ("portable", "plain"):
        for folder in ("a", "b"):
            done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), str(tmp_path / mode / folder), mode],
                                  capture_output=True, text=True, cwd=ROOT, timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
            names[mode, folder] = done.stdout.strip()
    assert names["portable", "a"] and names["portable", "a"] == names["portable", "b"]
    assert names["plain", "a"] != names["plain", "b"]


_NAMES = """
    import os, sys, functools, jax, jax.numpy as jnp
    from grader.child.jax_setup import name_free_cache_keys, portable_cache_keys, use_compile_caches
    if sys.argv[2] == "name-free":
        assert name_free_cache_keys() and name_free_cache_keys()  # twice: hooked once
    portable_cache_keys()
    use_compile_caches(sys.argv[1], [])
    hits = []
    jax.monitoring.register_event_listener(
        lambda name, **kw: hits.append(name) if name.endswith("cache_hits") else None)
    x = jnp.arange(12.0).reshape(3, 4)
    def piecewise(x):
        return jnp.where(x > 2.0, x * x, 0.5 * x)
    class Model:
        def forward(self, values):
            return jnp.where(values > 2.0, values * values, 0.5 * values)
    sums = [float(jax.jit(piecewise)(x).sum()),
            float(jax.jit(lambda v: jnp.where(v > 2.0, v * v, 0.5 * v))(x).sum()),  # the same computation
            float(jax.jit(Model().forward)(x).sum()),
            float(jax.jit(lambda v: jnp.where(v > 2.0, v * v, 0.25 * v))(x).sum())]  # another one
    print(sums, len(hits), len([n for n in os.listdir(sys.argv[1]) if n.endswith("-cache")]))
"""


def test_a_computation_traced_from_any_function_name_is_one_cached_program(tmp_path):
    """JAX puts the Python function's name into a program's key: the reference's ``jax.jit(heavy)`` and a
    student's ``jax.jit(lambda ...)`` of the same computation were compiled twice. Keyed by the program
    with its module renamed, a lambda or a method of the same computation loads it; a program that
    differs in one constant does not."""
    code = textwrap.dedent(_NAMES)
    results = {}
    for mode in ("name-free", "plain"):
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / mode), mode], capture_output=True,
                              text=True, cwd=ROOT, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        results[mode] = done.stdout.split("]")
    sums = results["name-free"][0]
    assert sums == results["plain"][0]  # the same values, loaded or compiled
    values = [float(v) for v in sums.strip("[").split(",")]
    assert values[0] == values[1] == values[2] != values[3]  # the other program computed its own values
    (loaded, written), (plain_loaded, plain_written) = (map(int, results[m][1].split()) for m in ("name-free", "plain"))
    assert (loaded, plain_loaded) == (2, 0)  # the lambda and the method loaded piecewise's program
    assert plain_written == written + 2  # without it: each name compiled again (and JAX's own eager ops once)
    assert {p.name.split("-")[0] for p in (tmp_path / "name-free").iterdir()} == {"jit_program"}


def test_a_first_grading_loads_the_references_programs_and_grades_the_same(tmp_path, monkeypatch):
    from grader.grading import GradeOptions, grade

    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "caches"))
    first, second = tmp_path / "first" / "ch4", tmp_path / "second" / "ch4"
    for folder in (first, second):
        shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    options = GradeOptions(exercises=("ex01", "ex02"), seed=21, compile_cache=True)
    one = grade(first, options)  # fills the reference's cache (and the first folder's own)
    reference = _programs(store.reference_dir())
    assert reference and all(n.startswith("jit_program-") for n in reference)  # keyed by what they compute
    assert oct(store.reference_dir().stat().st_mode & 0o777) == "0o711"  # openable by key, never listed
    two = grade(second, options)
    own = _programs(store.student_dir(second))
    assert not own & reference, "a program the reference compiled is loaded from its cache, not compiled again"
    assert [(e.id, e.score, [(c.id, c.status) for c in e.checks]) for e in one.exercises] == \
           [(e.id, e.score, [(c.id, c.status) for c in e.checks]) for e in two.exercises]
    assert two.score == two.max_score


# ------------------------------------------------------------------ the order exercises run in
def test_the_exercise_that_took_longest_last_time_starts_first_and_timed_ones_prepare_meanwhile(tmp_path,
                                                                                                 monkeypatch):
    from types import SimpleNamespace

    from grader.scheduling import run_all

    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path))
    store.keep_durations("chx", {"waits": 1.4, "computes": 0.3})
    store.keep_durations("chx", {"waits": 1.0})  # folded in: half the old, half the new
    assert store.durations("chx") == {"waits": 1.2, "computes": 0.3} and store.durations("other") == {}
    exercises = [SimpleNamespace(id=name, timed=timed, timeout_s=limit, waits=False)
                 for name, timed, limit in (("computes", False, 120), ("waits", False, 90), ("other", False, 60),
                                            ("timed", True, 120))]
    events = []
    run_all(exercises, lambda ex: events.append(("grade", ex.id)), lambda ex, result: None, at_once=1,
            cancel=lambda: None, prepare=lambda ex: events.append(("prepare", ex.id)),
            expected=store.durations("chx"))
    graded = [name for what, name in events if what == "grade"]
    assert graded == ["waits", "computes", "other", "timed"]  # then by limit; the timed one last, alone
    assert events.index(("prepare", "timed")) < events.index(("grade", "other"))  # prepared meanwhile


def test_an_exercise_that_mostly_waits_starts_before_longer_ones_that_compute():
    """ex05's harness sleeps in its instruments (``waits``): it starts first whatever the wall seconds of the
    last grading say (a crowded one made the computing exercises look longer, and ex05 started last and
    slept at the grading's end); the others then by those seconds, then by their limits."""
    from types import SimpleNamespace

    from grader.scheduling import longest_first

    exercises = [SimpleNamespace(id=name, timeout_s=limit, waits=waits)
                 for name, limit, waits in (("ex07", 60, False), ("ex05", 90, True), ("ex02", 60, False),
                                            ("ex03", 120, False))]
    expected = {"ex07": 1.07, "ex02": 0.78, "ex05": 0.66}
    assert [ex.id for ex in longest_first(exercises, expected)] == ["ex05", "ex07", "ex02", "ex03"]
    assert [ex.id for ex in longest_first(exercises, {})] == ["ex05", "ex03", "ex07", "ex02"]


def test_an_exercise_that_hangs_holds_back_no_other_exercises_result():
    """The longest-expected exercise starts first; when it hangs, the others' results still reach
    ``done`` as they end (the progress line says "1/2 done", Ctrl-C keeps them): in the order of
    starting, they waited for the hanging one's end (tests/test_feedback.py's Ctrl-C test failed so)."""
    import threading
    from types import SimpleNamespace

    from grader.scheduling import run_all

    release = threading.Event()
    exercises = [SimpleNamespace(id=name, timed=False, timeout_s=60, waits=False) for name in ("quick", "hangs")]

    def grade(ex):
        if ex.id == "hangs":
            assert release.wait(30)
        return ex.id

    order = []

    def done(ex, result):
        order.append(result)
        if result == "quick":
            release.set()  # only now may the hanging one end

    runner = threading.Thread(target=run_all, args=(exercises, grade, done),
                              kwargs=dict(at_once=2, cancel=lambda: None, expected={"hangs": 9.0, "quick": 1.0}))
    runner.start()
    runner.join(20)
    release.set()
    runner.join(35)
    assert order == ["quick", "hangs"]


@pytest.mark.parametrize("cores", [{0, 1}, {0}])
def test_a_timed_exercise_is_timed_beside_a_sleeper_where_the_grading_has_two_cores(monkeypatch, cores):
    """ex05's harness mostly sleeps (``waits``): with two cores, ex06 is timed while it sleeps, not after it;
    on one core (a batch's grading) after it; and never while an exercise that computes still runs."""
    import threading
    from types import SimpleNamespace

    import grader.scheduling
    from grader.scheduling import run_all

    monkeypatch.setattr(grader.scheduling.os, "sched_getaffinity", lambda pid: cores)
    exercises = [SimpleNamespace(id=name, timed=timed, timeout_s=60, waits=waits)
                 for name, timed, waits in (("sleeper", False, True), ("computes", False, False),
                                            ("timed", True, False))]
    timed_graded, computed = threading.Event(), threading.Event()
    order = []

    def grade(ex):
        if ex.id == "sleeper":  # it ends when the timed one is graded, or after 2 s
            return "sleeper " + ("after the timed one" if timed_graded.wait(2) else "alone")
        if ex.id == "computes":
            computed.wait(0.3)
            return "computes"
        timed_graded.set()
        return "timed"

    run_all(exercises, grade, lambda ex, result: order.append(result), at_once=3, cancel=lambda: None,
            expected={"sleeper": 9.0})
    if len(cores) >= 2:
        assert order == ["computes", "timed", "sleeper after the timed one"]
    else:
        assert order == ["computes", "sleeper alone", "timed"]


def test_a_timed_exercise_prepares_while_the_others_run_and_is_timed_beside_the_harness():
    from grader.grading import GradeOptions, grade

    report = grade(SOLUTIONS, GradeOptions(exercises=("ex05", "ex06"), seed=5))
    t = report.timings
    assert report.score == report.max_score
    forked = t["ex06_speedup"]["ended_s"] - t["ex06_speedup"]["student_s"]  # when its student's job started
    assert forked < t["ex05_timing"]["ended_s"], t  # its jobs prepared while ex05 ran
    if len(os.sched_getaffinity(0)) >= 2:  # its timing, beside ex05's sleeping harness
        assert t["ex06_speedup"]["began_s"] < t["ex05_timing"]["ended_s"], t
    else:  # alone, after it
        assert t["ex06_speedup"]["began_s"] >= t["ex05_timing"]["ended_s"] - 0.01, t


def test_a_loop_unrolled_1000_times_is_not_compiled_and_grades_the_same(monkeypatch, tmp_path):
    """ex07's power_iteration written as a Python loop over a static n_steps traces a program that
    grows with n_steps: power_iteration.program_size fails (the compile count is then skipped), so the
    calls with n_steps=100 and 1000 are run op by op (``jax.disable_jit``) instead of compiling 100 and
    1000 unrolled steps (2.3 and about 8 CPU seconds of XLA on this machine); their values are still the
    student's, and still judged."""
    import grader.sides
    from grader.grading import GradeOptions, grade

    folder = tmp_path / "work"
    shutil.copytree(SOLUTIONS, folder)
    (folder / "ex07_pitfalls.py").write_text(variant("ex07_pitfalls", "python_loop"), encoding="utf-8")
    seen = {}
    original = grader.sides.judge

    def spy(ex, student, reference, **kwargs):
        seen[ex.id] = student
        return original(ex, student, reference, **kwargs)

    monkeypatch.setattr(grader.sides, "judge", spy)
    report = grade(folder, GradeOptions(exercises=("ex07",), seed=11))
    statuses = {c.id: c.status for c in report.exercises[0].checks}
    assert statuses["power_iteration.program_size"] == "failed"
    assert statuses["power_iteration.compiles"] == "skipped"
    assert statuses["power_iteration.values"] == "passed"
    records = seen["ex07_pitfalls"].records
    assert records["power_iteration/values/100"]["status"] == records["power_iteration/values/1000"]["status"] == "ok"
    assert records["power_iteration/compiles"]["calls"] == 1  # 10 compiled; 100 and 1000 run op by op
    assert records["power_iteration/size/1000"]["lines"] > 10 * records["power_iteration/size/10"]["lines"]


# ------------------------------------------------------------------ plugins looked for once, by the host
def test_a_host_looks_for_jax_plugins_once_so_that_no_job_does():
    """Each process's first backend scans every installed distribution's entry points for PJRT plugins
    (jax._src.xla_bridge.discover_pjrt_plugins, via _discover_and_register_pjrt_plugins, once per
    process: its ``_plugins_registered`` flag). A host does it before it forks (a CPU-only JAX has none
    to load), so a job's backend starts without it: here the scan is made to fail after the host's
    preload, and the backend still starts."""
    script = textwrap.dedent("""
        import importlib.metadata, jax
        from grader.child import preloading
        preloading._preload([], [])
        def no_scan(*args, **kwargs):
            raise AssertionError("a job scanned the entry points for plugins")
        importlib.metadata.entry_points = no_scan
        print(jax.devices()[0].platform)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr[-1500:]
    assert done.stdout.strip().splitlines()[-1] == "cpu"


def test_a_host_has_jaxs_traceback_filter_remember_each_file_and_tracebacks_stay_the_same():
    """JAX filters the traceback of every exception raised through a jitted function, checking each
    frame's file against its ~30 excluded paths (jax._src.traceback_util.include_filename ->
    _path_starts_with: os.path.commonpath and os.path.samefile); a stub's job raises dozens. After a
    host's preload the answer is remembered per file (and per count of excluded paths); the answers,
    and the frames a student's traceback keeps, are JAX's own."""
    script = textwrap.dedent("""
        import os, traceback, jax, jax.numpy as jnp
        from jax._src import traceback_util as t
        original = t.include_filename
        def frames():
            def stub(x):
                raise NotImplementedError("stub")
            try:
                jax.jit(stub)(jnp.ones(3))
            except NotImplementedError as exc:
                return [(f.filename, f.name) for f in traceback.extract_tb(exc.__traceback__)]
        before = frames()
        from grader.child import preloading
        preloading._preload([], [])
        assert getattr(t.include_filename, "remembers", False), "not remembered"
        names = [t.__file__, jax.__file__, os.__file__, "/tmp/ex02_where.py",
                 __file__ if "__file__" in dir() else "x.py"]
        assert [t.include_filename(n) for n in names] == [original(n) for n in names]
        assert [t.include_filename(n) for n in names] == [original(n) for n in names]  # remembered: the same
        assert frames() == before, (frames(), before)
        print("same", len(before))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr[-1500:]
    assert done.stdout.strip().splitlines()[-1].startswith("same")


def test_a_probe_calls_a_function_under_a_transform_or_a_made_callable_in_one_line(tmp_path):
    """``ctx.call(key, name, *args, under=transform)`` and ``ctx.call_object(key, fn, name, *args)``: the call,
    its record and its raw result in one step (no probe copies an invoke, pop, record sequence): a transform's
    result, a transform's error said as the call's, a function the module lacks said missing, a stub's own
    NotImplementedError said not attempted, and one JAX raises for a transform a callback does not support
    said as raised (the function was attempted: it runs unbatched)."""
    import importlib.util

    import jax
    import numpy as np

    (tmp_path / "sub.py").write_text(textwrap.dedent("""\
        import jax
        import jax.numpy as jnp


        def f(x):
            return jnp.sum(x * x)


        def stub(x):
            raise NotImplementedError("ex02: stub")


        @jax.jit
        def callback(x):
            return jax.pure_callback(lambda a: a, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        """), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("_probed_sub", tmp_path / "sub.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    channel = _Channel()
    ctx = ProbeContext(channel, module, {}, str(tmp_path), str(tmp_path))
    rows = np.arange(6, dtype=np.float32).reshape(3, 2)
    assert np.allclose(ctx.call("f/vmap", "f", rows, under=jax.vmap), [1.0, 13.0, 41.0])
    assert ctx.call("f/grad", "f", rows, under=jax.grad) is not FAILED
    assert ctx.call("f/bad", "f", rows, under=lambda fn: jax.vmap(fn, in_axes=5)) is FAILED
    assert ctx.call("h/vmap", "h", rows, under=jax.vmap) is FAILED
    assert ctx.call("stub/vmap", "stub", rows, under=jax.vmap) is FAILED
    assert np.allclose(ctx.call("callback/plain", "callback", rows), rows)
    assert ctx.call("callback/vmap", "callback", rows, under=jax.vmap) is FAILED
    assert ctx.call_object("made", lambda x: x + 1, "make_adder(...)", 2) == 3
    records = {m["key"]: m["value"] for m in channel.sent if m["op"] == "obs"}
    assert records["f/vmap"]["status"] == "ok" and records["f/grad"]["status"] == "ok"
    assert records["f/bad"]["status"] == "raised" and records["f/bad"]["type"] == "ValueError", records["f/bad"]
    assert records["h/vmap"] == {"status": "missing", "function": "h"}
    assert records["stub/vmap"] == {"status": "not_attempted", "function": "stub"}
    assert records["callback/vmap"]["status"] == "raised", records["callback/vmap"]
    assert records["callback/vmap"]["type"] == "NotImplementedError", records["callback/vmap"]
    assert records["made"]["status"] == "ok" and records["made"]["function"] == "make_adder(...)"
    assert all("_result" not in r for r in records.values())  # the raw value never travels in a record
