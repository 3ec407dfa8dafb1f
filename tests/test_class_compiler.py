"""The class's compiler: programs a batch's students compile alike, compiled once by the grader.

``grader/child/compiler.py`` (what runs in the sandboxes) and ``grader/runner/class_compiler.py``
(the grader's handle). What must hold:

* the compiler writes a program under the key JAX itself computes for that program
  (``jax._src.compiler._get_cache_key``: the program without its debug information, the
  options, the versions), the key the asking job computed, so that the job finds it;
* what a job sends can only land under the digest of what it sent: the compiler computes
  the key itself; a request it cannot read is answered "compile it yourself", and the
  compiler goes on serving;
* nothing of a student's source (file names, lines) is in what a classmate loads;
* in a batch, a classmate who wrote the same code loads the programs instead of compiling
  them, with the verdicts of a single ``grade`` of the same submission and seed; no student's
  sandbox can write the class's cache.
"""
from __future__ import annotations

import base64
import csv
import json
import os
import re
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from conftest import SOLUTIONS, make_submission, variant

from grader import store
from grader.cli import main
from grader.runner import sandbox as sandboxes
from grader.runner.class_compiler import ClassCompiler

pytestmark = pytest.mark.slow
PLAN = sandboxes.plan("auto")
STRONG = PLAN.kind == "bwrap" and PLAN.uid_isolation
needs_strong = pytest.mark.skipif(not STRONG, reason="the class's compiler runs only where a batch isolates students "
                                                     "(bubblewrap with per-job uids: run as root with bwrap installed)")
VARIANTS = Path(__file__).resolve().parent / "variants" / "ch4"

#: lowers two functions as a job does (the same cache settings), and prints what a job would send the
#: class's compiler for each program it compiles: the program, the options, and the key JAX computed
CAPTURE = r'''
import base64, io, json, sys
import jax, jax.numpy as jnp
from jax._src import compiler
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 1e9)
jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
from grader.child import jax_setup
assert jax_setup.name_free_cache_keys()
sent = []
local = compiler._compile_and_write_cache
def capture(backend, computation, devices, options, callbacks, name, key):
    program = io.BytesIO()
    computation.operation.write_bytecode(file=program)
    sent.append({"name": name, "key": key, "module": base64.b64encode(program.getvalue()).decode(),
                 "options": base64.b64encode(options.SerializeAsString()).decode()})
    return local(backend, computation, devices, options, callbacks, name, key)
compiler._compile_and_write_cache = capture
def secret_student_function_name(x):
    return jnp.where(x > 0, jnp.tanh(x) * 3.0, x * x).sum()
x = jnp.arange(7.0) - 3.0
jax.jit(secret_student_function_name)(x).block_until_ready()
jax.jit(lambda v: jnp.cumsum(v) ** 2)(x).block_until_ready()
print(json.dumps([s for s in sent if s["name"] != "jit_iota" and s["name"] != "jit_subtract"]))
'''


def _captured(tmp_path: Path) -> list[dict]:
    script = tmp_path / "student_code_xyz.py"
    script.write_text(CAPTURE, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "capture-cache")], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _entry_bytes(path: Path) -> bytes:
    """A cache entry as JAX wrote it, uncompressed (zstandard where installed, else zlib)."""
    data = path.read_bytes()
    try:
        import zstandard

        return zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 28)
    except ImportError:
        return zlib.decompress(data)
    except Exception:  # noqa: BLE001 - written with zlib
        return zlib.decompress(data)


