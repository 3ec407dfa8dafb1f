"""The machine a benchmark ran on, printed with its figures: a speed is a number only beside the machine.

    from machine import Machine
    machine = Machine()          # the machine, and how loaded it is, before the runs
    ...                          # the runs
    print(machine.describe())    # ... and after them

What it says: the CPU's model (``/proc/cpuinfo``), the cores this process may use and the machine's,
the memory, the kernel, Python's and JAX's versions, and the load: the load averages before and after
the runs, and how busy the cores were over a second before them and after them (``/proc/stat``, every
process's work, the benchmark's own excluded by measuring when it runs nothing). A benchmark whose
cores were busy before it began measured a shared machine: compare its figures as ratios within one
run, never against another run's.

``Machine(floor=True)`` also times the floor before and after the runs (:func:`floor_s`): a process that imports JAX
and compiles one function, what every host of a grading pays once. It is the machine's speed for this work: the
same kind of machine (2 cores, the same CPU model) measured 0.62 s on 2026-12-05 and 1.6 to 2.0 s on 2026-12-07, so
a figure set against one day's machine is read against another's through it (:func:`in_floors`).
"""
from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: the floor: a process that imports JAX and compiles and runs one function
FLOOR = "import jax, jax.numpy as jnp; jax.jit(lambda x: x + 1)(jnp.ones(3)).block_until_ready()"
#: the floor where the batch's and the chapter's targets were set (2026-12-05, 2 cores)
TARGETS_FLOOR_S = 0.62


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name (``model name`` in ``/proc/cpuinfo``; a few architectures call it otherwise)."""
    try:
        text = cpuinfo if cpuinfo is not None else Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or "unknown CPU"
    for field in ("model name", "Model", "cpu model", "Processor"):
        for line in text.splitlines():
            name, _, value = line.partition(":")
            if name.strip() == field and value.strip():
                return value.strip()
    return platform.processor() or "unknown CPU"


def memory_gib() -> float | None:
    """The machine's memory (``MemTotal``), in GiB."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1 << 20)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _ticks() -> tuple[int, int] | None:
    """``(busy, total)`` clock ticks of all the CPUs since boot."""
    try:
        with open("/proc/stat", encoding="utf-8") as stat:
            fields = [int(v) for v in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def busy_cores(seconds: float = 1.0) -> float | None:
    """How many cores' worth of work the machine did over the next ``seconds`` (while this process sleeps)."""
    before = _ticks()
    time.sleep(seconds)
    after = _ticks()
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1]) * (os.cpu_count() or 1)


def floor_s(runs: int = 3, python: str = sys.executable) -> float | None:
    """The floor's wall time on this machine, the median of ``runs`` (``None`` where JAX does not import)."""
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        if subprocess.run([python, "-c", FLOOR], capture_output=True).returncode != 0:
            return None
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def in_floors(seconds: float, floor: float | None) -> str:
    """``seconds`` as a number of floors (``?`` without one)."""
    return "?" if not floor else f"{seconds / floor:.2f}"


def _versions() -> str:
    try:
        from importlib.metadata import version

        return f"jax {version('jax')}, jaxlib {version('jaxlib')}"
    except Exception:  # noqa: BLE001 - a benchmark says what it can
        return "jax ?"


class Machine:
    """The machine, measured before a benchmark's runs (at construction) and after them (:meth:`describe`)."""

    def __init__(self, settle_s: float = 1.0, floor: bool = False):
        self.settle_s = settle_s
        self.load_before = os.getloadavg()
        self.busy_before = busy_cores(settle_s)
        #: the floor before the runs, and after them (:meth:`describe`), where asked for
        self.floor_before = floor_s() if floor else None
        self.floor_after: float | None = None

    @property
    def floor(self) -> float | None:
        """The floor: the mean of before and after where both were timed, else the one that was."""
        known = [f for f in (self.floor_before, self.floor_after) if f]
        return statistics.mean(known) if known else None

    def describe(self) -> str:
        """One paragraph for the benchmark's output: the machine, and its load before and after."""
        load_after = os.getloadavg()
        busy_after = busy_cores(self.settle_s)
        if self.floor_before is not None and self.floor_after is None:
            self.floor_after = floor_s()
        usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        memory = memory_gib()

        def busy(value: float | None) -> str:
            return "?" if value is None else f"{value:.2f}"

        return (f"machine: {cpu_model()}, {usable} cores usable of {os.cpu_count()}"
                + (f", {memory:.0f} GiB memory" if memory else "")
                + f", {platform.system()} {platform.release()}, Python {platform.python_version()}, {_versions()}\n"
                f"load: average {' '.join(f'{x:.2f}' for x in self.load_before)} before (1, 5, 15 min), "
                f"{' '.join(f'{x:.2f}' for x in load_after)} after; cores busy with other work over "
                f"{self.settle_s:.0f} s: {busy(self.busy_before)} before, {busy(busy_after)} after"
                + (f"\nfloor (python, import jax, compile one function; median of 3): {self.floor_before:.2f} s "
                   f"before, {self.floor_after or 0:.2f} s after ({TARGETS_FLOOR_S} s where the targets were set)"
                   if self.floor_before else ""))
