"""Ctrl-C at a terminal (issue "the student's terminal"): the terminal sends SIGINT to its foreground process
group, at any moment of a full grading (hosts starting, JAX importing, exercises running, timing). The grader
must end within seconds every time, with every process it started, and never write over the last full report
(an interrupted run's report is partial: report.partial.json)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, SOLUTIONS, sigint_as_at_a_terminal

pytestmark = pytest.mark.slow


def _own_group() -> None:
    """The grader leads a process group of its own, as a shell's foreground job does."""
    sigint_as_at_a_terminal()
    os.setpgrp()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A copy of the solutions whose ex08 takes 12 s to import (so that every moment below is inside the
    grading), with its last full report, as a student's folder has one."""
    folder = tmp_path_factory.mktemp("ctrlc") / "ch4"
    shutil.copytree(SOLUTIONS, folder)
    slow = folder / "ex08_aot_debug.py"
    slow.write_text("import time\ntime.sleep(12)\n" + slow.read_text(encoding="utf-8"), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "grader", str(folder), "--lang", "en", "--seed", "3"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = folder / ".grade" / "report.json"
    assert json.loads(report.read_text())["score"] == 80, done.stdout[-2000:]
    return folder, report.read_bytes()


@pytest.mark.parametrize("after_s", [0.3, 1.0, 2.0, 3.5, 5.0, 8.0])
def test_ctrl_c_to_the_process_group_stops_a_full_grading_and_keeps_the_full_report(graded, after_s):
    folder, full = graded
    process = subprocess.Popen([sys.executable, "-m", "grader", str(folder), "--lang", "en", "--seed", "4"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=ROOT, text=True,
                               preexec_fn=_own_group)
    time.sleep(after_s)
    if process.poll() is not None:
        pytest.skip(f"the grading ended in less than {after_s} s")
    os.killpg(process.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
    sent = time.monotonic()
    try:
        out, err = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"still running 10 s after Ctrl-C (sent {after_s} s in): {err[-1500:]!r}")
    took = time.monotonic() - sent
    assert process.returncode in (130, 0), (process.returncode, err[-2000:])
    assert (folder / ".grade" / "report.json").read_bytes() == full, "the last full report was written over"
    assert "Traceback" not in err, err[-2000:]
    print(f"Ctrl-C {after_s} s in: ended in {took:.2f} s, status {process.returncode}")


def test_ctrl_c_stops_watch_mode_in_the_middle_of_a_grading_again(graded, tmp_path):
    """grade --watch: a save starts a grading again (ex08 imports for 12 s); Ctrl-C 2 s into it ends watch mode
    within seconds, with every process it started."""
    pytest.importorskip("watchfiles", reason="the watch extra is not installed: pip install -e '.[watch]'")
    import threading

    folder, _ = graded
    process = subprocess.Popen([sys.executable, "-m", "grader", str(folder), "--watch", "-k", "1", "-k", "8",
                                "--lang", "en", "--seed", "4", "--report-dir", str(tmp_path / "out")],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                               text=True, preexec_fn=_own_group)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()

    def wait_for(text: str, timeout: float = 120) -> None:
        end = time.monotonic() + timeout
        while not any(text in line for line in lines):
            assert time.monotonic() < end and process.poll() is None, "".join(lines[-40:])
            time.sleep(0.1)

    try:
        wait_for("Watching")
        slow = folder / "ex08_aot_debug.py"
        slow.write_text(slow.read_text(encoding="utf-8") + "\n# saved again\n", encoding="utf-8")
        time.sleep(2.0)  # graded again meanwhile: ex08's import sleeps 12 s
        os.killpg(process.pid, signal.SIGINT)
        sent = time.monotonic()
        process.wait(timeout=10)
        print(f"watch: Ctrl-C 2 s into a grading ended it in {time.monotonic() - sent:.2f} s")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode in (0, 130), "".join(lines[-40:])
    assert not any("Traceback" in line for line in lines), "".join(lines[-40:])