@needs_strong
def test_the_class_compiler_writes_each_program_under_its_own_key(tmp_path):
    sent = _captured(tmp_path)
    assert [s["name"] for s in sent] == ["jit_secret_student_function_name", "jit__lambda"], [s["name"] for s in sent]
    folder = tmp_path / "class"
    folder.mkdir()
    os.chmod(folder, 0o1733)
    compiler = ClassCompiler(folder=folder, read=[], scratch=tmp_path / "scratch", plan=PLAN)
    compiler.start()
    try:
        deadline = time.monotonic() + 120
        # what the compiler cannot read: "compile it yourself", and it serves the next request all the same
        garbage = base64.b64encode(b"not a program").decode()
        assert compiler.compile(garbage, sent[0]["options"], deadline).key is None
        assert compiler.compile(sent[0]["module"], garbage, deadline).key is None
        for request in sent:
            key = compiler.compile(request["module"], request["options"], deadline).key
            assert key == request["key"]  # the key the job computed: the job finds the program
            assert (folder / f"{key}-cache").is_file()
        # a program that crashes the compiler (options XLA aborts on) ends its job in its sandbox: the
        # next request is served by a new one
        assert (compiler.answered, compiler.refused + compiler.ended, compiler.failures) == (2, 2, 0)
        # options that name a dump folder (a job's own do; a student's could name the class's cache):
        # the compiler dumps nothing anywhere, and files the program under the same key
        from jax._src.lib import xla_client as xc

        dumping = xc.CompileOptions.ParseFromString(base64.b64decode(sent[1]["options"]))
        dumping.executable_build_options.debug_options.xla_dump_to = str(folder)
        dumping.env_option_overrides = [("xla_dump_to", str(folder)), ("xla_dump_hlo_as_text", "true")]
        again = base64.b64encode(dumping.SerializeAsString()).decode()
        (folder / f"{sent[1]['key']}-cache").unlink()
        assert compiler.compile(sent[1]["module"], again, deadline).key == sent[1]["key"]
        assert sorted(p.name for p in folder.iterdir()) == sorted(f"{s['key']}-cache" for s in sent)
        # the same program asked again is not compiled again: its file is left as it was
        first = folder / f"{sent[0]['key']}-cache"
        stamp = first.stat().st_mtime_ns
        assert compiler.compile(sent[0]["module"], sent[0]["options"], deadline).key == sent[0]["key"]
        assert first.stat().st_mtime_ns == stamp
    finally:
        compiler.close()
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{s['key']}-cache" for s in sent)
    # nothing of the student's source reaches what a classmate loads: no file name, no function name's line
    for request in sent:
        entry = _entry_bytes(folder / f"{request['key']}-cache")
        assert b"student_code_xyz" not in entry and b"secret_student_function_name" not in entry
    # the program itself carries them (so the check above could fail)
    program = base64.b64decode(sent[0]["module"])
    assert b"student_code_xyz" in program and b"secret_student_function_name" in program
    # keyed by what it computes: the function's name is in neither the key nor the entry's
    assert all(s["key"].startswith("jit_program-") for s in sent)


@needs_strong
def test_a_compiler_whose_host_is_not_ready_never_holds_a_students_job(tmp_path):
    """The first requests of a batch can come while the compiler's host still imports JAX; a host can
    also hang or die. A request then waits at most MAX_QUEUE_S and its job compiles the program itself;
    the host is started in the background and serves the requests after it is ready."""
    from grader.runner import class_compiler

    sent = _captured(tmp_path)
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "slowstart.py").write_text("import time\ntime.sleep(6)\n", encoding="utf-8")
    folder = tmp_path / "class"
    folder.mkdir()
    os.chmod(folder, 0o1733)
    compiler = ClassCompiler(folder=folder, read=[], scratch=tmp_path / "scratch", plan=PLAN)
    compiler.host.modules = ["grader.chapters.slowstart"]  # a host that takes 6 s to be ready
    compiler.host.chapter_folders = [slow]
    compiler.start()
    try:
        began = time.monotonic()
        assert compiler.compile(sent[0]["module"], sent[0]["options"], began + 60).key is None
        assert time.monotonic() - began < class_compiler.MAX_QUEUE_S + 1.0
        assert compiler.host.wait_ready(timeout=60)
        assert compiler.compile(sent[0]["module"], sent[0]["options"], time.monotonic() + 60).key == sent[0]["key"]
        # the host dies: no request waits for it to start again, and one started in the background serves
        compiler.host.stop(grace_s=0.5)
        compiler._session = None
        began = time.monotonic()
        assert compiler.compile(sent[1]["module"], sent[1]["options"], began + 60).key is None
        assert time.monotonic() - began < class_compiler.MAX_QUEUE_S + 1.0
        deadline = time.monotonic() + 60
        while not compiler.host.wait_ready(timeout=1) and time.monotonic() < deadline:
            pass
        got = compiler.compile(sent[1]["module"], sent[1]["options"], time.monotonic() + 60).key
        assert got == sent[1]["key"], compiler.host.log_tail()
    finally:
        compiler.close()


