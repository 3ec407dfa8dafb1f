#!/usr/bin/env python3
"""Grade the solutions and a few mistakes on this machine's JAX device; print a compact summary.

Run by ``scripts/gpu_check.sh`` (which chooses the Python and JAX to use); it works the same
on a CPU. It prints the device (backend, device kind, versions), each exercise's score, the
speed-ups of ex06 (the student's against the reference's, and the bar), ex05's timings of a
real jitted function against the grader's own, and for each mistake (a variant of
``tests/variants``) the checks it failed against those its header declares.

    python scripts/gpu_check.py [--seed N] [--dry-run] [--out DIR]

``--dry-run`` prints the plan (the submissions and what each must fail) and grades nothing.
``--out DIR`` (default: ``$OUT`` when set) keeps the JSON reports there. Exit status: 0 when
the solutions get full marks and every mistake fails exactly its declared checks, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "ch4"
VARIANTS = ROOT / "tests" / "variants" / "ch4"

#: mistakes whose verdict depends on the device, graded in two rounds (one variant per exercise
#: and round): asynchronous dispatch (no_block, blocks_first_output), host callbacks and the
#: jitted forms timed against eager code (ex06), compile counts, a float16 reduction, AOT compile
ROUNDS = [
    {"ex01_jit_forms": "jit_disabled", "ex04_cache_keys": "device_padding", "ex05_timing": "no_block",
     "ex06_speedup": "fast_heavy_callback", "ex07_pitfalls": "mean_abs_float16",
     "ex08_aot_debug": "lower_without_compile"},
    {"ex02_where": "static_max_norm", "ex05_timing": "blocks_first_output", "ex06_speedup": "layer_norm_callback"},
]


def expected(exercise: str, name: str) -> tuple[set[str], set[str]]:
    """The checks a variant's header says it fails, and those it says are skipped."""
    text = (VARIANTS / exercise / f"{name}.py").read_text(encoding="utf-8")

    def header(key: str) -> set[str]:
        found = re.search(rf"^# {key}:(.*)$", text, re.M)
        return {part.strip() for part in found.group(1).split(",") if part.strip()} if found else set()

    return header("expect-failed"), header("expect-skipped")


#: options added to every grading (``--sandbox process`` once bubblewrap is seen to hide the GPU)
GRADER_OPTIONS: list[str] = []


def grade(folder: Path, seed: int, exercises: list[str], report_dir: Path) -> tuple[dict | None, float, str]:
    """One grading through the command line; the JSON report, the seconds it took, and its error output."""
    command = [sys.executable, "-m", "grader", str(folder), "--json", "--seed", str(seed), "--lang", "en",
               "--report-dir", str(report_dir), *GRADER_OPTIONS]
    for ex in exercises:
        command += ["-k", ex]
    began = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=280)
    took = time.monotonic() - began
    try:
        return json.loads(done.stdout), took, done.stderr
    except json.JSONDecodeError:
        return None, took, (done.stderr or done.stdout)[-2000:]


def submission(base: Path, replacements: dict[str, str]) -> Path:
    folder = base / "ch4"
    folder.mkdir(parents=True)
    for file in SOLUTIONS.glob("*.py"):
        shutil.copy(file, folder / file.name)
    for exercise, name in replacements.items():
        shutil.copy(VARIANTS / exercise / f"{name}.py", folder / f"{exercise}.py")
    return folder


def device_line(report: dict) -> str:
    env = report.get("environment", {})
    sandbox = report.get("sandbox", {}).get("kind", "?")
    return (f"device: {env.get('backend', '?')} · {env.get('device_kind', '?')} x {env.get('device_count', '?')} · "
            f"jax {env.get('jax', '?')} / jaxlib {env.get('jaxlib', '?')} · python {env.get('python', '?')} · "
            f"{env.get('cpu_count', '?')} CPUs · sandbox {sandbox}")


def speedup_lines(ex: dict) -> list[str]:
    lines = []
    for check in ex["checks"]:
        m = check.get("measured") or {}
        student, reference = m.get("student") or {}, m.get("reference") or {}
        if not check["id"].endswith(".speedup") or "speedup" not in student:
            continue
        line = f"  {check['id']:<20} {check['status']:<7} {student['speedup']:.3g}x"
        if reference.get("speedup"):
            line += f" vs reference {reference['speedup']:.3g}x"
        if m.get("bar"):
            line += f" (bar {m['bar']:.3g}x)"
        line += (f"; per call {student.get('candidate_s', 0) * 1e3:.3g} ms"
                 + (f" vs {reference['candidate_s'] * 1e3:.3g} ms" if reference.get("candidate_s") else "")
                 + f", eager {student.get('baseline_s', 0) * 1e3:.3g} ms")
        lines.append(line)
    return lines


