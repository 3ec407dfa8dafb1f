#!/usr/bin/env python3
"""Grade the solutions, the stubs and every mistake whose verdict depends on the device, on this
machine's accelerator (a TPU or a GPU; the CPU where there is none); print a compact summary.

Run by ``scripts/device_check.sh`` (which chooses the Python and the JAX to use, from a folder of
wheels where there is no package index); it works the same on a CPU. For each grading it prints
the device each exercise ran on and the time it took, each check that did not pass, ex06's
speed-ups (the solution's against the reference's, and the bar) and ex05's harness on a real
jitted function; for each mistake (a variant of ``tests/variants``) the checks it failed against
those its header declares.

    python scripts/device_check.py [--seed N] [--dry-run] [--out DIR] [--expect tpu|gpu|cpu]
                                   [--only solutions,stubs,variants,held,cpu]

Parts (all by default): ``solutions`` (the whole chapter, full marks), ``stubs`` (0, every exercise
not attempted), ``variants`` (every variant of the exercises whose checks measure the device,
``device = true``, in rounds of one per exercise), ``held`` (another process holds the accelerator:
the grading falls back to the CPU, says so in one line naming that process, full marks), ``cpu``
(``JAX_PLATFORMS=cpu``: full marks on the CPU). ``--out DIR`` (default: ``$OUT`` when set) keeps
the JSON reports there. Exit status: 0 when every part is as expected, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "ch4"
STUBS = ROOT / "exercises" / "ch4"
VARIANTS = ROOT / "tests" / "variants" / "ch4"
PARTS = ("solutions", "stubs", "variants", "held", "cpu")
#: the most seconds one grading may take (the issue's bar for the solutions on one TPU v5e chip)
SOLUTIONS_BAR_S = 60.0


def expected(exercise: str, name: str) -> tuple[set[str], set[str]]:
    """The checks a variant's header says it fails, and those it says are skipped."""
    text = (VARIANTS / exercise / f"{name}.py").read_text(encoding="utf-8")

    def header(key: str) -> set[str]:
        found = re.search(rf"^# {key}:(.*)$", text, re.M)
        return {part.strip() for part in found.group(1).split(",") if part.strip()} if found else set()

    return header("expect-failed"), header("expect-skipped")


def device_exercises() -> list[str]:
    """The chapter's exercises whose checks measure the device (``device = true``)."""
    sys.path.insert(0, str(ROOT))
    from grader.chapter import load_chapter

    return [ex.id for ex in load_chapter("ch4").exercises if ex.device]


def rounds(exercises: list[str]) -> list[dict[str, str]]:
    """Every variant of ``exercises``, one per exercise in each round."""
    names = {ex: sorted(p.stem for p in (VARIANTS / ex).glob("*.py")) for ex in exercises}
    return [{ex: names[ex][i] for ex in exercises if i < len(names[ex])}
            for i in range(max((len(v) for v in names.values()), default=0))]


def grade(folder: Path, seed: int | None, exercises: list[str], report_dir: Path,
          env: dict | None = None) -> tuple[dict | None, float, str]:
    """One grading through the command line; the JSON report, the seconds it took, and its error output."""
    command = [sys.executable, "-m", "grader", str(folder), "--json", "--lang", "en", "--report-dir", str(report_dir)]
    command += ["--seed", str(seed)] if seed is not None else []
    for ex in exercises:
        command += ["-k", ex]
    began = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=400,
                          env={**os.environ, **(env or {})})
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
        sys.path.insert(0, str(ROOT))
        from grader.authoring.variants import module_text  # a variant written as a patch: spliced into the solution

        (folder / f"{exercise}.py").write_text(module_text(VARIANTS / exercise / f"{name}.py",
                                                           SOLUTIONS / f"{exercise}.py"), encoding="utf-8")
    return folder


