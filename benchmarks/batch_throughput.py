"""Throughput of grade batch: N copies of a full-mark submission, graded -j 1, -j 2 and on a
local Dask cluster of 2 workers; submissions per minute for each.

    python benchmarks/batch_throughput.py --n 20 [-k 1 ...] [--modes j1,j2,dask2,j2-unpinned]

Run by hand (the machine is shared and noisy: compare the modes of one run, not
against fixed numbers). Each mode grades the same class with the same seed into a
results folder of its own (``--force``), so every submission is graded each time.
Besides the throughput it prints, for each mode, the speed-ups ex06 measured (the
median over the class of the student's and the reference's, with the spread), to
show whether timing stayed fair under parallelism: ``j2-unpinned`` runs -j 2
without core slots (``GRADER_NO_PIN=1``) for comparison. Prints a Markdown table, for
the closing notes, and the machine's load average before and after.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = {
    "j1": ["-j", "1"],
    "j2": ["-j", "2"],
    "dask2": ["--executor", "dask", "-j", "2"],
    "j2-unpinned": ["-j", "2"],
}


def make_class(folder: Path, n: int) -> Path:
    klass = folder / "class"
    for i in range(n):
        shutil.copytree(ROOT / "solutions" / "ch4", klass / f"student{i:03d}")
    return klass


def run_mode(mode: str, klass: Path, out: Path, seed: int, extra: list[str]) -> dict:
    env = dict(os.environ)
    if mode.endswith("-unpinned"):
        env["GRADER_NO_PIN"] = "1"
    args = [sys.executable, "-m", "grader", "batch", str(klass), "--chapter", "ch4", "--out", str(out),
            "--seed", str(seed), "--force", "--lang", "en", *MODES[mode], *extra]
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{mode}: grade batch failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    with (out / "grades.csv").open(encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["student"] != "(max points)"]
    return {"mode": mode, "wall_s": wall, "n": len(rows), "per_min": 60 * len(rows) / wall,
            "scores": [float(r["total"]) for r in rows], "statuses": [r["status"] for r in rows],
            "speedups": _speedups(out, [r["student"] for r in rows])}


def _speedups(out: Path, names: list[str]) -> dict[str, dict[str, list[float]]]:
    """ex06's measured speed-ups, per check, the student's and the reference's, over the class."""
    found: dict[str, dict[str, list[float]]] = {}
    for name in names:
        report_file = next((p for p in (out / name / "report.json", out / name / "report.partial.json")
                            if p.exists()), None)
        if report_file is None:
            continue
        for ex in json.loads(report_file.read_text(encoding="utf-8"))["exercises"]:
            for check in ex["checks"]:
                measured = check.get("measured") or {}
                if check["category"] == "speedup" and isinstance(measured.get("student"), dict):
                    entry = found.setdefault(check["id"], {"student": [], "reference": [], "passed": []})
                    for side in ("student", "reference"):
                        value = measured[side].get("speedup")
                        if isinstance(value, (int, float)):
                            entry[side].append(float(value))
                    entry["passed"].append(check["status"] == "passed")
    return found


def _spread(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="copies of the full-mark submission")
    parser.add_argument("--modes", default="j1,j2,dask2", help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("-k", "--exercise", action="append", default=[], help="grade only these exercises")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    extra = [item for k in args.exercise for item in ("-k", k)]
    load_before = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory(prefix="batch-bench-") as tmp:
        klass = make_class(Path(tmp), args.n)
        for mode in args.modes.split(","):
            result = run_mode(mode, klass, Path(tmp) / f"out-{mode}", args.seed, extra)
            results.append(result)
            print(f"{mode}: {result['n']} submissions in {result['wall_s']:.0f} s = {result['per_min']:.2f} per "
                  f"minute; scores {min(result['scores']):g}–{max(result['scores']):g}", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    print(f"\nN = {args.n}, {os.cpu_count()} CPUs, load average before {load_before[0]:.2f} "
          f"(5 min {load_before[1]:.2f}), after {load_after[0]:.2f} (5 min {load_after[1]:.2f})\n")
    print("| mode | wall (s) | submissions / min | scores | not completed |")
    print("|---|---:|---:|---|---:|")
    for r in results:
        print(f"| {r['mode']} | {r['wall_s']:.0f} | {r['per_min']:.2f} | {min(r['scores']):g}–{max(r['scores']):g} "
              f"| {sum(s != 'completed' for s in r['statuses'])} |")
    checks = sorted({c for r in results for c in r["speedups"]})
    if checks:
        print("\n| mode | check | student speed-up, median (range) | reference speed-up | passed |")
        print("|---|---|---:|---:|---:|")
        for r in results:
            for c in checks:
                s = r["speedups"].get(c, {"student": [], "reference": [], "passed": []})
                print(f"| {r['mode']} | {c} | {_spread(s['student'])} | {_spread(s['reference'])} | "
                      f"{sum(s['passed'])}/{len(s['passed'])} |")


if __name__ == "__main__":
    main()
