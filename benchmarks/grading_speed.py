#!/usr/bin/env python3
"""How fast ``grade`` is on this machine, against the floor and (with ``--otter``) otter-grader.

Every measurement is a whole command, timed from outside, side by side in one run:
the rounds alternate between the commands, and each figure is the median of
``--runs`` rounds (min–max beside it), in wall seconds and in core-seconds (the CPU
time of every process the command started, from ``perf stat`` where it runs, and what the
user's warm services ran meanwhile: on a shared machine the steadier figure). As a student's
``grade`` does, each grade command forks its hosts from a warm service of its cache
(:mod:`grader.runner.service`): its first run starts it (the templates import JAX as hosts
would), the next ones find it; a command on a fresh cache (a first grading, nothing built, the
first run on a machine) starts one each round, stopped after it. ``GRADER_WARM_S=0`` in the
environment times them without (each starts its own hosts). Printed for each, its ratio to the floor (a bare
Python process that imports JAX and compiles one function):

* ``grade solutions/ch4`` (all eight exercises), ``-k ex02``, ``-k ex01 -k ex02 -k ex03``: each a
  fresh seed, taken from the seeds drawn ahead (:mod:`grader.ahead`) as a student's gradings take them.
  Each command grades on a cache of its own, its runs one student's gradings one after the other, and
  that cache starts with no seed drawn: the first run draws eight and its reference jobs compute their
  outcomes beside their own, the next ones find theirs known. The mean (beside the median) counts
  that first grading once in five where a student meets it once in nine. And the whole chapter again
  with ``GRADER_SEEDS_AHEAD=0`` (every grading's reference run its own);
* ``grade exercises/ch4`` (the stubs);
* a first grading and a second one of the same, unchanged submission, for two
  submissions: the reference solutions, and a student's own correct work (each
  exercise a correct alternative of ``tests/variants``: functions written otherwise, so
  their programs are the student's own, compiled at the first grading). A first grading
  is that of a submission never graded, on a grader whose programs are built (as
  ``grade dev build`` and the first run build them, the next seeds drawn with them; a Gradescope
  autograder's ``setup.sh`` builds the programs and draws none): each round starts from a copy of
  such a cache. The second has a fresh seed; the solutions' also
  replayed with the same seed;
* the grader's very first grading on a machine, nothing built (an empty cache, and
  ``GRADER_BUILD=0``: what a first grading cost before the first run built the programs);
* the first run on a machine as a student makes it (the README's set-up grades the
  stubs): the build of the programs (:func:`grader.batch.warmup.build_once`) included;
* with ``--otter``: ``otter run`` on ``../shared/anchors/otter`` (an otter-grader
  assignment equivalent to ex01–ex03; ``--otter-dir``), with ``--otter-bin``: otter-grader
  is not among the grader's dependencies, install it in an environment of its own, with
  the grader's jax, jaxlib, ml_dtypes and numpy (compare like with like)::

      python3 -m venv /tmp/otter-venv
      /tmp/otter-venv/bin/pip install 'otter-grader[grading]==7.0.0' jax==0.10.2 jaxlib==0.10.2 \\
          ml_dtypes==0.6.0 numpy==2.4.6

    python benchmarks/grading_speed.py --runs 5 [--otter [--otter-bin PATH]] [--sandbox process]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import FLOOR, Machine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from batch_throughput import _children_cpu, counted, perf_seconds  # noqa: E402

VARIANTS = ROOT / "tests" / "variants" / "ch4"


def otter_folder() -> Path | None:
    """``shared/anchors/otter`` beside this checkout or a folder above it (a worktree's ``../shared``)."""
    for folder in ROOT.parents:
        if (folder / "shared" / "anchors" / "otter" / "autograder.zip").is_file():
            return folder / "shared" / "anchors" / "otter"
    return None


def _grade(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from grader.cli import main; sys.exit(main())", *args]


def services_cpu() -> dict[int, float]:
    """CPU seconds of each of the user's warm services (:mod:`grader.runner.service`) and everything under it, so
    far, by the service's pid: each living process's own and its reaped children's (``/proc/PID/stat``, fields
    14-17). A grading served by one runs its hosts and jobs there, not under the command ``perf stat`` counts:
    :func:`_timed` adds their growth over the command."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    roots = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = sum(int(f) for f in fields[11:15]) / tick
        if b"grader.runner.service_daemon" in argv:
            roots.append(int(entry))
    totals = {}
    for root in roots:
        under, todo = {root}, [root]
        while todo:
            parent = todo.pop()
            children = [pid for pid, p in parents.items() if p == parent and pid not in under]
            under.update(children)
            todo += children
        totals[root] = sum(cpu[pid] for pid in under)
    return totals


def stop_services(caches: list[Path]) -> None:
    """End the warm services the benchmark's caches started (each cache has one)."""
    from grader import store
    from grader.runner import service

    slots = {service.slot_of(Path(cache) / store.root().name) for cache in caches}
    pids = {found["pid"] for found in service.running() if Path(found["socket"]).stem in slots}
    # and one still starting (no pid file before it listens), told by the cache folders its settings name
    roots = tuple(f"{Path(cache)}/" for cache in caches)
    for entry in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "grader.runner.service_daemon" in argv and any(root in argv[-2] for root in roots if len(argv) > 2):
            pids.add(int(entry))
    stopped = []
    for pid in pids:
        try:
            os.kill(pid, 15)
            stopped.append(pid)
        except OSError:
            pass
    deadline = time.monotonic() + 10  # gone before the next command is timed (its CPU leaves the sum)
    while any(service.alive(pid) for pid in stopped) and time.monotonic() < deadline:
        time.sleep(0.02)


def _timed(argv: list[str], *, env: dict, cwd: Path | None = None) -> tuple[float, float]:
    """Wall seconds and core-seconds of one command: what ``perf stat`` counts of its processes, and the growth
    over the command of each warm service that ran before it (a grade command's hosts and jobs where the
    service forked them). A service the command started as it ended (a first grading's, for the next one)
    imports JAX after it: counted in neither (perf counts a child that outlives the command only as it
    ends), as it is in no grading's time; about two core-seconds once."""
    argv, perf_out = counted(argv)
    served = services_cpu()
    waited = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[-6:])} failed ({done.returncode}): {done.stderr[-500:]}")
    after = services_cpu()
    grown = sum(max(0.0, after[pid] - before) for pid, before in served.items() if pid in after)
    own = perf_seconds(perf_out) if perf_out is not None else _children_cpu() - waited
    return took, own + grown


