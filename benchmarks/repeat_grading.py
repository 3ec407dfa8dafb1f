"""Grade the reference and the stubs several times in a row; report times, scores and speed-ups.

    python benchmarks/repeat_grading.py --runs 5 [--load N]

Run by hand (the machine is shared and noisy: compare medians within one run, not
against fixed numbers). With ``--load N`` it keeps N busy processes running in the
background, to show that the score of a submission does not change on a loaded
machine. Prints a Markdown table, for the closing notes.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _burn() -> None:  # a CPU hog for --load
    while True:
        pass


def grade(path: Path, extra: list[str]) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "grader", str(path), "--json", "--report-dir", out, *extra],
                              capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"grade failed ({proc.returncode}): {proc.stderr.strip()}")
    return wall, json.loads(proc.stdout)


def speedups(report: dict) -> dict[str, tuple[float, float]]:
    out = {}
    for ex in report["exercises"]:
        for check in ex["checks"]:
            m = check.get("measured", {})
            if check["category"] == "speedup" and "student" in m:
                out[check["id"]] = (m["student"]["speedup"], m["reference"]["speedup"], check["status"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--load", type=int, default=0, help="busy background processes while grading")
    parser.add_argument("--sandbox", default="auto")
    args = parser.parse_args()
    hogs = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.load)]
    for hog in hogs:
        hog.start()
    try:
        rows = []
        for label, path in (("solutions/ch4", ROOT / "solutions" / "ch4"), ("exercises/ch4", ROOT / "exercises" / "ch4")):
            for run in range(args.runs):
                wall, report = grade(path, ["--sandbox", args.sandbox])
                rows.append((label, run + 1, wall, report))
    finally:
        for hog in hogs:
            hog.terminate()
    print("| submission | run | wall s | score | ex06 speed-ups (student / reference) | sandbox |")
    print("|---|---:|---:|---:|---|---|")
    for label, run, wall, report in rows:
        sp = "; ".join(f"{k}: {s:.1f}× / {r:.1f}× ({st})" for k, (s, r, st) in speedups(report).items()) or "-"
        sandbox = report["sandbox"]["kind"] + ("+uid" if report["sandbox"].get("uid_isolation") else "")
        print(f"| {label} | {run} | {wall:.1f} | {report['score']:g}/{report['max_score']:g} | {sp} | {sandbox} |")
    for label in ("solutions/ch4", "exercises/ch4"):
        walls = [w for l, _, w, _ in rows if l == label]
        scores = {r["score"] for l, _, _, r in rows if l == label}
        print(f"\n{label}: median wall {statistics.median(walls):.1f} s (min {min(walls):.1f}, max {max(walls):.1f}); "
              f"scores {sorted(scores)}")
    print(f"\nmachine: {multiprocessing.cpu_count()} cores, background load {args.load}, "
          f"{rows[0][3]['environment']['backend']} / JAX {rows[0][3]['environment']['jax']}")


if __name__ == "__main__":
    main()
