"""What the benchmarks print of the machine they ran on (benchmarks/machine.py): a speed is a number only
beside its machine, and a run on a loaded machine must say so."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import machine  # noqa: E402

X86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7B13\n"
ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n\nModel\t\t: Raspberry Pi 5 Model B Rev 1.0\n"


def test_the_cpu_model_is_read_where_each_architecture_writes_it():
    assert machine.cpu_model(X86) == "AMD EPYC 7B13"  # not "model: 1", the line before it
    assert machine.cpu_model(ARM) == "Raspberry Pi 5 Model B Rev 1.0"
    assert machine.cpu_model("processor: 0\n")  # nothing named: still one word, never an empty field


def test_a_busy_core_is_seen_as_busy():
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = machine.busy_cores(0.5)
    finally:
        burner.kill()
        burner.wait()
    assert busy is not None and 0.7 <= busy <= (os.cpu_count() or 1) + 0.01


def test_the_description_names_the_machine_and_its_load_before_and_after():
    described = machine.Machine(settle_s=0.1).describe()
    assert machine.cpu_model() in described and f"cores usable of {os.cpu_count()}" in described
    assert "before (1, 5, 15 min)" in described and "after" in described and "GiB memory" in described


@pytest.mark.slow  # six processes import JAX
def test_the_floor_is_timed_where_asked_and_said_before_and_after():
    asked = machine.Machine(settle_s=0.1, floor=True)
    assert asked.floor_before is not None and asked.floor_before > 0.05  # a process that imports JAX
    described = asked.describe()
    assert asked.floor_after is not None and f"{asked.floor_before:.2f} s before" in described
    assert f"{asked.floor_after:.2f} s after" in described
    assert machine.in_floors(2 * asked.floor, asked.floor) == "2.00"
    assert "floor" not in machine.Machine(settle_s=0.1).describe()  # not asked: not timed (it costs seconds)