def _latest_report(folder: Path) -> tuple[Path, int] | None:
    """The report a grading wrote last in ``folder`` (a whole chapter's or a partial one), with its time."""
    found = [(p, p.stat().st_mtime_ns) for p in (folder / "report.json", folder / "report.partial.json") if p.exists()]
    return max(found, key=lambda f: f[1]) if found else None


def _versions(python: str) -> str:
    """The versions that decide the cost of importing JAX, in the environment of ``python``."""
    code = ("from importlib import metadata as m\n"
            "print(' '.join(f'{p} {m.version(p)}' for p in ('jax', 'jaxlib', 'ml_dtypes', 'numpy')))")
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or f"unknown ({done.stderr.strip()[-200:]})"


def own_work(folder: Path) -> Path:
    """A student's own correct work: every exercise the first correct alternative of ``tests/variants``."""
    target = folder / "own" / "ch4"
    shutil.copytree(ROOT / "solutions" / "ch4", target)
    for exercise in sorted(p for p in VARIANTS.iterdir() if p.is_dir()):
        alternative = next(iter(sorted(exercise.glob("alt_*.py"))), None)
        if alternative is not None:
            from grader.authoring.variants import module_text  # a patch: spliced into the solution

            (target / f"{exercise.name}.py").write_text(
                module_text(alternative, ROOT / "solutions" / "ch4" / f"{exercise.name}.py"), encoding="utf-8")
    return target


def built_copy(built: Path, target: Path) -> Path:
    """A cache as ``grade dev build`` leaves it (the programs, the parsed TOML, the timed exercises'
    chosen cases, the seeds drawn ahead and the reference's outcomes it computed for them, and each
    exercise's wall seconds in the build's grading of the reference, which order the next grading's
    exercises: ``grader.store.durations``), and nothing graded. Until 2026-12-07 the durations were
    left out: a first grading here started its exercises in the order of their time limits, where a
    student's first grading, after the README's set-up built the programs, has the build's."""
    shutil.rmtree(target, ignore_errors=True)
    for sub in built.iterdir():  # jaxlib-X
        for part in ("xla/reference", "toml", "built", "seeds-ahead", "reference-outcomes"):
            if (sub / part).exists():
                shutil.copytree(sub / part, target / sub.name / part)
        for part in ("timing-cases.json", "durations.json"):
            if (sub / part).exists():
                (target / sub.name).mkdir(parents=True, exist_ok=True)
                shutil.copy(sub / part, target / sub.name / part)
    return target


