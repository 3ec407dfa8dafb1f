"""Time of :func:`grader.similarity.ranking.rank` on a synthetic class: N students by the chapter's 8 exercises.

    python benchmarks/similarity_speed.py [--n 300] [--seed 0]

Each student's module of an exercise is the reference solution or one of the test suite's variants
(``tests/variants``), drawn from a seeded generator, with its names renamed and a line of its own, so
no two texts are alike (nothing is measured once for two students). Its jaxpr is a real one: ex02's
three functions traced from the variant drawn (jaxprs of the same sizes for every exercise), with a
label of the student's own so that each text is canonicalised anew. Prints the time of ``rank`` (the
fingerprints, the canonical forms and the scores of every pair), and the pairs over the threshold.
"""
from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from machine import Machine  # noqa: E402

from grader.authoring.variants import module_text  # noqa: E402
from grader.similarity.ranking import Baseline, rank  # noqa: E402


def _pools() -> dict[str, list[str]]:
    pools = {}
    for solution in sorted((ROOT / "solutions" / "ch4").glob("ex*.py")):
        variants = sorted((ROOT / "tests" / "variants" / "ch4" / solution.stem).glob("*.py"))
        pools[solution.stem] = [solution.read_text(encoding="utf-8")] + [module_text(v, solution) for v in variants]
    return pools


def _jaxprs(texts: list[str]) -> list[str]:
    import jax
    import jax.numpy as jnp

    x = jnp.linspace(-1.0, 1.0, 6, dtype=jnp.float32)
    found = []
    for text in texts:
        namespace: dict = {}
        try:
            exec(compile(text, "ex02", "exec"), namespace)
            found.append("\n".join(str(jax.make_jaxpr(namespace[name])(*args)) for name, args in
                                   [("piecewise", (x,)), ("normalize_if_positive", (x,)), ("clip_by_norm", (x, 1.0))]))
        except Exception:  # noqa: BLE001 - a variant that cannot be traced is a student whose could not be
            continue
    return found


def synthetic_class(n: int, seed: int) -> tuple[dict, Baseline]:
    rng = random.Random(seed)
    pools = _pools()
    traces = _jaxprs(pools["ex02_where"])
    stubs = {ex: [(ROOT / "exercises" / "ch4" / f"{ex}.py").read_text(encoding="utf-8")] for ex in pools}
    students: dict = {}
    for number in range(n):
        work = {}
        for exercise, texts in pools.items():
            text = re.sub(r"\b(x|total|norm|v)\b", rf"\1_{number}", rng.choice(texts))
            text += f"\n_seen_{number} = {rng.randrange(1000)} * {rng.choice(['1', 'x_0', 'len([])'])}\n"
            jaxpr = rng.choice(traces) + f"\nstudent {number}" if rng.random() > 0.05 else None
            work[exercise] = {"source": text, "jaxpr": jaxpr}
        students[f"s{number:03d}"] = work
    reference = {ex: {"source": texts[0], "jaxpr": traces[0]} for ex, texts in pools.items()}
    return students, Baseline(stubs, reference)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    machine = Machine()
    students, baseline = synthetic_class(args.n, args.seed)
    start = time.perf_counter()
    pairs = rank(students, baseline)
    took = time.perf_counter() - start
    print(f"rank: {args.n} students x {len(baseline.stubs)} exercises in {took:.2f} s, {len(pairs)} pairs reported")
    print(machine.describe())


if __name__ == "__main__":
    main()
