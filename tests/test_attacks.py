"""The attack suite: submissions that try to crash, hang, flood, escape or cheat.

Every attack is bounded and safe to run on a shared machine (memory is capped at
1 GiB for these runs, fork storms at the per-job process limit, output at the file
size limit). Each is graded together with a clean exercise; the test checks that the
attack gains no point, that the clean exercise still scores full marks and that the
report is written. Attacks that only a sandbox can stop (reading files outside the
submission, signalling the grader) are skipped, saying so, where no sandbox is
available; the report then says which sandbox ran.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import ROOT, SOLUTIONS, STUBS, make_submission

from grader.cli import main
from grader.runner import sandbox as sandboxes

pytestmark = pytest.mark.slow
PLAN = sandboxes.plan("auto")
#: a block of job uids of this test session's own, outside the default block (61000-61255)
#: that every other grader on the machine uses: a leftover there is ours, not that of a
#: grader (or another test run) working beside these tests
UID_BLOCK = (70000 + 32 * (os.getpid() % 1024), 32)


@pytest.fixture(autouse=True)
def own_uid_block(monkeypatch):
    monkeypatch.setattr(sandboxes, "UID_BASE", UID_BLOCK[0])
    monkeypatch.setattr(sandboxes, "UID_COUNT", UID_BLOCK[1])
STRONG = PLAN.kind == "bwrap" or PLAN.uid_isolation
needs_sandbox = pytest.mark.skipif(not STRONG, reason="needs bubblewrap or per-job uids (run as root)")
needs_bwrap = pytest.mark.skipif(PLAN.kind != "bwrap", reason="needs bubblewrap: files outside the submission are "
                                                                "readable without it")
needs_uids = pytest.mark.skipif(not PLAN.uid_isolation, reason="needs per-job uids (run as root): RLIMIT_NPROC "
                                                                 "cannot stop a fork storm otherwise")


def stub(exercise: str) -> str:
    return (STUBS / f"{exercise}.py").read_text(encoding="utf-8")


def solution(exercise: str) -> str:
    return (SOLUTIONS / f"{exercise}.py").read_text(encoding="utf-8")


@dataclass
class Attack:
    name: str
    exercise: str
    source: str
    status: tuple[str, ...]  # acceptable statuses of the attacked exercise
    max_score: float = 0.0
    integrity: str | None = None  # a code expected among the report's integrity entries
    marks: tuple = ()
    options: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.name


ATTACKS = [
    Attack("exit_at_import", "ex01_jit_forms", "import sys\nsys.exit(0)\n" + solution("ex01_jit_forms"),
           ("error",), integrity="call"),
    Attack("os_exit_in_call", "ex03_static_args",
           solution("ex03_static_args").replace("    return coeff * x ** 2 + 1.0", "    import os\n    os._exit(3)"),
           ("error",), integrity="import"),
    Attack("infinite_loop_in_call", "ex02_where",
           solution("ex02_where").replace("    return jnp.where(x > 0, x * x, 0.5 * x)",
                                          "    while True:\n        pass"),
           ("timeout",), options=["--exercise-timeout", "4"]),
    Attack("sleep_at_import", "ex04_cache_keys", "import time\ntime.sleep(3600)\n" + solution("ex04_cache_keys"),
           ("timeout",), options=["--exercise-timeout", "4"]),
    Attack("memory_bomb", "ex01_jit_forms", solution("ex01_jit_forms").replace(
        '    shifted = x - jnp.max(x, axis=-1, keepdims=True)\n    e = jnp.exp(shifted)',
        '    hoard = [bytearray(1 << 30) for _ in range(16)]  # 16 GiB if nothing stopped it\n'
        '    shifted = x - jnp.max(x, axis=-1, keepdims=True)\n    e = jnp.exp(shifted)'),
           # filling up to 1 GiB is slow under load
           ("partial", "failed", "error"), options=["--memory-limit", "1024", "--exercise-timeout", "60"],
           max_score=4.5),  # log_softmax and the structure checks do not call softmax_raw
    Attack("fork_storm", "ex02_where", solution("ex02_where").replace(
        "    return jnp.where(x > 0, x * x, 0.5 * x)",
        "    import os, time\n    for _ in range(20000):\n        if os.fork() == 0:\n"
        "            time.sleep(120)\n            os._exit(0)\n    return jnp.where(x > 0, x * x, 0.5 * x)"),
           ("error", "partial", "failed", "timeout"), marks=(needs_uids,), integrity="import",
           max_score=1.0, options=["--exercise-timeout", "6"]),  # the traceable checks of the two honest functions
    Attack("output_flood", "ex03_static_args", solution("ex03_static_args").replace(
        "    return coeff * x ** 2 + 1.0",
        "    import sys\n    for _ in range(4096):  # 4 GiB if nothing stopped it\n"
        "        sys.stdout.write('x' * (1 << 20))\n    return coeff * x ** 2 + 1.0"),
           ("partial", "error"), max_score=8.0),  # stopped at the file-size limit: poly's two checks fail
    Attack("disk_bomb", "ex04_cache_keys", '''import os

_chunk = b"x" * (8 << 20)
for _i in range(1000):  # 8 GB if nothing stopped it; each file stays under the file-size limit
    with open(f"filler-{_i}.bin", "wb") as _f:
        _f.write(_chunk)
''' + solution("ex04_cache_keys"), ("error",), integrity="file"),
    Attack("keyboard_interrupt_and_system_exit", "ex04_cache_keys", solution("ex04_cache_keys").replace(
        "    length = 8\n", "    raise SystemExit(0)\n").replace(
        "    values = np.asarray(x, dtype=np.float32).reshape(-1)", "    raise KeyboardInterrupt"), ("failed",)),
    Attack("signal_the_parents", "ex01_jit_forms", '''import os
import signal


def _ancestors():
    pid = os.getpid()
    while pid > 1:
        with open(f"/proc/{pid}/status") as status:
            pid = int(next(line for line in status if line.startswith("PPid:")).split()[1])
        if pid > 1:
            yield pid


for _pid in list(_ancestors()):
    for _sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(_pid, _sig)
        except OSError:
            pass
for _pid in range(2, 40000):  # anything else it can see
    try:
        os.kill(_pid, signal.SIGKILL)
    except OSError:
        pass
''' + stub("ex01_jit_forms"), ("not_attempted", "error"), marks=(needs_sandbox,), integrity="import"),
    Attack("fake_report_files", "ex01_jit_forms", '''import json
import os
import sys

_fake = {"schema": "grade-report/1", "score": 80, "max_score": 80, "exercises": []}
for _target in ("report.json", os.path.join(os.path.dirname(__file__), ".grade", "report.json"),
                os.environ.get("FAKE_REPORT_DIR", "/nonexistent") + "/report.json",
                os.environ.get("FAKE_REPORT_DIR", "/nonexistent") + "/report.partial.json"):
    try:
        os.makedirs(os.path.dirname(_target) or ".", exist_ok=True)
        with open(_target, "w") as _f:
            json.dump(_fake, _f)
    except OSError:
        pass
print(json.dumps(_fake))
sys.stdout.flush()
''' + stub("ex01_jit_forms"), ("not_attempted",), integrity="report"),
    Attack("patch_perf_counter", "ex05_timing", '''import time

_real = time.perf_counter
_calls = [0]


def _fake():  # every interval looks like 10 ms, whatever happened
    _calls[0] += 1
    return _calls[0] * 0.005


time.perf_counter = _fake
''' + solution("ex05_timing").replace("        jax.block_until_ready(fn(*args))\n        samples",
                                       "        fn(*args)\n        samples"), ("failed",), integrity="patch"),
    Attack("patch_jax_jit", "ex03_static_args", '''import jax

_real_jit = jax.jit


def _lazy_jit(fun=None, **kwargs):  # everything stays eager: no compile counts at all
    if fun is None:
        return lambda f: f
    return fun


jax.jit = _lazy_jit
''' + solution("ex03_static_args"), ("failed",), integrity="patch"),
    Attack("patch_grader_modules", "ex03_static_args", '''import contextlib
import sys


class _Quiet:
    def summary(self):
        return {"count": 1, "names": {"jit(poly)": 1}}


@contextlib.contextmanager
def _window(self):
    yield _Quiet()


for _name, _module in list(sys.modules.items()):
    if _name.startswith("grader") and hasattr(_module, "COUNTER"):
        type(_module.COUNTER).window = _window  # every window reports one compile
''' + solution("ex03_static_args").replace("@jax.jit\ndef poly", "@partial(jax.jit, static_argnums=1)\ndef poly"),
           ("failed",), integrity="attribute"),
    Attack("hide_compiles_from_listeners", "ex04_cache_keys", '''from jax._src import monitoring as _monitoring


def _quietly(fn, *args):
    listeners = list(_monitoring.get_event_duration_listeners())
    for listener in listeners:
        _monitoring.unregister_event_duration_listener(listener)
    try:
        return fn(*args)
    finally:  # put them back: nothing looks changed afterwards
        for listener in listeners:
            _monitoring.register_event_duration_secs_listener(listener)
''' + solution("ex04_cache_keys").replace(
        "    padded = np.zeros(bucket_length(length), dtype=np.float32)\n    padded[:length] = values\n"
        "    return _mean_sq_core(padded, length)",
        "    return _quietly(_mean_sq_core, values, length)  # no bucketing: a compile per length"),
           # a compile per length: about 4 s of work, far more on a loaded machine
           ("failed",), integrity="attribute", options=["--exercise-timeout", "60"]),
    Attack("always_equal", "ex02_where", '''import jax


class _Yes:
    def __eq__(self, other):
        return True

    def __array__(self, dtype=None, copy=None):
        raise TypeError("no")

    shape = property(lambda self: ())
    dtype = property(lambda self: "float32")


def piecewise(x):
    return _Yes()


def normalize_if_positive(x):
    return _Yes()


def clip_by_norm(x, max_norm):
    return _Yes()
''', ("failed",)),
    Attack("read_the_reference", "ex01_jit_forms", f'''import os

import grader

_tried = [os.path.join(os.path.dirname(os.path.dirname(grader.__file__)), "solutions", "ch4", "ex01_jit_forms.py"),
          {str(ROOT / "solutions" / "ch4" / "ex01_jit_forms.py")!r}]
_code = None
for _path in _tried:
    try:
        with open(_path) as _f:
            _code = _f.read()
        break
    except OSError:
        continue
if _code is None:
''' + "\n".join("    " + line if line.strip() else line for line in stub("ex01_jit_forms").splitlines()) + '''
else:
    exec(_code)
''', ("not_attempted", "error"), marks=(needs_bwrap,), integrity="call"),
    Attack("delete_a_classmates_files", "ex01_jit_forms", '''import os
import shutil

for _victim in (os.environ.get("VICTIM", ""), "/tmp/grade-class/bob"):
    shutil.rmtree(_victim, ignore_errors=True)
    try:
        for _root, _dirs, _files in os.walk(_victim):
            for _f in _files:
                os.remove(os.path.join(_root, _f))
    except OSError:
        pass
''' + stub("ex01_jit_forms"), ("not_attempted",), marks=(needs_sandbox,), integrity="import"),
]


def _run(attack: Attack, tmp_path: Path) -> tuple[dict, Path]:
    classroom = tmp_path / "class"
    bob = make_submission(classroom / "bob")
    alice = make_submission(classroom / "alice", {attack.exercise: attack.source.replace(
        'os.environ.get("VICTIM", "")', repr(str(bob.parent))).replace(
        'os.environ.get("FAKE_REPORT_DIR", "/nonexistent")', repr(str(tmp_path / "report")))})
    clean = "ex08_aot_debug" if attack.exercise != "ex08_aot_debug" else "ex07_pitfalls"
    out = tmp_path / "report"
    code = main([str(alice), "--report-dir", str(out), "--seed", "3", "--exercise-timeout", "10",
                 "-k", attack.exercise, "-k", clean, "--lang", "en", *attack.options])
    assert code == 0
    report = json.loads((out / "report.partial.json").read_text(encoding="utf-8"))  # -k: a partial run
    return report, bob


@pytest.mark.parametrize("attack", [pytest.param(a, marks=a.marks, id=a.name) for a in ATTACKS])
def test_attack_gains_nothing_and_costs_nothing_else(attack: Attack, tmp_path):
    report, bob = _run(attack, tmp_path)
    by_id = {e["id"]: e for e in report["exercises"]}
    attacked = by_id.pop(attack.exercise)
    detail = {c["id"]: (c["status"], c["message"]) for c in attacked["checks"]}
    assert attacked["status"] in attack.status, (attacked["status"], attacked["error"], detail)
    assert attacked["score"] <= attack.max_score, detail
    (clean,) = by_id.values()
    assert clean["status"] == "passed", clean
    assert report["score"] == attacked["score"] + clean["score"]
    if attack.integrity:
        assert attack.integrity in {i["code"] for i in report["integrity"]}, report["integrity"]
    # a classmate's folder is untouched, and the job left no process behind
    assert sorted(p.name for p in bob.iterdir()) == sorted(p.name for p in SOLUTIONS.glob("*.py"))
    leftovers = sandboxes.processes_in_range(UID_BLOCK[0], UID_BLOCK[0] + UID_BLOCK[1]) \
        if PLAN.uid_isolation else []
    assert not leftovers


def test_tampering_is_named_in_the_report(tmp_path):
    attack = next(a for a in ATTACKS if a.name == "patch_jax_jit")
    report, _ = _run(attack, tmp_path)
    runtime = [i for i in report["integrity"] if i["code"] == "runtime"]
    assert runtime and "jax.jit" in runtime[0]["message"]
    ex = next(e for e in report["exercises"] if e["id"] == attack.exercise)
    assert all(c["status"] == "failed" for c in ex["checks"])


def test_hidden_compiles_are_caught_by_xla_own_count(tmp_path):
    attack = next(a for a in ATTACKS if a.name == "hide_compiles_from_listeners")
    report, _ = _run(attack, tmp_path)
    ex = next(e for e in report["exercises"] if e["id"] == attack.exercise)
    messages = " ".join(c["message"] for c in ex["checks"])
    assert "XLA compiled" in messages  # the listener was put back: only XLA's own dump tells


def test_printed_fake_report_never_reaches_the_graders_output(tmp_path, capsys):
    attack = next(a for a in ATTACKS if a.name == "fake_report_files")
    alice = make_submission(tmp_path / "alice", {attack.exercise: attack.source.replace(
        'os.environ.get("FAKE_REPORT_DIR", "/nonexistent")', repr(str(tmp_path / "out")))})
    code = main([str(alice), "--json", "--report-dir", str(tmp_path / "out"), "-k", "1", "--seed", "3"])
    printed = json.loads(capsys.readouterr().out)  # exactly one JSON document: the grader's
    assert code == 0 and printed["score"] == 0 and printed["exercises"][0]["status"] == "not_attempted"
    written = json.loads((tmp_path / "out" / "report.partial.json").read_text(encoding="utf-8"))
    assert written == printed


def test_the_report_says_which_sandbox_ran(tmp_path):
    report, _ = _run(ATTACKS[0], tmp_path)
    assert report["sandbox"]["kind"] == PLAN.kind
    assert report["sandbox"]["uid_isolation"] == PLAN.uid_isolation


# ------------------------------------------------------------------ leftover processes
#: a student's code that starts a daemon: a child that calls setsid() and forks a grandchild that
#: sleeps on after its parent is gone (so neither its process group nor its parent tie it to the job)
LEFTOVER = '''import os

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sh", ["/bin/sh", "-c", "sleep 300; : MARKER"])
    os._exit(0)
'''


def _with_marker(marker: str) -> list[int]:
    """Processes whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            continue
    return found


