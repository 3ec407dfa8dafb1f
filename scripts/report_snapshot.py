#!/usr/bin/env python3
"""Grade the solutions, the stubs and every test variant with one seed; write what the reports say.

A refactoring of the grader must not change a verdict: run this before and after, then
compare the two files (``--compare OLD NEW``). Timings and durations are left out, and
so is everything measured by the timed exercises (ex05, ex06), whose statuses and
scores are kept; every other check keeps its status, points, message, hint and measured
numbers.

    python scripts/report_snapshot.py --out before.json
    ... change the code ...
    python scripts/report_snapshot.py --out after.json
    python scripts/report_snapshot.py --compare before.json after.json

A change that draws the hidden inputs differently (same seed, other values) changes
measured numbers and the messages that quote them, not verdicts: compare it with
``--verdicts-only`` (each exercise's status and score, each check's status, points and
hint).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

VOLATILE = ("duration_s", "started_at", "timings", "environment", "sandbox", "submission")


#: checks whose numbers are timings: only their verdicts are compared
TIMED_CATEGORIES = ("harness", "speedup")


def _normal(report: dict, timed: set[str]) -> dict:
    out = {k: v for k, v in report.items() if k not in VOLATILE}
    out["exercises"] = [_exercise(ex, timed) for ex in report["exercises"]]
    return out


def _exercise(ex: dict, timed: set[str]) -> dict:
    ex = {k: v for k, v in ex.items() if k not in ("duration_s", "output")}
    if ex["id"] in timed:
        ex.pop("error", None)
    ex["checks"] = [{k: c[k] for k in ("id", "status", "points")}
                    if ex["id"] in timed or c.get("category") in TIMED_CATEGORIES else c for c in ex["checks"]]
    return ex


def snapshot(seed: int) -> dict:
    from conftest import SOLUTIONS, STUBS, grade_to_dict, load_variants, make_submission

    from grader.chapter import load_chapter

    chapter = load_chapter("ch4")
    timed = {ex.id for ex in chapter.exercises if ex.timed}
    results = {"solutions": _normal(grade_to_dict(SOLUTIONS, seed=seed), timed),
               "stubs": _normal(grade_to_dict(STUBS, seed=seed), timed)}
    by_exercise: dict[str, list] = {}
    for variant in load_variants():
        by_exercise.setdefault(variant.exercise, []).append(variant)
    for i in range(max(len(v) for v in by_exercise.values())):
        chosen = {ex: vs[i] for ex, vs in by_exercise.items() if i < len(vs)}
        with tempfile.TemporaryDirectory() as folder:
            path = make_submission(Path(folder), {ex: v.path for ex, v in chosen.items()})
            report = _normal(grade_to_dict(path, exercises=tuple(sorted(chosen)), seed=seed), timed)
        for ex in report["exercises"]:
            results[chosen[ex["id"]].id] = ex
        print(f"round {i + 1}: {', '.join(v.id for v in chosen.values())}", file=sys.stderr)
    return results


def _stable(entry: dict) -> dict:
    """A snapshot entry (a report, or one exercise of a variant) without its timed numbers."""
    if "exercises" in entry:
        return {**entry, "exercises": [_exercise(ex, set()) for ex in entry["exercises"]]}
    return _exercise(entry, set())


def _verdicts(entry: dict) -> dict:
    """A snapshot entry reduced to its verdicts."""
    if "exercises" in entry:
        return {"score": entry["score"], "exercises": [_verdicts(ex) for ex in entry["exercises"]]}
    return {"id": entry["id"], "status": entry["status"], "score": entry["score"],
            "checks": [{k: c.get(k) for k in ("id", "status", "points", "hint_id")} for c in entry["checks"]]}


def compare(old: dict, new: dict, verdicts_only: bool = False) -> list[str]:
    differences = []
    reduce = _verdicts if verdicts_only else _stable
    old = {k: reduce(v) for k, v in old.items()}
    new = {k: reduce(v) for k, v in new.items()}
    for name in sorted(set(old) | set(new)):
        if name not in old or name not in new:
            differences.append(f"{name}: only in {'the new' if name in new else 'the old'} snapshot")
        elif old[name] != new[name]:
            a, b = json.dumps(old[name], sort_keys=True, ensure_ascii=False), \
                json.dumps(new[name], sort_keys=True, ensure_ascii=False)
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            differences.append(f"{name}: differs near …{a[max(0, at - 80):at + 80]}…\n"
                               f"    now …{b[max(0, at - 80):at + 80]}…")
    return differences


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"))
    parser.add_argument("--verdicts-only", action="store_true",
                        help="with --compare: compare statuses, scores, points and hints only")
    args = parser.parse_args()
    if args.compare:
        old, new = (json.loads(p.read_text(encoding="utf-8")) for p in args.compare)
        differences = compare(old, new, args.verdicts_only)
        print("\n".join(differences) or f"the same: {len(old)} reports")
        return 1 if differences else 0
    data = snapshot(args.seed)
    text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        print(f"{len(data)} reports written to {args.out}", file=sys.stderr)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
