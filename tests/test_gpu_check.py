"""scripts/gpu_check.sh, the check a GPU machine runs when one is lent: it must at least parse,
plan from the variants that exist, and run to its verdict on a machine without a GPU (where it
says so and grades on the CPU)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
GPU = shutil.which("nvidia-smi") is not None


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT / "tests", capture_output=True, text=True,
                          timeout=timeout)


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


def test_a_dry_run_names_the_device_the_python_and_the_plan():
    done = run("--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    if not GPU:
        assert "no NVIDIA GPU found" in out and "grading on the CPU" in out, out
    assert "backend " in out and "device_kind " in out, out
    # every mistake of the plan is a variant that exists, with the checks it must fail
    assert out.count(" must fail ") >= 6 and "ex05_timing/no_block must fail time_call.waits" in out, out
    assert "dry run: nothing graded" in out


def test_an_unknown_option_is_one_clear_line():
    done = run("--frobnicate")
    assert done.returncode == 2 and done.stdout.strip() == "gpu_check: unknown option --frobnicate (try --help)"


@pytest.mark.slow
@pytest.mark.skipif(GPU, reason="on a GPU machine this is the real check, run by hand (minutes)")
def test_on_a_cpu_machine_it_grades_on_the_cpu_to_its_verdict():
    done = run(timeout=400)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "device: cpu" in out and "solutions: 80/80" in out, out
    assert "fast_heavy.speedup" in out and "vs reference" in out, out
    assert out.count("as declared") >= 9 and "every mistake failed exactly its declared checks" in out, out
