"""What a job leaves in its folder for the grader to read: where it was when it hung (the stack it
dumped on request), how much disk it used, and how many programs XLA compiled in it (its dump,
which the grader counts itself: a student's code that hides compiles from JAX's events does
not hide them from XLA's record)."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in (?P<function>.+)$')


def student_line(dump: str, module_dir: str) -> str | None:
    """``file:line`` of the innermost frame of the student's module in a faulthandler dump.

    The dump lists each thread's frames innermost first; the first frame whose file is
    in the submission's folder is where the student's code was.
    """
    for line in dump.splitlines():
        match = _FRAME.match(line)
        if match and os.path.dirname(os.path.realpath(match["file"])) == module_dir:
            return f"{os.path.basename(match['file'])}:{match['line']}"
    return None


def dumped_line(stack: Path, module_dir: str, wait_s: float = 1.0) -> str | None:
    """:func:`student_line` of the stack a job is dumping to ``stack`` (asked just now), once it is written;
    ``None`` when nothing came within ``wait_s`` seconds."""
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        try:
            text = stack.read_text(errors="replace")
        except OSError:
            text = ""
        if text.strip():
            time.sleep(0.05)  # let faulthandler finish writing every thread
            return student_line(stack.read_text(errors="replace"), module_dir)
        time.sleep(0.02)
    return None


def disk_usage(folder: Path) -> int:
    """Bytes really used under ``folder`` (allocated blocks: a sparse file does not fool it)."""
    total = 0
    stack = [str(folder)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        else:
                            total += entry.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def count_xla_modules(folder: Path) -> int | None:
    """Distinct modules XLA compiled (its dump names files module_NNNN.<name>.*)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    return len({name.split(".", 1)[0] for name in names if name.startswith("module_")})
