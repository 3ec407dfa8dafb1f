#!/usr/bin/env python3
"""What ``grade batch --similarity`` costs: the programs traced in each student's jobs, and the ranking.

Two figures, measured here, for the instructors' guide:

* the batch's throughput with and without ``--similarity`` on the same class (``--n`` students built from
  the corpus of variants, :mod:`tests.similarity_class`; ``-j 2``), the runs alternating, each figure the
  median of ``--runs`` (min–max beside it); every student graded afresh each run (``force``);
* the ranking and the pages (:func:`grader.batch.similarity.similarity_report`) for a class of
  ``--class-size`` students (default 300): the programs the batch kept, each student's exercise taken from a
  student of the batch with its names renamed (a distinct text for each, as a class's are), median of
  ``--runs``.

    python benchmarks/similarity_cost.py --n 24 --runs 3 --class-size 300
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import similarity_class as made  # noqa: E402
from machine import Machine  # noqa: E402

from grader.batch.run import BatchOptions, run_batch  # noqa: E402
from grader.batch.similarity import FOLDER, similarity_report  # noqa: E402
from grader.chapter import load_chapter  # noqa: E402


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=24, help="students in the batch")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--class-size", type=int, default=300)
    args = parser.parse_args()
    machine = Machine()
    work = Path(tempfile.mkdtemp(prefix="similarity-cost-"))
    try:
        students = made.independent(args.n)
        for student, styles in students.items():
            made.write_student(work / "class" / student, {ex: text for ex, (_, text) in styles.items()})
        rates: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.runs):
            for similarity in (False, True):
                out = work / f"out-{similarity}"
                began = time.monotonic()
                run_batch(work / "class", BatchOptions(chapter="ch4", out=out, seed=11, jobs=args.jobs, force=True,
                                                       similarity=similarity, allow_weak_sandbox=True))
                rates[similarity].append(args.n / (time.monotonic() - began) * 60)
        ratio = statistics.median(rates[True]) / statistics.median(rates[False])
        print(f"batch of {args.n}, -j {args.jobs}: {_spread(rates[False])} a minute without --similarity, "
              f"{_spread(rates[True])} with (ratio {ratio:.2f})")
        kept = work / "out-True" / FOLDER / "programs"
        sources = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(kept.glob("*.json"))]
        big = work / "big"
        (big / FOLDER / "programs").mkdir(parents=True)
        shutil.copy(work / "out-True" / FOLDER / "reference.json", big / FOLDER / "reference.json")
        pick = random.Random(5)
        for i in range(args.class_size):
            entry = {ex: dict(data) for ex, data in pick.choice(sources).items()}
            for data in entry.values():
                data["source"] = made.renamed(data["source"]).replace("arg_", f"a{i}_").replace("tmp_", f"t{i}_")
            (big / FOLDER / "programs" / f"p{i:03d}.json").write_text(json.dumps(entry), encoding="utf-8")
        chapter = load_chapter("ch4")
        took = []
        for _ in range(args.runs):
            began = time.monotonic()
            found = similarity_report(big, chapter, seed=11)
            took.append(time.monotonic() - began)
        print(f"similarity of a class of {args.class_size} (8 exercises): {_spread(took)} s, "
              f"{len(found.pairs)} pairs reported")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(machine.describe())


if __name__ == "__main__":
    main()