FIRST_SOLUTIONS = "first grading: solutions, never graded (programs built)"
SECOND_SOLUTIONS = "second grading: solutions, unchanged, fresh seed"
FIRST_OWN = "first grading: a student's own work, never graded (programs built)"
SECOND_OWN = "second grading: a student's own work, unchanged, fresh seed"
NOTHING_BUILT = "the grader's very first grading: solutions, nothing built (GRADER_BUILD=0)"
FIRST_RUN = "the first run on a machine: the stubs, the build included"
OTTER = "otter run (ex01-ex03 equivalent)"
ALL, FIRST3 = "grade solutions/ch4 (all)", "grade solutions/ch4 -k ex01 -k ex02 -k ex03"
NOT_AHEAD = "grade solutions/ch4 (all), no seed drawn ahead (GRADER_SEEDS_AHEAD=0)"
NO_SERVICE = "grade solutions/ch4 (all), no warm service (GRADER_WARM_S=0)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sandbox", default="auto", choices=["auto", "bwrap", "process"])
    parser.add_argument("--otter", action="store_true", help="also time otter-grader's `otter run`")
    parser.add_argument("--otter-bin", default=shutil.which("otter") or "otter")
    parser.add_argument("--otter-dir", type=Path, default=None,
                        help="the otter-grader assignment (default: shared/anchors/otter beside this checkout)")
    args = parser.parse_args()

    machine = Machine()
    work = Path(tempfile.mkdtemp(prefix="grade-bench-"))
    warm_cache, built, own_cache = work / "cache-warm", work / "cache-built", work / "cache-own"
    solutions, own = str(ROOT / "solutions" / "ch4"), str(own_work(work))
    report = ["--report-dir", str(work / "report"), "--sandbox", args.sandbox]
    commands: dict[str, tuple[list[str], str]] = {
        "floor: python, import jax, compile one function": ([sys.executable, "-c", FLOOR], "none"),
        ALL: (_grade(solutions, *report), "warm"),
        NOT_AHEAD: (_grade(solutions, *report), "warm-not-ahead"),
        NO_SERVICE: (_grade(solutions, *report), "warm-no-service"),
        "grade solutions/ch4 -k ex02": (_grade(solutions, "-k", "2", *report), "warm"),
        FIRST3: (_grade(solutions, "-k", "1", "-k", "2", "-k", "3", *report), "warm"),
        "grade exercises/ch4 (the stubs)": (_grade(str(ROOT / "exercises/ch4"), *report), "warm"),
        FIRST_SOLUTIONS: (_grade(solutions, *report), "built"),
        SECOND_SOLUTIONS: (_grade(solutions, *report), "warm"),
        "second grading: solutions, unchanged, same seed": (_grade(solutions, "--seed", "4242", *report), "warm"),
        FIRST_OWN: (_grade(own, *report), "built"),
        SECOND_OWN: (_grade(own, *report), "own"),
        NOTHING_BUILT: (_grade(solutions, *report), "cold"),
        FIRST_RUN: (_grade(str(ROOT / "exercises/ch4"), *report), "first"),
    }
    if args.otter:
        folder = args.otter_dir or otter_folder()
        if folder is not None and (shutil.which(args.otter_bin) or Path(args.otter_bin).exists()):
            for name in ("autograder.zip", "submission.ipynb"):
                shutil.copy(folder / name, work / name)
            commands[OTTER] = ([args.otter_bin, "run", "-a", "autograder.zip", "submission.ipynb"], "none")
        else:
            print(f"otter-grader or its assignment not found ({args.otter_bin}, {folder}): see this script's "
                  "help for how to install it, or pass --otter-bin and --otter-dir", file=sys.stderr)
    base = {k: v for k, v in os.environ.items()
            if k not in ("GRADER_CACHE_DIR", "GRADER_BUILD", "GRADER_SEEDS_AHEAD", "GRADER_WARM_S")}
    prepared = {"warm": warm_cache, "warm-not-ahead": warm_cache, "warm-no-service": warm_cache, "own": own_cache}
    # the programs built once, as setup.sh builds them; the warm caches start from them and one grading
    subprocess.run(_grade("dev", "build", "--sandbox", args.sandbox), env={**base, "GRADER_CACHE_DIR": str(built)},
                   check=True, stdout=subprocess.DEVNULL)
    for cache, path, seed in ((warm_cache, solutions, "4242"), (own_cache, own, "4243")):
        built_copy(built, cache)
        subprocess.run(_grade(path, "--seed", seed, *report), env={**base, "GRADER_CACHE_DIR": str(cache)}, check=True,
                       stdout=subprocess.DEVNULL)
    # each command on a warm cache of its own, none drawn ahead: the seeds it takes, one after the other,
    # are a student's (its first grading draws eight and computes their reference outcomes: the mean shows it)
    env = {name: base for name in commands}
    for i, (name, (_, cache)) in enumerate(commands.items()):
        if cache in prepared:
            shutil.copytree(prepared[cache], work / f"cache-{i}")
            for drawn in (work / f"cache-{i}").glob("*/seeds-ahead"):
                shutil.rmtree(drawn)
            env[name] = {**base, "GRADER_CACHE_DIR": str(work / f"cache-{i}"),
                         **({"GRADER_SEEDS_AHEAD": "0"} if cache == "warm-not-ahead" else {}),
                         **({"GRADER_WARM_S": "0"} if cache == "warm-no-service" else {})}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    served: dict[str, list[tuple[bool, bool]]] = {name: [] for name in commands}
    for round_ in range(args.runs):
        for name, (argv, cache) in commands.items():
            before = _latest_report(work / "report")
            if cache in ("cold", "built", "first"):
                fresh = work / f"cache-{cache}-{round_}-{list(commands).index(name)}"  # no two commands' alike
                if cache == "built":
                    built_copy(built, fresh)
                extra = {"GRADER_BUILD": "0"} if cache == "cold" else {}
                times[name].append(_timed(argv, env={**base, "GRADER_CACHE_DIR": str(fresh), **extra}, cwd=work))
                stop_services([fresh])  # a fresh machine's: not kept for the next round
                shutil.rmtree(fresh, ignore_errors=True)
            else:
                times[name].append(_timed(argv, env=env[name], cwd=work))
            after = _latest_report(work / "report")
            if after is not None and after != before:
                timings = json.loads(after[0].read_text(encoding="utf-8")).get("timings", {})
                served[name].append((timings.get("command_from") == "warm command",
                                     timings.get("hosts_from") == "warm service"))
        print(f"round {round_ + 1} of {args.runs} done", file=sys.stderr)

    medians = {name: statistics.median(w for w, _ in values) for name, values in times.items()}
    cpu = {name: statistics.median(c for _, c in values) for name, values in times.items()}
    floor = medians[next(iter(commands))]
    width = max(len(name) for name in commands)
    print(f"\n| {'command'.ljust(width)} | wall, median (min–max) | mean | core-seconds | × floor "
          "| warm command, warm hosts |")
    print(f"|{'-' * (width + 2)}|---:|---:|---:|---:|---|")
    for name, values in times.items():
        walls = [w for w, _ in values]
        runs = served[name]
        where = f"{sum(c for c, _ in runs)}/{len(runs)}, {sum(h for _, h in runs)}/{len(runs)}" if runs else ""
        print(f"| {name.ljust(width)} | {medians[name]:5.2f} s ({min(walls):.2f}–{max(walls):.2f}) "
              f"| {statistics.mean(walls):5.2f} s | {cpu[name]:5.2f} | {medians[name] / floor:5.2f} | {where} |")
    print("\nratios measured side by side in this run (wall; core-seconds in brackets):")
    for label, num, den in (("first grading / second, the solutions", FIRST_SOLUTIONS, SECOND_SOLUTIONS),
                            ("first grading / second, a student's own work", FIRST_OWN, SECOND_OWN),
                            ("nothing built / second grading, the solutions", NOTHING_BUILT, SECOND_SOLUTIONS),
                            ("grade -k ex01 -k ex02 -k ex03 / otter run", FIRST3, OTTER),
                            ("grade (all eight) / otter run", ALL, OTTER),
                            ("grade (all eight), no seed drawn ahead / otter run", NOT_AHEAD, OTTER),
                            ("grade (all eight), no warm service / otter run", NO_SERVICE, OTTER),
                            ("grade (all eight) / the same without the warm service", ALL, NO_SERVICE)):
        if num in medians and den in medians:
            means = statistics.mean(w for w, _ in times[num]) / statistics.mean(w for w, _ in times[den])
            print(f"  {label}: {medians[num] / medians[den]:.2f} ({cpu[num] / cpu[den]:.2f}); of the means {means:.2f}")
    print(f"\ngrade's environment: {_versions(sys.executable)}")
    if OTTER in commands:
        otter_python = Path(args.otter_bin).resolve().parent / "python"
        print(f"otter's environment: {_versions(str(otter_python))} (compare like with like)")
    print(f"\n{machine.describe()}; sandbox {args.sandbox}")
    stop_services([warm_cache, own_cache, built, *(work / f"cache-{i}" for i in range(len(commands)))])
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
