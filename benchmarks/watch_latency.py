#!/usr/bin/env python3
"""From a save to its verdict in watch mode, against a fresh ``grade`` of the same exercise.

``grade COPY --watch -k ex02`` runs on a copy of the stubs; the benchmark saves ex02's
file ``--saves`` times, alternating the solution and the stub (so that every save is a
change to grade), and times each save until the terminal says it was re-graded. For
comparison it times ``grade COPY -k ex02`` run afresh (new processes, JAX imported
again), as many times. Medians, min–max beside them.

    python benchmarks/watch_latency.py [--saves 6] [--exercise ex02_where]
"""
from __future__ import annotations

import argparse
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from machine import Machine  # noqa: E402
GRADE = [sys.executable, "-c", "import sys; from grader.cli import main; sys.exit(main())"]


def _lines(proc: subprocess.Popen) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _wait_for(lines: queue.Queue, text: str, timeout: float = 180) -> float:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if text in lines.get(timeout=0.2):
                return time.monotonic()
        except queue.Empty:
            continue
    raise SystemExit(f"watch mode never printed {text!r}")


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):5.2f} s ({min(values):.2f}–{max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--saves", type=int, default=6)
    parser.add_argument("--exercise", default="ex02_where")
    args = parser.parse_args()
    machine = Machine()
    tag = args.exercise.split("_")[0]
    work = Path(tempfile.mkdtemp(prefix="grade-watch-bench-"))
    folder = work / "ch4"
    shutil.copytree(ROOT / "exercises" / "ch4", folder, ignore=shutil.ignore_patterns(".grade"))
    target = folder / f"{args.exercise}.py"
    versions = [(ROOT / "solutions" / "ch4" / target.name).read_text(encoding="utf-8"),
                target.read_text(encoding="utf-8")]

    proc = subprocess.Popen([*GRADE, str(folder), "--watch", "-k", tag, "--lang", "en"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    watched: list[float] = []
    try:
        lines = _lines(proc)
        _wait_for(lines, "Watching")
        for i in range(args.saves):
            saved = time.monotonic()
            target.write_text(versions[i % 2] + f"\n# save {i}\n", encoding="utf-8")
            watched.append(_wait_for(lines, "re-graded in") - saved)
            _wait_for(lines, "Watching")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)

    fresh: list[float] = []
    for i in range(args.saves):
        target.write_text(versions[i % 2], encoding="utf-8")
        start = time.monotonic()
        subprocess.run([*GRADE, str(folder), "-k", tag, "--report-dir", str(work / "fresh")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        fresh.append(time.monotonic() - start)
    shutil.rmtree(work, ignore_errors=True)

    print(f"{args.exercise}, {args.saves} saves (solution and stub in turn)")
    print(f"  watch mode, from a save to its verdict:  {_summary(watched)}")
    print(f"  a fresh `grade -k {tag}` of the same:      {_summary(fresh)}")
    print(f"  ratio (medians): {statistics.median(watched) / statistics.median(fresh):.2f}")
    print(machine.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
