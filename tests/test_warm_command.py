"""The warm command (issue 47, "fast on the slower machine too"): a student's ``grade PATH`` is handed to a
process of the user's own that has imported the grader's modules (:mod:`grader.cli.command_server`, started
beside the warm service), which forks a child that becomes the command (:mod:`grader.cli.relay`): about 0.3
core-seconds of imports fewer in each grading after the first.

What must hold, with ``python -m grader`` as a student runs it (real processes, the real service): a served
command says what the command run by itself says (its output, its errors, its status, its report) and takes
the command's folder, environment and terminal width; Ctrl-C stops it as it stops the command, and a command
killed leaves nothing running; a command the warm command cannot run as it would run (another value of a
variable read as modules are imported; the grader's files changed) runs by itself, and a stale warm command
ends; the warm command has imported every module a grading imports (but the chapters').
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, SOLUTIONS, sigint_as_at_a_terminal
from grader.runner import sandbox as sandboxes
from grader.runner.service import alive
import test_warm_service
from test_warm_service import _children, _service_up, _wait

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sandboxes.bwrap_works() is None,
                                 reason="the warm command starts with the warm service, which serves gradings whose "
                                        "hosts run in bubblewrap: none works here")]
env = test_warm_service.env  # the fixture: a cache of the test's own (so a service of its own), the service on
#: the command run by itself, in this process's Python, whatever runs warm (what a served command must equal)
BY_ITSELF = "import sys; from grader.cli import _app; sys.exit(_app().main(sys.argv[1:]))"


def _command_pid(env: dict) -> int:
    """The warm command's pid, once it listens (it starts beside the service, after the first grading)."""
    code = "from grader.service_folder import command_socket; print(command_socket())"
    path = Path(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                               check=True).stdout.strip())
    found: list[int] = []

    def listening() -> bool:
        found[:] = [int(p) for p in os.listdir("/proc") if p.isdigit() and _argv(int(p))[-1:] == [str(path)]]
        return path.exists() and bool(found)

    assert _wait(listening, 60), f"no warm command on {path}"
    return found[0]


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def _run(env: dict, *args: str, by_itself: bool = False, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    head = ["-c", BY_ITSELF] if by_itself else ["-m", "grader"]
    return subprocess.run([sys.executable, *head, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=600)


def _started(env: dict, tmp_path: Path) -> int:
    """A first grading (its own hosts), the service and the warm command it starts; the command's pid."""
    first = _run(env, str(SOLUTIONS), "-k", "ex01", "--lang", "en", "--report-dir", str(tmp_path / "r0"))
    assert first.returncode == 0, first.stderr[-3000:]
    _service_up(Path(env["GRADER_CACHE_DIR"]), SOLUTIONS)
    return _command_pid(env)


def _without_times(text: str) -> list[str]:
    """The lines of a terminal report but the one with the grading's seconds (``..., 1.7 s``)."""
    return [line for line in text.splitlines() if not line.rstrip().endswith(" s")]


def test_a_served_command_says_what_the_command_says(env, tmp_path):
    _started(env, tmp_path)
    args = ("-k", "ex02", "-k", "ex03", "--seed", "7", "--lang", "en", "--report-dir", str(tmp_path / "r"))
    partial = tmp_path / "r" / "report.partial.json"
    runs = {}
    for name, columns, by_itself in (("served", "52", False), ("alone", "52", True), ("wide", "200", False)):
        runs[name] = _run({**env, "COLUMNS": columns}, str(SOLUTIONS), *args, by_itself=by_itself)
        assert runs[name].returncode == 0, runs[name].stderr[-2000:]
        runs[name].report = json.loads(partial.read_text())
    assert _without_times(runs["served"].stdout) == _without_times(runs["alone"].stdout)
    # the command's terminal width, not the service's: the same report wraps otherwise at 200 columns
    assert _without_times(runs["wide"].stdout) != _without_times(runs["served"].stdout)
    assert runs["served"].report["timings"].get("command_from") == "warm command"
    assert runs["wide"].report["timings"].get("command_from") == "warm command"
    assert "command_from" not in runs["alone"].report["timings"]
    assert [(e["id"], e["score"]) for e in runs["served"].report["exercises"]] == \
        [(e["id"], e["score"]) for e in runs["alone"].report["exercises"]]
    # the user's mistake: one line, status 2, in the language asked
    wrong = [_run(env, str(SOLUTIONS), "--no-such-option", by_itself=b) for b in (False, True)]
    assert wrong[0].returncode == wrong[1].returncode == 2 and wrong[0].stderr == wrong[1].stderr
    # the command's own folder and language: a relative path from another folder, in Chinese
    there = _run({**env, "LANGUAGE": "zh"}, "ch4", "-k", "ex01", "--lang", "zh", "--report-dir",
                 str(tmp_path / "zh"), cwd=SOLUTIONS.parent)
    assert there.returncode == 0 and "第 4 章" in there.stdout, there.stderr[-2000:]
    assert json.loads((tmp_path / "zh" / "report.partial.json").read_text())["timings"]["command_from"] == \
        "warm command"


def test_ctrl_c_stops_a_served_command_and_a_killed_one_leaves_nothing(env, tmp_path):
    command = _started(env, tmp_path)
    folder = tmp_path / "slow" / "ch4"
    shutil.copytree(SOLUTIONS, folder)
    slow = folder / "ex08_aot_debug.py"  # every moment below is inside the grading
    slow.write_text("import time\ntime.sleep(15)\n" + slow.read_text(encoding="utf-8"), encoding="utf-8")

    one_cpu = min(os.sched_getaffinity(0))

    def as_a_student(niceness: int) -> None:  # `nice -n 3 taskset -c 0 grade ...`, interrupted at a terminal
        sigint_as_at_a_terminal()
        os.setpgrp()
        os.sched_setaffinity(0, {one_cpu})
        os.nice(niceness)

    def interrupted(how: signal.Signals) -> subprocess.Popen:
        niceness = os.getpriority(os.PRIO_PROCESS, 0) + 3
        process = subprocess.Popen([sys.executable, "-m", "grader", str(folder), "--lang", "en"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env, text=True,
                                   preexec_fn=lambda: as_a_student(3))
        try:
            assert _wait(lambda: _children(command), 30), "the warm command forked no child"
            [child] = _children(command)

            # the command's niceness, then its CPUs, taken over as the child starts (a few ms after the fork: its
            # CPUs just before its niceness, command_server._become); read at once, before the grading's own
            # schedule pins it to the cores beside ex06's timing (grader.affinity), which would hide their loss
            assert _wait(lambda: os.getpriority(os.PRIO_PROCESS, child) == niceness, 10)
            status = Path(f"/proc/{child}/status").read_text()
            assert f"Cpus_allowed_list:\t{one_cpu}\n" in status, status
            time.sleep(2.0)
        except BaseException:  # nothing of the test's left running: the command, and its child as it goes
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=30)
            raise
        os.killpg(process.pid, how)  # the terminal's Ctrl-C goes to the command's own process group
        process.communicate(timeout=30)
        return process

    stopped = interrupted(signal.SIGINT)
    assert stopped.returncode == 130
    assert (folder / ".grade" / "report.partial.json").exists() or (folder / ".grade" / "report.json").exists()
    assert _wait(lambda: not _children(command), 15), "the served command outlived Ctrl-C"
    killed = interrupted(signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL
    assert _wait(lambda: not _children(command), 30), "the served command outlived its killed command"
    assert alive(command)  # and the warm command serves the next one
    after = _run(env, str(SOLUTIONS), "-k", "ex01", "--report-dir", str(tmp_path / "after"))
    assert after.returncode == 0
    assert json.loads((tmp_path / "after" / "report.partial.json").read_text())["timings"]["command_from"] == \
        "warm command"


def test_watch_mode_served_says_so_in_each_report(env, tmp_path):
    """``grade PATH --watch`` through the warm command: each report it writes says ``command_from``, as a
    one-shot command's does (grader.watch.Watcher's ``timings``)."""
    pytest.importorskip("watchfiles", reason="watch mode needs the watch extra: pip install -e '.[watch]'")
    command = _started(env, tmp_path)
    folder = tmp_path / "watched" / "ch4"
    shutil.copytree(SOLUTIONS, folder)
    reports = tmp_path / "watch-reports"
    process = subprocess.Popen([sys.executable, "-m", "grader", str(folder), "-k", "ex01", "--watch", "--lang", "en",
                                "--report-dir", str(reports)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               cwd=ROOT, env=env, text=True, preexec_fn=os.setpgrp)
    try:
        written = lambda: sorted(reports.glob("report*.json"))  # noqa: E731
        assert _wait(lambda: bool(written()) and bool(_children(command)), 120), process.stderr
        report = json.loads(written()[0].read_text(encoding="utf-8"))
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C ends watch mode
        process.communicate(timeout=30)
    assert process.returncode == 0 or process.returncode == 130, process.returncode
    assert report["timings"].get("command_from") == "warm command", report["timings"]


def test_a_command_it_cannot_run_as_it_would_runs_by_itself(env, tmp_path):
    command = _started(env, tmp_path)
    other = _run({**env, "JAX_ENABLE_X64": "0"}, str(SOLUTIONS), "-k", "ex01", "--report-dir", str(tmp_path / "x"))
    assert other.returncode == 0, other.stderr[-2000:]
    report = json.loads((tmp_path / "x" / "report.partial.json").read_text())
    assert "command_from" not in report["timings"] and report["score"] == report["max_score"]
    # the grader's files changed since it imported them: it ends, and the command runs by itself
    touched = ROOT / "grader" / "cli" / "relay.py"
    seen = touched.stat()
    try:
        os.utime(touched, ns=(seen.st_atime_ns, seen.st_mtime_ns + 1_000_000_000))
        stale = _run(env, str(SOLUTIONS), "-k", "ex01", "--report-dir", str(tmp_path / "stale"))
    finally:
        os.utime(touched, ns=(seen.st_atime_ns, seen.st_mtime_ns))
    assert stale.returncode == 0, stale.stderr[-2000:]
    assert "command_from" not in json.loads((tmp_path / "stale" / "report.partial.json").read_text())["timings"]
    assert _wait(lambda: not alive(command), 10), "a stale warm command went on"


def test_the_warm_command_has_imported_what_a_grading_imports(tmp_path):
    """Every module a grading of the solutions imports, but the chapters' and JAX's, is imported before the
    first request (else each served command imports it again, as the command by itself does)."""
    code = f"""
import json, sys
from grader.cli import command_server
for name in command_server.WARM_MODULES:
    __import__(name)
before = set(sys.modules)
assert not any(m == "jax" or m.startswith("jax.") for m in before), "the warm command imported JAX"
from grader.cli import _app
code = _app().main([{str(SOLUTIONS)!r}, "-k", "ex01", "-k", "ex06", "--lang", "en", "--report-dir", {str(tmp_path)!r}])
print(json.dumps(sorted(set(sys.modules) - before)))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env=dict(os.environ, GRADER_CACHE_DIR=str(tmp_path / "cache")))
    assert done.returncode == 0, done.stderr[-3000:]
    late = [m for m in json.loads(done.stdout.splitlines()[-1])
            if m.startswith("grader.") and not m.startswith("grader.chapters.")]
    assert late == [], late
