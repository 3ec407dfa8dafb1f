"""scripts/device_check.sh, the check a TPU or GPU machine runs when one is lent (its output on a TPU
v5e is in the closing notes): here it must parse, plan from the variants that exist, build its own
environment from a folder of wheels as on a machine without a package index, and run to its verdict
on a machine without an accelerator (where it grades on the CPU)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FULL

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "device_check.sh"
GPU = shutil.which("nvidia-smi") is not None


def run(*args: str, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT / "tests", capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def test_the_scripts_parse():
    for script in (SCRIPT, ROOT / "scripts" / "gpu_check.sh"):
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def test_a_dry_run_names_the_device_the_python_and_the_plan():
    done = run("--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout + done.stderr
    if not GPU:
        assert "no accelerator: grading on the CPU" in out, out
    assert "python: " in out and "jax " in out, out
    # every variant of the device's exercises is planned, with the checks it must fail
    assert "the device's exercises: ex05_timing, ex06_speedup" in out, out
    assert out.count(" must fail ") == len(list((ROOT / "tests/variants/ch4/ex05_timing").glob("*.py"))) + \
        len(list((ROOT / "tests/variants/ch4/ex06_speedup").glob("*.py"))), out
    assert "ex05_timing/no_block must fail time_call.waits" in out, out
    assert "dry run: nothing graded" in out


def test_the_gpu_check_is_the_device_check():
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--frobnicate"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 2 and done.stdout.strip() == "device_check: unknown option --frobnicate (try --help)"


def test_an_unknown_option_or_part_is_one_clear_line():
    done = run("--frobnicate")
    assert done.returncode == 2 and done.stdout.strip() == "device_check: unknown option --frobnicate (try --help)"
    done = run("--only", "solutions,everything", "--dry-run")
    assert done.returncode == 2 and \
        "\ndevice_check: unknown part(s) everything (known: solutions, stubs, variants, held, cpu)\n" in done.stdout
    done = run("--wheels", "/nonexistent")
    assert done.returncode == 2 and done.stdout.strip() == "device_check: --wheels /nonexistent holds no .whl files"


def _wheels(folder: Path) -> None:
    """click's and nbformat's wheels and what they need, at the versions installed here, fetched as the
    README's recipe fetches them for a machine without an index (skipped where no index is reachable)."""
    from importlib import metadata

    names = ("click", "nbformat", "fastjsonschema", "jsonschema", "jsonschema-specifications", "referencing",
             "rpds-py", "attrs", "jupyter_core", "traitlets", "platformdirs", "typing_extensions")
    pins = [f"{name}=={metadata.version(name)}" for name in names]
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                           "-d", str(folder), *pins], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.skip(f"the wheels cannot be fetched here (no package index?): {done.stderr[-300:]}")


@pytest.mark.slow
def test_from_a_folder_of_wheels_jax_found_through_pythonpath(tmp_path):
    """A TPU VM's sandbox as the device check meets it: no package index, JAX on PYTHONPATH (not in any
    site-packages), click and nbformat as wheels. The script's own venv (--without-pip, a .pth naming
    PYTHONPATH's folders, the wheels, the checkout; PYTHONPATH unset) imports everything, and a grading
    from it runs (the grader hands its processes JAX's folders: grader.runner.sandbox.jax_stack)."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p, "jax").is_dir()))
    jax_folder = tmp_path / "jax-folder"  # JAX and what it imports, and nothing else, as a machine ships them
    jax_folder.mkdir()
    for entry in site.iterdir():
        if entry.name.lower().replace("-", "_").startswith(("jax", "ml_dtypes", "opt_einsum", "numpy", "scipy")):
            (jax_folder / entry.name).symlink_to(entry)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    if (not shutil.which("python3")
            or subprocess.run(["python3", "-c", "import jax"], capture_output=True).returncode == 0):
        pytest.skip("the system's python3 already holds JAX: the script's venv would not need PYTHONPATH's")
    _wheels(wheels)
    done = run("--wheels", str(wheels), "--only", "stubs", timeout=600,
               env={"PYTHONPATH": str(jax_folder), "TMPDIR": str(tmp_path), "OUT": str(tmp_path / "out")})
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert f"its .pth names: {jax_folder} {tmp_path}/device-check-site {ROOT}" in out, out
    assert f"from {jax_folder}/jax/__init__.py" in out, out
    assert f"stubs: 0/{FULL:g}" in out and "every part as expected" in out, out
    assert (tmp_path / "out" / "stubs.json").is_file()


@pytest.mark.slow
@pytest.mark.skipif(GPU, reason="on a GPU machine this is the real check, run by hand (minutes)")
def test_on_a_cpu_machine_it_grades_on_the_cpu_to_its_verdict(tmp_path):
    done = run("--only", "solutions,stubs,held,cpu", timeout=600, env={"OUT": str(tmp_path)})
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "device: cpu" in out and f"solutions: {FULL:g}/{FULL:g}" in out and f"stubs: 0/{FULL:g}" in out, out
    assert "fast_heavy.speedup" in out and "vs reference" in out, out
    assert f"JAX_PLATFORMS=cpu: {FULL:g}/{FULL:g}" in out and f"held: {FULL:g}/{FULL:g}" in out, out
    assert "every part as expected" in out, out
    assert {p.name for p in tmp_path.glob("*.json")} == {"solutions.json", "stubs.json", "held.json", "cpu.json"}
