"""Grade submissions several times in a row; report times, scores and speed-ups.

    python benchmarks/repeat_grading.py --runs 8 --load 2 -k ex05 -k ex06 \
        --variant ex06_speedup/alt_rsqrt --variant ex06_speedup/layer_norm_callback

By default it grades the reference and the stubs; each ``--variant EXERCISE/NAME`` adds
the reference with that exercise replaced by ``tests/variants/ch4/EXERCISE/NAME.py``
(a correct alternative, or a realistic mistake). Run by hand (the machine is shared
and noisy: compare medians within one run, not against fixed numbers). With
``--load N`` it keeps N busy processes running in the background, to show that the
score of a submission does not change on a loaded machine. Prints a Markdown table,
for the closing notes, and says whether every submission kept one score.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import shutil
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from machine import Machine  # noqa: E402


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


def variant_submission(spec: str, folder: Path) -> Path:
    """The reference solutions with one exercise replaced by the variant ``EXERCISE/NAME``."""
    exercise, _, name = spec.partition("/")
    source = ROOT / "tests" / "variants" / "ch4" / exercise / f"{name}.py"
    if not source.is_file():
        raise SystemExit(f"no variant {spec!r}: expected {source.relative_to(ROOT)}")
    target = folder / spec.replace("/", "-") / "ch4"
    shutil.copytree(ROOT / "solutions" / "ch4", target)
    sys.path.insert(0, str(ROOT))  # this checkout's grader
    from grader.authoring.variants import module_text  # a variant written as a patch: spliced into the solution

    (target / f"{exercise}.py").write_text(module_text(source, ROOT / "solutions" / "ch4" / f"{exercise}.py"),
                                           encoding="utf-8")
    return target


def speedups(report: dict) -> dict[str, tuple[float, float]]:
    out = {}
    for ex in report["exercises"]:
        for check in ex["checks"]:
            m = check.get("measured", {})
            if check["category"] == "speedup":
                if "student" in m:
                    out[check["id"]] = (m["student"]["speedup"], m["reference"]["speedup"], check["status"])
                else:
                    out[check["id"]] = (float("nan"), float("nan"), check["status"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--load", type=int, default=0, help="busy background processes while grading")
    parser.add_argument("--sandbox", default="auto")
    parser.add_argument("-k", "--exercise", action="append", default=[], help="grade only these exercises")
    parser.add_argument("--variant", action="append", default=[], metavar="EXERCISE/NAME",
                        help="also grade the reference with this variant in place of its exercise")
    args = parser.parse_args()
    machine = Machine()  # before the background load starts
    scratch = Path(tempfile.mkdtemp(prefix="repeat-grading-"))
    submissions = [("solutions/ch4", ROOT / "solutions" / "ch4"), ("exercises/ch4", ROOT / "exercises" / "ch4")]
    submissions += [(spec, variant_submission(spec, scratch)) for spec in args.variant]
    extra = ["--sandbox", args.sandbox, *(f"-k{ex}" for ex in args.exercise)]
    hogs = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.load)]
    for hog in hogs:
        hog.start()
    try:
        rows = []
        for run in range(args.runs):  # the submissions take turns: a slow patch hits them all
            for label, path in submissions:
                wall, report = grade(path, extra)
                rows.append((label, run + 1, wall, report))
    finally:
        for hog in hogs:
            hog.terminate()
        shutil.rmtree(scratch, ignore_errors=True)
    print("| submission | run | wall s | score | ex06 speed-ups (student / reference) | sandbox |")
    print("|---|---:|---:|---:|---|---|")
    for label, run, wall, report in rows:
        sp = "; ".join(f"{k}: {s:.1f}× / {r:.1f}× ({st})" for k, (s, r, st) in speedups(report).items()) or "-"
        sandbox = report["sandbox"]["kind"] + ("+uid" if report["sandbox"].get("uid_isolation") else "")
        print(f"| {label} | {run} | {wall:.1f} | {report['score']:g}/{report['max_score']:g} | {sp} | {sandbox} |")
    stable = True
    for label, _ in submissions:
        walls = [w for l, _, w, _ in rows if l == label]
        scores = {r["score"] for l, _, _, r in rows if l == label}
        verdicts = {tuple((check, status) for check, (_, _, status) in sorted(speedups(r).items()))
                    for l, _, _, r in rows if l == label}
        stable = stable and len(scores) == 1 and len(verdicts) <= 1
        print(f"\n{label}: median wall {statistics.median(walls):.1f} s (min {min(walls):.1f}, max {max(walls):.1f}); "
              f"scores {sorted(scores)}")
        if len(verdicts) > 1 or len(scores) > 1:  # what the runs that differ from the first said
            first = {(c["id"], c["status"]) for e in rows[[l for l, *_ in rows].index(label)][3]["exercises"]
                     for c in e["checks"]}
            for l, run, _, r in rows:
                if l != label:
                    continue
                for e in r["exercises"]:
                    for c in e["checks"]:
                        if (c["id"], c["status"]) not in first:
                            print(f"  run {run}: {e['id']} {c['id']} {c['status']}: {str(c.get('message'))[:400]}")
    print(f"\nevery submission kept one score and one speed-up verdict: {'yes' if stable else 'NO'}")
    print(f"\n{machine.describe()}\nbackground load {args.load} processes (after: theirs too), "
          f"{rows[0][3]['environment']['backend']} / JAX {rows[0][3]['environment']['jax']}")


if __name__ == "__main__":
    main()