ALT = variant("ex02_where", "alt_arithmetic")


def _hostile(class_dir: Path) -> str:
    """A student who tries, at import, to put a program of their own into the class's cache."""
    return f'''import os
for _name in ("jit_piecewise-{'0' * 64}-cache", "evil-cache"):
    try:
        with open(os.path.join({str(class_dir)!r}, _name), "wb") as _f:
            _f.write(b"not what the key says")
        print("WROTE", _name)
    except OSError as _exc:
        print("could not write:", type(_exc).__name__)
''' + (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8")


@needs_strong
def test_a_classmate_loads_what_the_class_compiler_compiled_with_the_same_verdicts(tmp_path):
    class_dir = store.class_dir()
    assert class_dir is not None
    before = {p.name for p in class_dir.iterdir()}
    klass = tmp_path / "class"
    # the first student's job asks for its programs once the class's compiler is ready: its import rests 4 s (the
    # compiler's host imports JAX as the batch starts, and under load, a run of the suite beside another, a job that
    # asked at once waited its 2 s and compiled its programs itself)
    resting = "import time\ntime.sleep(4)\n" + ALT
    for name, text in (("a-first", resting), ("b-second", ALT), ("c-hostile", _hostile(class_dir))):
        made = make_submission(tmp_path / f"tmp-{name}", {"ex02_where": text})
        klass.mkdir(exist_ok=True)
        made.rename(klass / name)
    out = tmp_path / "results"
    assert main(["batch", str(klass), "--chapter", "ch4", "--out", str(out), "-k", "2", "--seed", "11",
                 "--lang", "en", "-j", "1"]) == 0

    def report(name):
        return json.loads((out / name / "report.partial.json").read_text(encoding="utf-8"))

    first, second, hostile = report("a-first"), report("b-second"), report("c-hostile")
    work = {name: r["timings"]["ex02_where"]["student_work"] for name, r in
            (("a-first", first), ("b-second", second))}
    # the first student's own programs were compiled by the class's compiler, the second's all loaded
    assert work["a-first"]["served"] > 0 and work["a-first"]["class_compiler_cpu_s"] > 0, work
    assert work["b-second"]["served"] == 0 and work["b-second"]["loaded"] == work["b-second"]["programs"], work
    # the same verdicts as a single grade of the same submission with the same seed
    single = tmp_path / "single"
    assert main([str(klass / "b-second"), "--chapter", "ch4", "-k", "2", "--seed", "11", "--lang", "en",
                 "--report-dir", str(single)]) == 0
    alone = json.loads((single / "report.partial.json").read_text(encoding="utf-8"))

    def verdicts(r):
        return [(c["id"], c["status"], c["points"]) for e in r["exercises"] for c in e["checks"]]

    assert verdicts(first) == verdicts(second) == verdicts(alone)
    assert first["score"] == first["max_score"] == 10
    # the hostile student wrote nothing there, and still got the solution's marks
    output = hostile["exercises"][0]["output"]
    assert "WROTE" not in output and output.count("could not write") == 2, output
    assert hostile["score"] == 10
    added = {p.name for p in class_dir.iterdir()} - before
    assert added and all(re.fullmatch(r"jit_\w+-[0-9a-f]{64}-cache", name) for name in added), added
    assert f"jit_piecewise-{'0' * 64}-cache" not in added and "evil-cache" not in added
    with (out / "grades.csv").open(encoding="utf-8") as handle:
        totals = {row["student"]: row["total"] for row in csv.DictReader(handle)}
    assert totals["a-first"] == totals["b-second"] == totals["c-hostile"] == "10"
