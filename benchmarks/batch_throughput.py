"""Throughput of grade batch: a class of N distinct submissions (correct and mistaken), graded
-j 1, -j 2 and on a local Dask cluster of 2 workers; submissions per minute for each.

    python benchmarks/batch_throughput.py --n 12 [-k 1 ...] [--modes j1,j2,dask2,dask1,dask1-1cpu,j2-unpinned]

Run by hand (the machine is shared and noisy: compare the modes of one run, not
against fixed numbers). The class is made from the reference solutions and the test
suite's variants (``tests/variants``): each student's modules are the solution, a
correct alternative or a mistake, drawn from a seeded generator, and every file is the
student's own (a comment names them), so no two submissions are alike and none is
already graded. Each mode grades the same class with the same seed into a results
folder of its own (``--force``), so every submission is graded each time.

Each mode pays what a new class costs: the reference's outcomes for the seed are
computed again (each mode gets a cache folder of its own holding the programs the
reference compiled before, as a grader used before has them, but none of its outcomes).

Besides the throughput it prints each mode's core-seconds a student (the CPU time of every
process the batch started, from ``perf stat`` where it runs: on a shared machine a steadier
figure than the wall clock), the machine's load average, whether every student's verdicts
(score and each check's status) were the same in every mode (the repeat-grading stability a
faster batch must keep) and the same as grading that student alone with ``grade`` and the
batch's seed (each student once more, one after another; ``--no-single`` skips it), and,
for each mode, the speed-ups ex06 measured (the median over the class of the student's
and the reference's, with the spread):
``j2-unpinned`` runs -j 2 without core slots (``GRADER_NO_PIN=1``) for comparison.
A mode ending in ``-1cpu`` runs the whole batch (the command, its workers and every
grading) on one CPU of this machine (``sched_setaffinity`` before it starts, which the
grader's core slots take as the machine's cores): ``dask1-1cpu`` against ``dask2`` is
one worker with one core against two workers with one core each, how a cluster grows.
Prints Markdown tables, for the closing notes.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import TARGETS_FLOOR_S, Machine, in_floors  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grader.authoring.variants import module_text  # noqa: E402 - the checkout's grader, as the path above says

SOLUTIONS = ROOT / "solutions" / "ch4"
VARIANTS = ROOT / "tests" / "variants" / "ch4"
MODES = {
    "j1": ["-j", "1"],
    "j2": ["-j", "2"],
    "dask1": ["--executor", "dask", "-j", "1"],
    "dask2": ["--executor", "dask", "-j", "2"],
    "j2-unpinned": ["-j", "2"],
    "j1-1cpu": ["-j", "1"],
    "dask1-1cpu": ["--executor", "dask", "-j", "1"],
}


def make_class(folder: Path, n: int, seed: int = 0) -> Path:
    """``n`` students: each exercise the solution (about half the time), a correct alternative or a
    mistake from the variants; the first student all solutions."""
    rng = random.Random(seed)
    klass = folder / "class"
    variants = {ex.name: sorted(ex.glob("*.py")) for ex in sorted(VARIANTS.iterdir()) if ex.is_dir()}
    for i in range(n):
        student = klass / f"student{i:03d}"
        student.mkdir(parents=True)
        for solution in sorted(SOLUTIONS.glob("*.py")):
            source = solution
            choices = variants.get(solution.stem, [])
            if i > 0 and choices and rng.random() < 0.5:
                source = rng.choice(choices)
            text = module_text(source, solution)  # a variant written as a patch: spliced into the solution
            (student / solution.name).write_text(f"# {student.name}'s work\n{text}", encoding="utf-8")
    return klass


def fresh_cache(folder: Path) -> Path:
    """A cache root with the reference's compiled programs of this machine's cache, and no outcomes."""
    from grader import store

    reference = store.reference_dir()
    target = folder / store.root().name / "xla" / "reference"
    if reference is not None:
        shutil.copytree(reference, target)
    else:
        target.mkdir(parents=True)
    if (store.root() / "built").is_dir():  # noted as built: a single grade does not build them again
        shutil.copytree(store.root() / "built", folder / store.root().name / "built")
    return folder


def run_mode(mode: str, klass: Path, out: Path, seed: int, extra: list[str]) -> dict:
    env = dict(os.environ)
    env["GRADER_CACHE_DIR"] = str(fresh_cache(out.parent / f"cache-{mode}"))
    if mode.endswith("-unpinned"):
        env["GRADER_NO_PIN"] = "1"
    args = [sys.executable, "-m", "grader", "batch", str(klass), "--chapter", "ch4", "--out", str(out),
            "--seed", str(seed), "--force", "--lang", "en", *MODES[mode], *extra]
    cpus = sorted(os.sched_getaffinity(0))[:1] if mode.endswith("-1cpu") else sorted(os.sched_getaffinity(0))
    args, perf_out = counted(args)
    start, before = time.perf_counter(), _children_cpu()
    proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env,
                          preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    wall = time.perf_counter() - start
    cpu = perf_seconds(perf_out) if perf_out else _children_cpu() - before
    if proc.returncode != 0:
        raise SystemExit(f"{mode}: grade batch failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    with (out / "grades.csv").open(encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["student"] != "(max points)"]
    names = [r["student"] for r in rows]
    return {"mode": mode, "cpus": len(cpus), "wall_s": wall, "cpu_s": cpu, "n": len(rows),
            "per_min": 60 * len(rows) / wall,
            "scores": [float(r["total"]) for r in rows], "statuses": [r["status"] for r in rows],
            "verdicts": {name: _verdicts(out, name) for name in names}, "speedups": _speedups(out, names),
            "messages": {name: _messages(out, name) for name in names}}


def counted(argv: list[str]) -> tuple[list[str], Path | None]:
    """``argv`` under ``perf stat`` where it works (it counts the CPU time of every process started,
    waited for or not: a killed host's jobs too), and the file it writes its count to; else as it is
    (then the kernel's count of waited-for children is used, which misses what a killed process had
    not waited for)."""
    perf = shutil.which("perf")
    if perf is None:
        return argv, None
    out = Path(tempfile.mkstemp(prefix="perf-", suffix=".txt")[1])
    probe = subprocess.run([perf, "stat", "-e", "task-clock", "-x", ",", "-o", str(out), "true"], capture_output=True)
    if probe.returncode != 0:
        return argv, None
    return [perf, "stat", "-e", "task-clock", "-x", ",", "-o", str(out), "--", *argv], out


def perf_seconds(out: Path) -> float:
    """The task-clock ``perf stat -x ,`` wrote (milliseconds), in seconds."""
    for line in out.read_text().splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("task-clock"):
            out.unlink(missing_ok=True)
            return float(fields[0]) / 1000
    raise ValueError(f"no task-clock in {out}")


def single_gradings(klass: Path, out: Path, seed: int, extra: list[str]) -> dict:
    """Each student graded alone with ``grade`` (the student's one command), with the batch's seed: the
    verdicts a batch must give, and the core-seconds each took (the whole process tree's)."""
    env = dict(os.environ)
    env["GRADER_CACHE_DIR"] = str(fresh_cache(out.parent / "cache-single"))
    verdicts, messages, cpu = {}, {}, []
    start = time.perf_counter()
    for student in sorted(p for p in klass.iterdir() if p.is_dir()):
        argv, perf_out = counted([sys.executable, "-m", "grader", str(student), "--chapter", "ch4", "--seed",
                                  str(seed), "--lang", "en", "--report-dir", str(out / student.name), *extra])
        before = _children_cpu()
        subprocess.run(argv, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cpu.append(perf_seconds(perf_out) if perf_out else _children_cpu() - before)
        verdicts[student.name] = _verdicts(out, student.name)
        messages[student.name] = _messages(out, student.name)
    return {"mode": "grade, one by one", "verdicts": verdicts, "messages": messages,
            "wall_s": time.perf_counter() - start, "cpu_s": cpu}


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _report(out: Path, name: str) -> dict | None:
    found = next((p for p in (out / name / "report.json", out / name / "report.partial.json") if p.exists()), None)
    return json.loads(found.read_text(encoding="utf-8")) if found else None


def _verdicts(out: Path, name: str) -> tuple:
    """A student's verdicts: the score and every check's status, in order."""
    report = _report(out, name)
    if report is None:
        return ()
    return (report["score"],) + tuple((c["id"], c["status"]) for ex in report["exercises"] for c in ex["checks"])


def _messages(out: Path, name: str) -> dict[str, str]:
    """What each of a student's checks said (to show why a verdict changed between modes)."""
    report = _report(out, name)
    return {c["id"]: c["message"] for ex in (report or {}).get("exercises", []) for c in ex["checks"]}


def _speedups(out: Path, names: list[str]) -> dict[str, dict[str, list[float]]]:
    """ex06's measured speed-ups, per check, the student's and the reference's, over the class."""
    found: dict[str, dict[str, list[float]]] = {}
    for name in names:
        report = _report(out, name)
        for ex in (report or {}).get("exercises", []):
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


def _differences(results: list[dict]) -> list[str]:
    """Students whose verdicts differ between modes."""
    first = results[0]
    out = []
    for other in results[1:]:
        for name, verdict in first["verdicts"].items():
            if other["verdicts"].get(name) != verdict:
                mine, theirs = dict(verdict[1:]), dict(other["verdicts"].get(name, ())[1:])
                changed = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
                out.append(f"{name}: {first['mode']} {verdict[:1]} vs {other['mode']} "
                           f"{other['verdicts'].get(name, ())[:1]}: {', '.join(changed)}")
                for check in changed:
                    for result in (first, other):
                        out.append(f"    {result['mode']}: {check}: {result['messages'].get(name, {}).get(check)}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=12, help="students in the class")
    parser.add_argument("--modes", default="j1,j2,dask2", help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("-k", "--exercise", action="append", default=[], help="grade only these exercises")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-single", action="store_true",
                        help="do not grade each student alone with grade (the verdicts every mode must give)")
    args = parser.parse_args()
    extra = [item for k in args.exercise for item in ("-k", k)]
    machine = Machine(floor=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="batch-bench-") as tmp:
        klass = make_class(Path(tmp), args.n)
        for mode in args.modes.split(","):
            result = run_mode(mode, klass, Path(tmp) / f"out-{mode}", args.seed, extra)
            results.append(result)
            print(f"{mode}: {result['n']} submissions in {result['wall_s']:.0f} s = {result['per_min']:.2f} per "
                  f"minute; scores {min(result['scores']):g}–{max(result['scores']):g}; load "
                  f"{os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
        single = None if args.no_single else single_gradings(klass, Path(tmp) / "out-single", args.seed, extra)
        shutil.rmtree(klass, ignore_errors=True)
    print(f"\nN = {args.n} distinct submissions\n{machine.describe()}\n")
    floor = machine.floor
    print("| mode | CPUs | wall (s) | submissions / min | wall a student, in floors | core-seconds a student | scores "
          "| not completed |")
    print("|---|---:|---:|---:|---:|---:|---|---:|")
    for r in results:
        print(f"| {r['mode']} | {r['cpus']} | {r['wall_s']:.0f} | {r['per_min']:.2f} | "
              f"{in_floors(r['wall_s'] / r['n'], floor)} | {r['cpu_s'] / r['n']:.2f} | "
              f"{min(r['scores']):g}–{max(r['scores']):g} | {sum(s != 'completed' for s in r['statuses'])} |")
    if floor:
        print(f"\n(a student's wall time in floors is this machine's speed taken out: at the {TARGETS_FLOOR_S} s floor "
              f"where the targets were set, a mode costing F floors a student would grade 60 / ({TARGETS_FLOOR_S} F) "
              "a minute, if every part of a grading scaled with the floor; projected, not measured)")
    differences = _differences(results)
    print(f"\nevery student's verdicts the same in every mode: {'yes' if not differences else 'no'}")
    for line in differences:
        print(f"- {line}")
    if single is not None:
        alone = _differences([single, *results])
        print(f"every student's verdicts the same as a single `grade` of that submission with seed {args.seed}: "
              f"{'yes' if not alone else 'no'} ({len(single['verdicts'])} gradings, "
              f"{statistics.median(single['cpu_s']):.2f} core-seconds each (median))")
        for line in alone:
            print(f"- {line}")
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