def device_line(report: dict) -> str:
    env = report.get("environment", {})
    sandbox = report.get("sandbox", {})
    device = report.get("device") or {}
    return (f"device: {env.get('backend', '?')} · {env.get('device_kind', '?')} x {env.get('device_count', '?')} · "
            f"jax {env.get('jax', '?')} / jaxlib {env.get('jaxlib', '?')} · python {env.get('python', '?')} · "
            f"{env.get('cpu_count', '?')} CPUs · sandbox {sandbox.get('kind', '?')}"
            f"{'+uid' if sandbox.get('uid_isolation') else ''} · planned {device.get('platform', '?')}"
            f" ({device.get('accelerator') or 'no accelerator'})")


def where(ex: dict) -> str:
    device = ex.get("device") or {}
    return f"{device.get('backend', '-')}" + (f" ({device['device_kind']})" if device.get("device_kind")
                                              and device.get("device_kind") != device.get("backend") else "")


def exercise_lines(report: dict, *, every_check: bool = False) -> list[str]:
    """Each exercise: score, the device it ran on, its time; its checks (all, or those not passed)."""
    lines = []
    for ex in report["exercises"]:
        lines.append(f"  {ex['id']:<18} {ex['score']:g}/{ex['max_score']:g}  {where(ex):<20} "
                     f"{ex.get('duration_s', 0):5.1f} s")
        for c in ex["checks"]:
            if every_check or c["status"] != "passed":
                lines.append(f"      {c['id']:<32} {c['status']:<13} on {where(ex)}"
                             + ("" if c["status"] == "passed" else f": {(c.get('message') or '')[:150]}"))
    return lines


def speedup_lines(ex: dict) -> list[str]:
    lines = []
    for check in ex["checks"]:
        m = check.get("measured") or {}
        student, reference = m.get("student") or {}, m.get("reference") or {}
        if not check["id"].endswith(".speedup") or "speedup" not in student or student["speedup"] is None:
            continue
        line = f"  {check['id']:<20} {check['status']:<7} {student['speedup']:.3g}x"
        if reference.get("speedup"):
            line += f" vs reference {reference['speedup']:.3g}x"
        if m.get("bar"):
            line += f" (bar {m['bar']:.3g}x)"
        line += (f"; per call {student.get('candidate_s', 0) * 1e3:.3g} ms"
                 + (f" vs {reference['candidate_s'] * 1e3:.3g} ms" if reference.get("candidate_s") else "")
                 + f", eager {student.get('baseline_s', 0) * 1e3:.3g} ms; case {m.get('case')}, "
                 + f"{(m.get('method') or {}).get('sides', '?')}")
        lines.append(line)
    return lines


def harness_lines(ex: dict) -> list[str]:
    check = next((c for c in ex["checks"] if c["id"] == "time_call.jax_async"), None)
    m = (check or {}).get("measured") or {}
    if "grader_s" not in m:
        return []
    return [f"  time_call.jax_async  {check['status']:<7} harness {m['returned_s'] * 1e3:.3g} ms vs the grader's "
            f"{m['grader_s'] * 1e3:.3g} ms ({m['ratio']:.2f}x; {m.get('rounds')} rounds of a 128x128 matrix product)"]


class Check:
    """The parts' verdicts, printed as they come."""

    def __init__(self, out: Path | None, expect: str | None):
        self.out, self.expect, self.ok = out, expect, True

    def keep(self, name: str, report: dict) -> None:
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / name).write_text(json.dumps(report, indent=1), encoding="utf-8")

    def fail(self, line: str) -> None:
        self.ok = False
        print(f"  <-- {line}")

    def measured_on(self, report: dict, exercises: list[str]) -> None:
        """Each of ``exercises`` (the device's) ran on the expected accelerator."""
        if self.expect in (None, "cpu"):
            return
        for ex in report["exercises"]:
            if ex["id"] in exercises and (ex.get("device") or {}).get("backend") not in (self.expect, None):
                self.fail(f"{ex['id']} ran on {where(ex)}, not on the {self.expect}")


