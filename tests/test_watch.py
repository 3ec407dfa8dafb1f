"""Watch mode from the student's side: ``grade FOLDER --watch`` grades, then grades again
the exercise whose file is saved; a burst of saves is one re-grade, an editor's swap and
backup files are no change, and Ctrl-C stops it cleanly."""
from __future__ import annotations

import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import SOLUTIONS, STUBS

pytestmark = pytest.mark.slow


class Watching:
    """A ``grade --watch`` process and the lines it prints, read as they come."""

    def __init__(self, folder: Path, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from grader.cli import main; sys.exit(main())", str(folder),
             "--watch", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 120) -> float:
        """Read lines until one holds ``text``; returns when it came (time.monotonic())."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            self.seen.append(line)
            if text in line:
                return time.monotonic()
        raise AssertionError(f"{text!r} never came; the output was:\n" + "\n".join(self.seen[-60:]))

    def drain(self, seconds: float) -> list[str]:
        end, out = time.monotonic() + seconds, []
        while time.monotonic() < end:
            try:
                out.append(self.lines.get(timeout=0.1))
            except queue.Empty:
                pass
        self.seen += out
        return out


@pytest.fixture
def folder(tmp_path):
    target = tmp_path / "ch4"
    shutil.copytree(STUBS, target, ignore=shutil.ignore_patterns(".grade"))
    return target


def test_watch_regrades_a_saved_exercise_once_per_burst_and_stops_on_ctrl_c(folder):
    watching = Watching(folder, "-k", "2", "--seed", "5", "--lang", "en")
    try:
        watching.wait_for("Watching")
        assert any("not attempted" in line for line in watching.seen)
        answer = (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8")
        for i in range(5):  # an editor saving in a burst: several writes within half a second
            (folder / "ex02_where.py").write_text(answer + f"\n# save {i}\n", encoding="utf-8")
            time.sleep(0.08)
        for junk in (".ex02_where.py.swp", "ex02_where.py~", "4913", ".#ex02_where.py"):
            (folder / junk).write_text("x", encoding="utf-8")  # swap and backup files: no change
        saved = time.monotonic()
        done = watching.wait_for("re-graded in")
        print(f"\nfrom the last save to the verdict: {done - saved:.1f} s")
        watching.wait_for("Watching")
        later = watching.drain(4)
        assert not any("saved: grading" in line for line in later), later  # the burst was one re-grade
        grading_lines = [line for line in watching.seen if "saved: grading" in line]
        assert grading_lines == ["ex02_where.py saved: grading ex02_where …"], grading_lines
        assert any(line.startswith(" ✓ ex02_where") and "10/10" in line for line in watching.seen)
        assert any("1 of 1 exercises pass" in line for line in watching.seen)  # -k 2: ex02 is watched
        assert any("ex02_where: done, every check passes" in line for line in watching.seen)
        assert (folder / ".grade" / "report.partial.json").exists()  # what is watched, as it stands (-k: partial)
    finally:
        watching.proc.send_signal(signal.SIGINT)
    assert watching.proc.wait(timeout=15) == 0
    watching.drain(1)
    assert any("Stopped watching" in line for line in watching.seen)
    assert not any("Traceback" in line for line in watching.seen)


def test_watch_marks_a_finished_chapter(folder):
    for file in SOLUTIONS.glob("*.py"):
        shutil.copy(file, folder / file.name)
    (folder / "ex02_where.py").write_text((STUBS / "ex02_where.py").read_text(encoding="utf-8"), encoding="utf-8")
    watching = Watching(folder, "--seed", "6", "--lang", "zh")
    try:
        watching.wait_for("正在监视", timeout=240)
        assert any("8 道练习中已通过 7 道" in line for line in watching.seen)
        assert any("下一步：ex02_where：打开" in line for line in watching.seen)
        shutil.copy(SOLUTIONS / "ex02_where.py", folder / "ex02_where.py")
        watching.wait_for("已重新评测")
        watching.wait_for("正在监视")
    finally:
        watching.proc.send_signal(signal.SIGINT)
    watching.proc.wait(timeout=15)
    text = "\n".join(watching.seen)
    assert "8 道练习中已通过 8 道" in text and "第 4 章：即时编译（jit）基础 完成" in text