def harness_lines(ex: dict) -> list[str]:
    check = next((c for c in ex["checks"] if c["id"] == "time_call.jax_async"), None)
    m = (check or {}).get("measured") or {}
    if "grader_s" not in m:
        return []
    return [f"  time_call.jax_async  {check['status']:<7} harness {m['returned_s'] * 1e3:.3g} ms vs the grader's "
            f"{m['grader_s'] * 1e3:.3g} ms ({m['ratio']:.2f}x; {m.get('rounds')} rounds of a 128x128 matrix product)"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20260)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--expect-gpu", action="store_true", help="a GPU was found: the exercises must run on it")
    parser.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    args = parser.parse_args()

    plan = [(f"round {i + 1}", replacements) for i, replacements in enumerate(ROUNDS)]
    print(f"plan: the solutions (every exercise), then {len(plan)} rounds of mistakes, seed {args.seed}")
    for label, replacements in plan:
        for exercise, name in replacements.items():
            failed, skipped = expected(exercise, name)
            print(f"  {label}: {exercise}/{name} must fail {', '.join(sorted(failed))}"
                  + (f" (skipping {', '.join(sorted(skipped))})" if skipped else ""))
    if args.dry_run:
        print("dry run: nothing graded")
        return 0

    ok = True
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        scratch = Path(tmp)
        report, took, errors = grade(SOLUTIONS, args.seed, [], scratch / "solutions-report")
        if report is None:
            print(f"solutions: NO REPORT after {took:.1f} s\n{errors}")
            return 1
        print(device_line(report))
        backend = report.get("environment", {}).get("backend")
        if args.expect_gpu and backend != "gpu":
            ok = False
            sandbox = report.get("sandbox", {}).get("kind")
            print(f"WARNING: a GPU was found, but the exercises' processes ran on {backend} (sandbox {sandbox})")
            if sandbox != "bwrap":
                print("         as root each exercise's process runs under a uid of its own: can it open /dev/nvidia*?")
            if sandbox == "bwrap":  # bubblewrap's --dev /dev holds no /dev/nvidia*: grade unsandboxed to see the GPU
                print("         bubblewrap's own /dev hides the GPU from them: grading again with --sandbox process")
                GRADER_OPTIONS.extend(["--sandbox", "process"])
                report, took, errors = grade(SOLUTIONS, args.seed, [], scratch / "solutions-process-report")
                if report is None:
                    print(f"solutions: NO REPORT after {took:.1f} s\n{errors}")
                    return 1
                print(device_line(report))
        _keep(args.out, "solutions.json", report)
        full = report["score"] == report["max_score"]
        ok &= full
        print(f"solutions: {report['score']:g}/{report['max_score']:g} in {took:.1f} s"
              + ("" if full else "  <-- NOT FULL MARKS"))
        for ex in report["exercises"]:
            bad = [f"{c['id']} {c['status']}: {(c.get('message') or '')[:160]}" for c in ex["checks"]
                   if c["status"] != "passed"]
            print(f"  {ex['id']:<18} {ex['score']:g}/{ex['max_score']:g}  {ex.get('duration_s', 0):.1f} s"
                  + "".join(f"\n      {line}" for line in bad))
        by_id = {ex["id"]: ex for ex in report["exercises"]}
        print("ex06 speed-ups (the solution's against the reference's, measured in the same run):")
        print("\n".join(speedup_lines(by_id.get("ex06_speedup", {"checks": []})) or ["  (none measured)"]))
        print("ex05 on a real jitted function:")
        print("\n".join(harness_lines(by_id.get("ex05_timing", {"checks": []})) or ["  (not measured)"]))

        print("mistakes (the checks each must fail -> what it got):")
        for i, (label, replacements) in enumerate(plan):
            folder = submission(scratch / f"round{i + 1}", replacements)
            report, took, errors = grade(folder, args.seed, sorted(replacements), scratch / f"round{i + 1}-report")
            if report is None:
                print(f"  {label}: NO REPORT after {took:.1f} s\n{errors}")
                ok = False
                continue
            _keep(args.out, f"round{i + 1}.json", report)
            for exercise, name in replacements.items():
                ex = next(e for e in report["exercises"] if e["id"] == exercise)
                failed = {c["id"] for c in ex["checks"] if c["status"] == "failed"}
                skipped = {c["id"] for c in ex["checks"] if c["status"] == "skipped"}
                other = sorted(f"{c['id']} {c['status']}" for c in ex["checks"]
                               if c["status"] not in ("passed", "failed", "skipped"))
                want_failed, want_skipped = expected(exercise, name)
                right = failed == want_failed and skipped == want_skipped and not other
                ok &= right
                extra = "" if right else (f"  <-- UNEXPECTED: failed {sorted(failed)}, skipped {sorted(skipped)}"
                                          + (f", {other}" if other else ""))
                print(f"  {exercise + '/' + name:<38} {', '.join(sorted(want_failed)):<26} "
                      f"{'as declared' if right else 'DIFFERENT'}{extra}")
                for line in speedup_lines(ex):
                    print("    " + line.strip())
            print(f"  ({label}: {took:.1f} s)")
    print("verdict: " + ("solutions full marks; every mistake failed exactly its declared checks" if ok
                         else "NOT AS EXPECTED (see above)"))
    return 0 if ok else 1


def _keep(out: Path | None, name: str, report: dict) -> None:
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