def solutions(check: Check, scratch: Path, seed: int | None, on_device: list[str]) -> None:
    report, took, errors = grade(SOLUTIONS, seed, [], scratch / "solutions")
    if report is None:
        return check.fail(f"solutions: NO REPORT after {took:.1f} s\n{errors}")
    print(device_line(report))
    check.keep("solutions.json", report)
    full = report["score"] == report["max_score"]
    print(f"solutions: {report['score']:g}/{report['max_score']:g} in {took:.1f} s (the grading's own "
          f"{report['duration_s']:.1f} s)")
    print("\n".join(exercise_lines(report, every_check=True)))
    if not full:
        check.fail("NOT FULL MARKS")
    if took > SOLUTIONS_BAR_S:
        check.fail(f"over {SOLUTIONS_BAR_S:g} s")
    check.measured_on(report, on_device)
    if (report.get("device") or {}).get("note"):
        print(f"  note: {report['device']['note']}")
    turns = (report.get("timings") or {}).get("device_turns")
    if turns:
        print(f"  the device's turns: {', '.join(t['job'] + ' (waited ' + str(t['waited_s']) + ' s)' for t in turns)}")
    by_id = {ex["id"]: ex for ex in report["exercises"]}
    print("ex06 speed-ups (the solution's against the reference's, measured in the same run):")
    print("\n".join(speedup_lines(by_id.get("ex06_speedup", {"checks": []})) or ["  (none measured)"]))
    print("ex05 on a real jitted function:")
    print("\n".join(harness_lines(by_id.get("ex05_timing", {"checks": []})) or ["  (not measured)"]))


