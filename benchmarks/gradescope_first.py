#!/usr/bin/env python3
"""A first grading inside the Gradescope autograder against a second, as Gradescope runs them.

    python benchmarks/gradescope_first.py [--runs 3]

Builds the autograder (``grade dev gradescope``), unpacks it into a folder laid out as
Gradescope's ``/autograder`` and runs its real ``setup.sh`` there (installing the grader and
building the programs every grading compiles, as Gradescope builds the image), exactly as
``tests/test_gradescope.py`` does (its helpers are used; like it, uv's Python comes from this
machine's Python packed as python-build-standalone packs one). Gradescope grades every
submission in a fresh container of that image, so each *first* grading here starts from the
cache ``setup.sh`` left (restored before it); the *second* grades the same submission again in
the same container (its own programs kept, a fresh seed). Two submissions: the reference
solutions, and a student's own correct work (each exercise a correct alternative of
``tests/variants``: its programs are the student's own). Prints the medians of ``--runs``
rounds of ``run_autograder`` (whole commands, wall seconds), and the ratios. Run by hand (the
machine is shared: compare within one run); ``setup.sh`` takes about two minutes.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import Machine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import test_gradescope as gs  # noqa: E402  (the test's own helpers: build, set up, run as Gradescope does)
from grading_speed import own_work  # noqa: E402


def _run(autograder: dict, files: dict) -> float:
    start = time.perf_counter()
    results, _ = gs._run(autograder, files)
    wall = time.perf_counter() - start
    if results.get("score") is None:
        raise SystemExit(f"run_autograder gave no score: {results.get('output', '')[:300]}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    machine = Machine()
    work = Path(tempfile.mkdtemp(prefix="gradescope-bench-"))
    try:
        bundle = work / "autograder.zip"
        if gs._build(bundle) != 0:
            raise SystemExit("grade dev gradescope failed")
        (work / "python").mkdir()
        listing = gs._python_archive(work / "python")
        started = time.perf_counter()
        autograder = gs._set_up(bundle, work / "autograder", None, listing)
        setup_s = time.perf_counter() - started
        cache = autograder["root"] / "jit-grader-cache"
        built = work / "cache-as-built"
        shutil.copytree(cache, built, symlinks=True)
        own = Path(own_work(work))
        submissions = {"the reference solutions": {p.name: p for p in (ROOT / "solutions" / "ch4").glob("*.py")},
                       "a student's own work": {p.name: p for p in own.glob("*.py")}}
        times: dict[tuple[str, str], list[float]] = {}
        for round_ in range(args.runs):
            for name, files in submissions.items():
                shutil.rmtree(cache)
                shutil.copytree(built, cache, symlinks=True)  # a fresh container of the image
                times.setdefault((name, "first"), []).append(_run(autograder, files))
                times.setdefault((name, "second"), []).append(_run(autograder, files))
            print(f"round {round_ + 1} of {args.runs} done", file=sys.stderr)
        print(f"\nsetup.sh (install and build) took {setup_s:.0f} s\n")
        print("| submission | first grading (a fresh container) | second (same container) | first / second |")
        print("|---|---:|---:|---:|")
        for name in submissions:
            first, second = (statistics.median(times[(name, k)]) for k in ("first", "second"))
            # B023: spread reads this iteration's name and is called in this iteration only
            spread = lambda k: f"{min(times[(name, k)]):.2f}–{max(times[(name, k)]):.2f}"  # noqa: E731, B023
            print(f"| {name} | {first:.2f} s ({spread('first')}) | {second:.2f} s ({spread('second')}) | "
                  f"{first / second:.2f} |")
        print(f"\n{machine.describe()}")
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
