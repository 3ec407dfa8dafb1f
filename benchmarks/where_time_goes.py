#!/usr/bin/env python3
"""Where a grading's core-seconds go, phase by phase: CPU time, not wall time (the machine is shared).

    python benchmarks/where_time_goes.py [--n 8] [--mode j1|j2|dask2|single] [-k ex06 ...]

Grades a class of ``--n`` distinct submissions (made as ``benchmarks/batch_throughput.py``
makes them) with ``grade batch`` (``--mode j1``, ``j2`` or ``dask2``), or grades the
reference solutions ``--n`` times with ``grade`` (``--mode single``), with caches as a
grader used before has them (the reference's compiled programs, none of its outcomes).

The whole run's CPU seconds (every process it started, from the kernel's accounting of
waited-for children) are split with what each report's ``timings`` says, per student:

* each exercise's jobs (the student's, and the reference's where one ran): the kernel's
  CPU count of each job, of which its start (JAX's backend), the import of the
  student's module, and the probe; in the probe, JAX's stages as JAX times them
  (tracing, lowering to MLIR, compiling or loading a program from the persistent cache:
  wall seconds, so on a loaded machine a stage looks longer than its CPU share);
* in a batch, the class's compiler's CPU for each job's programs (``class_compiler_cpu_s``:
  :mod:`grader.child.compiler`);
* the grading's own process (``grader_cpu_s``: reading the submission, the verdicts, the
  report; in a batch, the worker's);
* the rest: starting hosts (importing JAX), the batch's own bookkeeping, Dask, writing
  the gradebook: everything not inside a job or a grading.

Prints Markdown tables, with the machine's load before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import Machine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from batch_throughput import MODES, counted, fresh_cache, make_class, perf_seconds  # noqa: E402

STAGES = ("trace_s", "lower_s", "compile_s", "cache_load_s")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(mode: str, n: int, seed: int, extra: list[str], work: Path) -> tuple[float, float, list[dict]]:
    """Grade; returns the wall seconds, the CPU seconds of everything started, and the reports."""
    env = {**os.environ, "GRADER_CACHE_DIR": str(fresh_cache(work / "cache"))}
    reports = []
    cpu, wall = 0.0, 0.0
    commands = []
    if mode == "single":
        for i in range(n):
            out = work / f"single-{i}"
            commands.append(([sys.executable, "-m", "grader", str(ROOT / "solutions" / "ch4"), "--seed", str(seed + i),
                              "--report-dir", str(out), *extra], [out]))
    else:
        klass = make_class(work, n)
        out = work / "out"
        commands.append(([sys.executable, "-m", "grader", "batch", str(klass), "--chapter", "ch4", "--out", str(out),
                          "--seed", str(seed), "--force", "--lang", "en", *MODES[mode], *extra],
                         [out / f"student{i:03d}" for i in range(n)]))
    for argv, folders in commands:
        argv, perf_out = counted(argv)
        cpu0, wall0 = children_cpu(), time.perf_counter()
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
        wall += time.perf_counter() - wall0
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv[-8:])} failed: {proc.stderr[-2000:]}")
        cpu += perf_seconds(perf_out) if perf_out else children_cpu() - cpu0
        for folder in folders:
            if (folder / "report.json").exists():
                reports.append(json.loads((folder / "report.json").read_text(encoding="utf-8")))
    return wall, cpu, reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--mode", default="j1", choices=["single", *MODES])
    parser.add_argument("-k", "--exercise", action="append", default=[])
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    extra = [item for k in args.exercise for item in ("-k", k)]
    machine = Machine()
    work = Path(tempfile.mkdtemp(prefix="where-time-goes-"))
    try:
        wall, cpu, reports = run(args.mode, args.n, args.seed, extra, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = len(reports)
    rows: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    grader_cpu = []
    for report in reports:
        timings = report.get("timings", {})
        grader_cpu.append(timings.get("grader_cpu_s") or 0.0)
        for ex_id, t in timings.items():
            if not isinstance(t, dict):
                continue
            for side in ("student", "reference"):
                w = t.get(f"{side}_work") or {}
                row = rows[f"{ex_id} ({side})"]
                total = w.get("total_cpu_s")
                row["cpu"].append(total or 0.0)
                if total is None:
                    continue
                started, imported, done = (w.get(k) for k in ("started_cpu_s", "imported_cpu_s", "cpu_s"))
                row["start"].append(started or 0.0)
                row["import"].append((imported or started or 0.0) - (started or 0.0))
                row["probe"].append(max(0.0, (done or imported or 0.0) - (imported or 0.0)))
                row["programs"].append(w.get("programs", 0))
                row["compiler"].append(w.get("class_compiler_cpu_s", 0.0))
                for stage in STAGES:
                    row[stage].append(w.get(stage, 0.0))
    jobs = sum(sum(r["cpu"]) for r in rows.values())
    compiler = sum(sum(r["compiler"]) for r in rows.values())
    print(f"\n{n} gradings ({args.mode}), wall {wall:.1f} s, CPU {cpu:.1f} s in all: "
          f"{cpu / max(n, 1):.2f} core-seconds "
          f"a student\n{machine.describe()}\n")
    print("| per student | core-seconds | share |")
    print("|---|---:|---:|")
    rest = cpu - jobs - compiler - sum(grader_cpu)
    for label, value in (("jobs (every exercise, both sides)", jobs),
                         ("the class's compiler, for those jobs (a batch)", compiler),
                         ("the grading's own process", sum(grader_cpu)),
                         ("the rest: hosts, batch, Dask, gradebook", rest)):
        print(f"| {label} | {value / max(n, 1):.3f} | {value / cpu:.0%} |")
    print("\nEach job, mean over the gradings where it ran (CPU seconds; JAX's stages in wall seconds):\n")
    print("| job | ran | CPU | start | import | probe | programs | trace | lower | compile | of which cache load "
          "| the class's compiler's CPU for it |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in sorted(rows):
        r = rows[name]
        ran = len(r["start"])
        if not ran:
            continue
        # B023: mean reads this iteration's r and is called in this iteration only
        mean = lambda key: statistics.fmean(r[key]) if r[key] else 0.0  # noqa: E731, B023
        print(f"| {name} | {ran}/{n} | {sum(r['cpu']) / ran:.3f} | {mean('start'):.3f} | {mean('import'):.3f} | "
              f"{mean('probe'):.3f} | {mean('programs'):.0f} | " + " | ".join(f"{mean(s):.3f}" for s in STAGES)
              + f" | {mean('compiler'):.3f} |")


if __name__ == "__main__":
    main()