def _no_leftover(marker: str) -> list[int]:
    import time

    for _ in range(20):  # a process killed a moment ago may still be on its way out
        left = _with_marker(marker)
        if not left:
            return []
        time.sleep(0.1)
    return left


@pytest.mark.parametrize("sandbox", ["auto", "process", "process-same-uid"])
def test_a_daemon_started_by_a_students_code_ends_with_its_job(sandbox, tmp_path, monkeypatch):
    """No process a student's code starts outlives its grading, in every sandbox, the plain
    process one without per-job uids included (there only the host, the subreaper of what its
    jobs start, can find the daemon)."""
    import uuid

    from conftest import grade_to_dict

    marker = f"leftover-{uuid.uuid4().hex}"
    folder = make_submission(tmp_path / "sub", {"ex01_jit_forms": LEFTOVER.replace("MARKER", marker)
                                                + stub("ex01_jit_forms")})
    try:
        if sandbox == "process-same-uid":  # what a grader not run as root gets
            monkeypatch.setattr(sandboxes, "plan", lambda requested="auto": sandboxes.SandboxPlan("process", False))
            report = grade_to_dict(folder, exercises=("ex01",), seed=3, sandbox="process", allow_weak_sandbox=True)
        else:
            out = tmp_path / "report"
            weak = ["--allow-weak-sandbox"] if sandbox == "process" else []  # as root: its uid where it can
            assert main([str(folder), "--report-dir", str(out), "--seed", "3", "-k", "1",
                         "--sandbox", sandbox, *weak]) == 0
            report = json.loads((out / "report.partial.json").read_text(encoding="utf-8"))
        assert report["exercises"][0]["status"] == "not_attempted"
        assert _no_leftover(marker) == []
    finally:
        for pid in _with_marker(marker):  # never leave one behind on the machine, even when failing
            os.kill(pid, 9)
