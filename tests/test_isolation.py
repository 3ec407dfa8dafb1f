"""A crash, an exit, a hang or an interrupt in one exercise costs that exercise only,
and the report is always written."""
from __future__ import annotations

import json
import os

import pytest

from conftest import SOLUTIONS, make_submission

from grader.cli import main

pytestmark = pytest.mark.slow

EXIT_AT_IMPORT = "import sys\nsys.exit(3)\n"
OS_EXIT_IN_CALL = (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8").replace(
    '    return jnp.where(x > 0, x * x, 0.5 * x)', '    import os\n    os._exit(0)')
INFINITE_LOOP = (SOLUTIONS / "ex03_static_args.py").read_text(encoding="utf-8").replace(
    "    return coeff * x ** 2 + 1.0", "    while True:\n        pass")
KEYBOARD_INTERRUPT = (SOLUTIONS / "ex04_cache_keys.py").read_text(encoding="utf-8").replace(
    "    values = np.asarray(x, dtype=np.float32).reshape(-1)", "    raise KeyboardInterrupt")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = make_submission(tmp_path_factory.mktemp("sub"), {
        "ex01_jit_forms": EXIT_AT_IMPORT,
        "ex02_where": OS_EXIT_IN_CALL,
        "ex03_static_args": INFINITE_LOOP,
        "ex04_cache_keys": KEYBOARD_INTERRUPT,
    })
    out = tmp_path_factory.mktemp("report")
    code = main([str(folder), "--report-dir", str(out), "--exercise-timeout", "8", "--seed", "5",
                 "-k", "1", "-k", "2", "-k", "3", "-k", "4", "-k", "7", "-k", "8"])
    assert code == 0
    data = json.loads((out / "report.partial.json").read_text(encoding="utf-8"))  # -k: a partial run
    return {e["id"]: e for e in data["exercises"]}


def test_exit_at_import(report):
    ex = report["ex01_jit_forms"]
    assert ex["status"] == "error" and ex["score"] == 0
    assert "SystemExit" in ex["error"]


def test_os_exit_in_a_call(report):
    ex = report["ex02_where"]
    assert ex["status"] == "error" and ex["score"] == 0
    assert "exit code 0" in ex["error"]


def test_infinite_loop_is_stopped(report):
    ex = report["ex03_static_args"]
    assert ex["status"] == "timeout"
    assert ex["duration_s"] < 30


def test_keyboard_interrupt_costs_only_the_calls_that_raise(report):
    ex = report["ex04_cache_keys"]
    statuses = {c["id"]: c["status"] for c in ex["checks"]}
    assert statuses["bucket_length.values"] == "passed"
    assert statuses["masked_mean_sq.values"] == "failed"
    message = next(c["message"] for c in ex["checks"] if c["id"] == "masked_mean_sq.values")
    assert "KeyboardInterrupt" in message


def test_the_other_exercises_are_unaffected(report):
    assert report["ex07_pitfalls"]["status"] == "passed"
    assert report["ex08_aot_debug"]["status"] == "passed"


def test_a_killed_host_is_restarted_for_the_other_exercises(tmp_path, monkeypatch):
    """Without a sandbox a job can kill its host (same uid): the next job gets a new host.

    The killer itself still reports to the grader over its own socket, so its honest
    work is graded; it gains nothing, and costs the others nothing."""
    from conftest import grade_to_dict

    from grader import store

    # one at a time, the killer first (the longest in recent gradings starts first, grader.scheduling):
    # were it last, no job would come after it to need a new host
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    store.keep_durations("ch4", {"ex01_jit_forms": 99.0, "ex03_static_args": 1.0, "ex04_cache_keys": 1.0})

    kill_host = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + (
        SOLUTIONS / "ex01_jit_forms.py").read_text(encoding="utf-8")
    folder = make_submission(tmp_path, {"ex01_jit_forms": kill_host})
    report = grade_to_dict(folder, exercises=("1", "3", "4"), sandbox="process", at_once=1, seed=8,
                           allow_weak_sandbox=True)
    by_id = {e["id"]: e for e in report["exercises"]}
    assert by_id["ex01_jit_forms"]["score"] <= 10
    assert by_id["ex03_static_args"]["status"] == "passed"
    assert by_id["ex04_cache_keys"]["status"] == "passed"
    assert report["timings"]["host_restarts"] >= 1


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="a process of another uid needs root")
def test_the_uid_scan_finds_a_process_by_its_real_uid_whatever_its_name():
    """processes_in_range reads each process's /proc status as bytes, its head only: a process under a
    sandbox uid is found, and a name that spells a Uid line (the kernel escapes its newline) fools nobody."""
    import subprocess
    import sys
    import time

    from grader.runner import sandbox

    pool = sandbox.UidPool()
    uid = pool.acquire()  # locked for this test: no grading on the machine uses it meanwhile
    child = subprocess.Popen([sys.executable, "-c", (
        "import ctypes, os, time\n"
        "ctypes.CDLL(None).prctl(15, b'x\\nUid:\\t4242\\t', 0, 0, 0)\n"  # PR_SET_NAME
        f"os.setgid({uid}); os.setuid({uid})\n"
        "print('ready', flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while child.pid not in sandbox.processes_of(uid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.pid in sandbox.processes_in_range(uid, uid + 1)
        assert child.pid not in sandbox.processes_in_range(4242, 4243)
        assert sandbox.kill_uid(uid) >= 1 and child.wait(timeout=10) == -9
    finally:
        child.kill()
        child.wait()
        pool.release(uid)