def stubs(check: Check, scratch: Path, seed: int | None) -> None:
    folder = scratch / "stubs" / "ch4"
    shutil.copytree(STUBS, folder, ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    report, took, errors = grade(folder, seed, [], scratch / "stubs-report")
    if report is None:
        return check.fail(f"stubs: NO REPORT after {took:.1f} s\n{errors}")
    check.keep("stubs.json", report)
    statuses = {ex["id"]: ex["status"] for ex in report["exercises"]}
    print(f"stubs: {report['score']:g}/{report['max_score']:g} in {took:.1f} s; "
          + ", ".join(f"{k} {v}" for k, v in statuses.items()))
    if report["score"] != 0 or set(statuses.values()) != {"not_attempted"}:
        check.fail("the stubs must score 0 with every exercise not attempted")


def variants(check: Check, scratch: Path, seed: int | None, on_device: list[str]) -> None:
    plan = rounds(on_device)
    print(f"mistakes ({sum(len(r) for r in plan)} variants of {', '.join(on_device)}, in {len(plan)} rounds; "
          f"the checks each must fail -> what it got):")
    for i, replacements in enumerate(plan):
        folder = submission(scratch / f"round{i + 1}", replacements)
        report, took, errors = grade(folder, seed, sorted(replacements), scratch / f"round{i + 1}-report")
        if report is None:
            check.fail(f"round {i + 1}: NO REPORT after {took:.1f} s\n{errors}")
            continue
        check.keep(f"round{i + 1}.json", report)
        check.measured_on(report, on_device)
        for exercise, name in replacements.items():
            ex = next(e for e in report["exercises"] if e["id"] == exercise)
            failed = {c["id"] for c in ex["checks"] if c["status"] == "failed"}
            skipped = {c["id"] for c in ex["checks"] if c["status"] == "skipped"}
            other = sorted(f"{c['id']} {c['status']}" for c in ex["checks"]
                           if c["status"] not in ("passed", "failed", "skipped"))
            want_failed, want_skipped = expected(exercise, name)
            right = failed == want_failed and skipped == want_skipped and not other
            print(f"  {exercise + '/' + name:<38} {', '.join(sorted(want_failed)) or '(none)':<32} "
                  f"{'as declared' if right else 'DIFFERENT'} on {where(ex)}, {ex.get('duration_s', 0):.1f} s")
            if not right:
                check.fail(f"failed {sorted(failed)}, skipped {sorted(skipped)}" + (f", {other}" if other else "")
                           + "".join(f"\n      {c['id']}: {(c.get('message') or '')[:200]}" for c in ex["checks"]
                                     if c["status"] != "passed"))
            for line in speedup_lines(ex):
                print("    " + line.strip())
        print(f"  (round {i + 1}: {took:.1f} s)")


HOLDER = """
import os, sys, time
import jax
jax.devices()
print("holding", jax.devices()[0].device_kind, flush=True)
time.sleep(float(sys.argv[1]))
"""


def held(check: Check, scratch: Path, seed: int | None) -> None:
    """Another process holds the accelerator: the grading falls back to the CPU, names it, full marks."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "300"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, start_new_session=True)
    try:
        said = holder.stdout.readline().strip()
        print(f"held: a process of ours (pid {holder.pid}) holds the device: {said or 'it said nothing'}")
        report, took, errors = grade(SOLUTIONS, seed, [], scratch / "held")
        if report is None:
            return check.fail(f"held: NO REPORT after {took:.1f} s\n{errors}")
        check.keep("held.json", report)
        note = (report.get("device") or {}).get("note") or ""
        print(f"held: {report['score']:g}/{report['max_score']:g} in {took:.1f} s on "
              f"{report['environment'].get('backend')}; the line: {note}")
        if report["score"] != report["max_score"]:
            check.fail("NOT FULL MARKS")
        if check.expect not in (None, "cpu", "gpu") and str(holder.pid) not in note:
            check.fail(f"the line does not name the holder's pid {holder.pid}")
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()


def cpu(check: Check, scratch: Path, seed: int | None) -> None:
    report, took, errors = grade(SOLUTIONS, seed, [], scratch / "cpu", env={"JAX_PLATFORMS": "cpu"})
    if report is None:
        return check.fail(f"JAX_PLATFORMS=cpu: NO REPORT after {took:.1f} s\n{errors}")
    check.keep("cpu.json", report)
    backends = {where(ex) for ex in report["exercises"]}
    print(f"JAX_PLATFORMS=cpu: {report['score']:g}/{report['max_score']:g} in {took:.1f} s "
          f"on {', '.join(sorted(backends))}")
    if report["score"] != report["max_score"]:
        check.fail("NOT FULL MARKS")
    if backends != {"cpu"}:
        check.fail("an exercise ran elsewhere than on the CPU")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None, help="the hidden inputs' seed (default: a fresh one each)")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--expect", choices=("tpu", "gpu", "cpu"), default=None,
                        help="the device found: the device's exercises must run on it")
    parser.add_argument("--only", default=",".join(PARTS), help=f"parts to run, of {','.join(PARTS)}")
    parser.add_argument("--variants-of", default="", help="the variants of these exercises only (ids, commas)")
    parser.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    args = parser.parse_args()
    parts = [p for p in args.only.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        print(f"device_check: unknown part(s) {', '.join(unknown)} (known: {', '.join(PARTS)})")
        return 2

    on_device = device_exercises()
    mistakes_of = [ex for ex in on_device if not args.variants_of or ex in args.variants_of.split(",")]
    print(f"plan: {', '.join(parts)}; the device's exercises: {', '.join(on_device)}; "
          f"seed {args.seed if args.seed is not None else 'fresh'}")
    if "variants" in parts:
        for i, replacements in enumerate(rounds(mistakes_of)):
            for exercise, name in replacements.items():
                failed, skipped = expected(exercise, name)
                print(f"  round {i + 1}: {exercise}/{name} must fail {', '.join(sorted(failed)) or 'nothing'}"
                      + (f" (skipping {', '.join(sorted(skipped))})" if skipped else ""))
    if args.dry_run:
        print("dry run: nothing graded")
        return 0
    check = Check(args.out, args.expect)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="device-check-") as tmp:
        scratch = Path(tmp)
        for part in parts:
            t0 = time.monotonic()
            {"solutions": lambda: solutions(check, scratch, args.seed, on_device),
             "stubs": lambda: stubs(check, scratch, args.seed),
             "variants": lambda: variants(check, scratch, args.seed, mistakes_of),
             "held": lambda: held(check, scratch, args.seed),
             "cpu": lambda: cpu(check, scratch, args.seed)}[part]()
            print(f"[{part}: {time.monotonic() - t0:.1f} s]")
    print(f"verdict ({time.monotonic() - began:.0f} s): "
          + ("every part as expected" if check.ok else "NOT AS EXPECTED (see the lines marked <--)"))
    return 0 if check.ok else 1


if __name__ == "__main__":
    sys.exit(main())
