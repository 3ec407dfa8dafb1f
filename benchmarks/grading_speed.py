#!/usr/bin/env python3
"""How fast ``grade`` is on this machine, against the floor and (with ``--otter``) otter-grader.

Every measurement is a whole command, timed from outside, side by side in one run:
the rounds alternate between the commands, and each figure is the median of
``--runs`` rounds (min–max beside it). Printed for each, its ratio to the floor (a
bare Python process that imports JAX and compiles one function):

* ``grade solutions/ch4`` (all eight exercises), ``-k ex02``, ``-k ex01 -k ex02 -k ex03``;
* ``grade exercises/ch4`` (the stubs);
* the first grading of a submission (cold: an empty cache) and a second one of the same,
  unchanged submission (with a fresh seed, and as a replay of the same seed);
* with ``--otter``: ``otter run`` on ``../shared/anchors/otter`` (an otter-grader
  assignment equivalent to ex01–ex03), when otter-grader is installed (``--otter-bin``).

    python benchmarks/grading_speed.py --runs 5 [--otter [--otter-bin PATH]] [--sandbox process]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OTTER = ROOT.parent / "shared" / "anchors" / "otter"
FLOOR = "import jax, jax.numpy as jnp; jax.jit(lambda x: x + 1)(jnp.ones(3)).block_until_ready()"


def _grade(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from grader.cli import main; sys.exit(main())", *args]


def _timed(argv: list[str], *, env: dict, cwd: Path | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[-6:])} failed ({done.returncode}): {done.stderr[-500:]}")
    return took


def _versions(python: str) -> str:
    """The versions that decide the cost of importing JAX, in the environment of ``python``."""
    code = ("from importlib import metadata as m\n"
            "print(' '.join(f'{p} {m.version(p)}' for p in ('jax', 'jaxlib', 'ml_dtypes', 'numpy')))")
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or f"unknown ({done.stderr.strip()[-200:]})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sandbox", default="auto", choices=["auto", "bwrap", "process"])
    parser.add_argument("--otter", action="store_true", help="also time otter-grader's `otter run`")
    parser.add_argument("--otter-bin", default=shutil.which("otter") or "otter")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="grade-bench-"))
    warm_cache = work / "cache-warm"
    report = ["--report-dir", str(work / "report"), "--sandbox", args.sandbox]
    commands: dict[str, tuple[list[str], str]] = {
        "floor: python, import jax, compile one function": ([sys.executable, "-c", FLOOR], "none"),
        "grade solutions/ch4 (all)": (_grade(str(ROOT / "solutions/ch4"), *report), "warm"),
        "grade solutions/ch4 -k ex02": (_grade(str(ROOT / "solutions/ch4"), "-k", "2", *report), "warm"),
        "grade solutions/ch4 -k ex01 -k ex02 -k ex03":
            (_grade(str(ROOT / "solutions/ch4"), "-k", "1", "-k", "2", "-k", "3", *report), "warm"),
        "grade exercises/ch4 (the stubs)": (_grade(str(ROOT / "exercises/ch4"), *report), "warm"),
        "first grading of a submission (empty cache)": (_grade(str(ROOT / "solutions/ch4"), *report), "cold"),
        "second grading, unchanged, fresh seed": (_grade(str(ROOT / "solutions/ch4"), *report), "warm"),
        "second grading, unchanged, same seed": (_grade(str(ROOT / "solutions/ch4"), "--seed", "4242", *report),
                                                 "warm"),
    }
    if args.otter:
        if shutil.which(args.otter_bin) or Path(args.otter_bin).exists():
            for name in ("autograder.zip", "submission.ipynb"):
                shutil.copy(OTTER / name, work / name)
            commands["otter run (ex01-ex03 equivalent)"] = (
                [args.otter_bin, "run", "-a", "autograder.zip", "submission.ipynb"], "none")
        else:
            print(f"otter-grader not found ({args.otter_bin}): install otter-grader[grading]==7.0.0 "
                  "with the grader's jax, jaxlib and ml_dtypes, or pass --otter-bin", file=sys.stderr)
    base = {k: v for k, v in os.environ.items() if k != "GRADER_CACHE_DIR"}
    env = {"none": base, "warm": {**base, "GRADER_CACHE_DIR": str(warm_cache)}}
    # The warm cache starts with one grading of the same seed as "same seed" below.
    _timed(_grade(str(ROOT / "solutions/ch4"), "--seed", "4242", *report), env=env["warm"])
    times: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(args.runs):
        for name, (argv, cache) in commands.items():
            if cache == "cold":
                cold = work / f"cache-cold-{round_}"
                times[name].append(_timed(argv, env={**base, "GRADER_CACHE_DIR": str(cold)}, cwd=work))
                shutil.rmtree(cold, ignore_errors=True)
            else:
                times[name].append(_timed(argv, env=env[cache], cwd=work))
        print(f"round {round_ + 1} of {args.runs} done", file=sys.stderr)

    floor = statistics.median(times[next(iter(commands))])
    width = max(len(name) for name in commands)
    print(f"\n{'command'.ljust(width)}  median (min–max)      × floor")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name.ljust(width)}  {median:5.2f} s ({min(values):.2f}–{max(values):.2f})  {median / floor:5.2f}")
    medians = {name: statistics.median(values) for name, values in times.items()}
    otter = medians.get("otter run (ex01-ex03 equivalent)")
    first = medians["first grading of a submission (empty cache)"]
    print("\nratios measured side by side in this run:")
    print(f"  second grading (fresh seed) / first: {medians['second grading, unchanged, fresh seed'] / first:.2f}")
    print(f"  second grading (same seed) / first:  {medians['second grading, unchanged, same seed'] / first:.2f}")
    if otter:
        print(f"  grade -k ex01 -k ex02 -k ex03 / otter run: "
              f"{medians['grade solutions/ch4 -k ex01 -k ex02 -k ex03'] / otter:.2f}")
        print(f"  grade (all eight) / otter run: {medians['grade solutions/ch4 (all)'] / otter:.2f}")
    print(f"\ngrade's environment: {_versions(sys.executable)}")
    if otter:
        otter_python = Path(args.otter_bin).resolve().parent / "python"
        print(f"otter's environment: {_versions(str(otter_python))} (compare like with like)")
    load = os.getloadavg()
    print(f"\n{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; sandbox {args.sandbox}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
