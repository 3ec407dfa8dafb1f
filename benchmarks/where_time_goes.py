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

Then the same CPU seconds split by process, as ``/proc`` shows them while the command runs (every
20 ms, each process's own CPU as last seen: ``by_process``): the command's own processes, a batch's
workers, each kind of process that imports JAX (a student's host or a batch's template, the
reference's host, the class's compiler's host: their own CPU is mostly that import), the hosts a
template forks for each student, and the jobs under each. What the reports cannot say (the rest
above) is there by process.

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
from grading_timeline import _cmdline, _descendants, _stat  # noqa: E402

STAGES = ("trace_s", "lower_s", "compile_s", "cache_load_s")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: how often the command's processes are looked at in /proc (seconds)
WATCH_EVERY_S = 0.02


def watched_run(argv: list[str], env: dict | None) -> tuple[int, dict[int, dict]]:
    """Run ``argv``; its exit status and every process it started as /proc showed them: each one's
    parent, command line (seen once) and own CPU seconds (as last seen)."""
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: dict[int, dict] = {}
    while process.poll() is None:
        for pid in [process.pid, *_descendants(process.pid)]:
            found = _stat(pid)
            if found is None:
                continue
            parent = seen.get(found[0])
            if pid not in seen:
                seen[pid] = {"parent": found[0], "argv": [part for part in _cmdline(pid) if part]}
            elif parent is not None and seen[pid]["argv"] == parent["argv"] \
                    and not _entry(seen[pid]["argv"]).startswith("grader.child"):
                # read again while it runs the command's command line: a fork that may yet exec (a worker).
                # A host's forks (jobs) never exec, and are not read again: reading a process's command
                # line takes its memory map's lock, which its page faults need. One that ended reads
                # empty, and keeps what it ran.
                seen[pid]["argv"] = [part for part in _cmdline(pid) if part] or seen[pid]["argv"]
            seen[pid]["cpu"] = found[2]
        time.sleep(WATCH_EVERY_S)
    said = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv[-8:])} failed: {said[-2000:]}")
    return process.returncode, seen


def _entry(argv: list[str]) -> str:
    """The module a Python process of the grader runs (``-m grader.child.host``), or ``""``."""
    if not argv or not os.path.basename(argv[0]).startswith("python") or "-m" not in argv[:-1]:
        return ""
    return argv[argv.index("-m") + 1]


def by_process(seen: dict[int, dict]) -> dict[str, float]:
    """The CPU seconds of ``seen`` (:func:`watched_run`) by kind of process (see the module)."""
    def root_of(pid: int) -> tuple[int, int]:
        """The process that exec'd what ``pid`` runs (its nearest ancestor with a command line of its own,
        or itself) and how many forks below it ``pid`` is."""
        depth = 0
        while pid in seen and seen[pid]["parent"] in seen and seen[seen[pid]["parent"]]["argv"] == seen[pid]["argv"]:
            pid, depth = seen[pid]["parent"], depth + 1
        return pid, depth

    def kind_of_root(pid: int) -> str:
        argv, entry = seen[pid]["argv"], _entry(seen[pid]["argv"])
        parent = seen.get(seen[pid]["parent"], {}).get("argv", [])
        if entry == "grader.child.template":
            return "the template of students' hosts (a batch)"
        if entry == "grader.child.host":
            config = argv[-1] if argv else ""
            if '"modules": []' in config:
                return "the class's compiler's host"
            if parent and os.path.basename(parent[0]) == "bwrap":
                return "the student's host"
            return "the reference's host"
        if entry == "grader.batch.worker":
            return "a batch's workers"
        if entry == "grader":
            return "the command (grade, grade batch)"
        return f"other: {os.path.basename(argv[0])}" if argv else "other: ended before it was seen"

    split: dict[str, float] = defaultdict(float)
    for pid, process in seen.items():
        root, depth = root_of(pid)
        kind = kind_of_root(root)
        if kind.startswith("the template"):
            kind = [f"{kind}: importing JAX, forking", "the hosts it forks, one a student",
                    "the students' jobs"][min(depth, 2)]
        elif "host" in kind:
            kind = f"{kind}: importing JAX, forking" if depth == 0 else f"{kind}: its jobs"
        split[kind] += process.get("cpu", 0.0)
    return dict(split)


def run(mode: str, n: int, seed: int, extra: list[str], work: Path) -> tuple[float, float, list[dict], dict]:
    """Grade; returns the wall seconds, the CPU seconds of everything started, the reports and the CPU
    seconds by kind of process (:func:`by_process`)."""
    # no warm service in --mode single: its hosts are not the command's descendants, whose CPU this splits
    env = {**os.environ, "GRADER_CACHE_DIR": str(fresh_cache(work / "cache")), "GRADER_WARM_S": "0"}
    reports = []
    cpu, wall = 0.0, 0.0
    split: dict[str, float] = defaultdict(float)
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
        _, seen = watched_run(argv, env)
        wall += time.perf_counter() - wall0
        cpu += perf_seconds(perf_out) if perf_out else children_cpu() - cpu0
        for kind, seconds in by_process(seen).items():
            split[kind] += seconds
        for folder in folders:
            if (folder / "report.json").exists():
                reports.append(json.loads((folder / "report.json").read_text(encoding="utf-8")))
    return wall, cpu, reports, dict(split)


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
        wall, cpu, reports, split = run(args.mode, args.n, args.seed, extra, work)
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

    seen_cpu = sum(split.values())
    print(f"\nBy process, as /proc showed them every {WATCH_EVERY_S * 1000:.0f} ms (each one's own CPU as last seen: "
          f"{seen_cpu:.1f} of the {cpu:.1f} CPU seconds; perf's count includes what ran between looks):\n")
    print("| process | core-seconds a student | share |")
    print("|---|---:|---:|")
    for kind, seconds in sorted(split.items(), key=lambda item: -item[1]):
        print(f"| {kind} | {seconds / max(n, 1):.3f} | {seconds / max(seen_cpu, 1e-9):.0%} |")


if __name__ == "__main__":
    main()
