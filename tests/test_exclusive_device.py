"""A grading on a device that serves one process at a time (a TPU), run whole on this machine's CPU.

``GRADER_SIMULATED_ACCELERATOR=tpu`` has the grader plan as on a TPU VM (grader/runner/devices.py):
the exercises whose checks measure the device (ex05, ex06) take their turns on it, one job at a time,
ex06's two sides in turn, ex05's two parts as one job, and every other job on the CPU beside them. The
device's jobs then run on JAX's default device, the CPU here: every piece of the plan runs for real
but the chip itself (its run on a TPU v5e is in the closing notes: scripts/device_check.sh). With
``tpu:unavailable`` the device's jobs ask JAX for a TPU, which fails as they start, as a chip taken by
another process does; ``GRADER_TPU_LOCKFILE`` names the lock file a holder keeps open.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FULL, ROOT, SOLUTIONS, STUBS

pytestmark = pytest.mark.slow


def grade(folder: Path, out: Path, *args: str, env: dict | None = None) -> tuple[int, dict | None, str]:
    done = subprocess.run([sys.executable, "-m", "grader", str(folder), "--json", "--lang", "en", "--report-dir",
                           str(out), *args], capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, **(env or {})})
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        report = None
    return done.returncode, report, done.stderr


def _turns_never_overlap(turns: list[dict]) -> None:
    for earlier, later in zip(turns, turns[1:]):
        assert earlier["to_s"] is not None and earlier["to_s"] <= later["from_s"], turns


@pytest.fixture(scope="module")
def solutions_on_a_tpu(tmp_path_factory):
    out = tmp_path_factory.mktemp("tpu-solutions")
    code, report, errors = grade(SOLUTIONS, out, "--seed", "11", env={"GRADER_SIMULATED_ACCELERATOR": "tpu"})
    assert code == 0 and report is not None, errors
    return report


def test_the_solutions_score_full_marks_with_the_devices_exercises_in_turn(solutions_on_a_tpu):
    report = solutions_on_a_tpu
    assert report["score"] == FULL, [(e["id"], e["score"]) for e in report["exercises"]]
    assert report["device"]["platform"] == "tpu" and report["device"]["exclusive"] is True
    assert report["device"]["note"] is None
    turns = report["timings"]["device_turns"]
    # ex05's one job (its two parts in one), ex06's student, then its reference: three turns, one at a time
    assert sorted(t["job"].rsplit("-", 1)[0] for t in turns) == ["ex05_timing", "ex06_speedup", "ex06_speedup"]
    _turns_never_overlap(turns)
    ex06 = next(e for e in report["exercises"] if e["id"] == "ex06_speedup")
    speedups = [c for c in ex06["checks"] if c["id"].endswith(".speedup")]
    assert all(c["measured"]["method"]["sides"].startswith("in turn") for c in speedups), speedups
    assert all(c["measured"]["reference"]["speedup"] > 1 for c in speedups)


def test_the_stubs_take_no_reference_turn(tmp_path):
    code, report, errors = grade(STUBS, tmp_path, "--seed", "11", env={"GRADER_SIMULATED_ACCELERATOR": "tpu"})
    assert code == 0 and report["score"] == 0, errors
    assert {e["status"] for e in report["exercises"]} == {"not_attempted"}
    # the stub's provided heavy returns, but no function of the exercise's: the reference's turn is not taken
    assert sorted(t["job"].rsplit("-", 1)[0]
                  for t in report["timings"]["device_turns"]) == ["ex05_timing", "ex06_speedup"]


@pytest.mark.parametrize("variant", ["ex06_speedup/fast_heavy_callback", "ex06_speedup/layer_norm_not_jitted",
                                     "ex06_speedup/static_eps", "ex05_timing/no_block"])
def test_mistakes_of_the_devices_exercises_are_judged_as_declared_in_turn(variant, tmp_path):
    from conftest import load_variants

    declared = next(v for v in load_variants() if v.id == variant)
    folder = tmp_path / "ch4"
    shutil.copytree(SOLUTIONS, folder)
    (folder / f"{declared.exercise}.py").write_text(declared.source, encoding="utf-8")
    code, report, errors = grade(folder, tmp_path / "out", "-k", declared.exercise, "--seed", "11",
                                 env={"GRADER_SIMULATED_ACCELERATOR": "tpu"})
    assert code == 0 and report is not None, errors
    ex = report["exercises"][0]
    failed = {c["id"] for c in ex["checks"] if c["status"] == "failed"}
    skipped = {c["id"] for c in ex["checks"] if c["status"] == "skipped"}
    assert (failed, skipped) == (declared.failed, declared.skipped), [(c["id"], c["status"], c["message"])
                                                                     for c in ex["checks"]]
    for check in ex["checks"]:  # a speed-up lost says how it was measured, as one that passed does
        if check["id"].endswith(".speedup") and check["status"] in ("passed", "failed"):
            assert check["measured"]["case"] and check["measured"]["method"]["sides"].startswith("in turn"), check
    _turns_never_overlap(report["timings"]["device_turns"])


@pytest.fixture
def holder(tmp_path):
    """Another program holding the device (as libtpu's holder holds its lock file open)."""
    lockfile = tmp_path / "libtpu_lockfile"
    lockfile.write_text("")
    process = subprocess.Popen([sys.executable, "-c", "import sys, time\nf = open(sys.argv[1])\n"
                                "print('held', flush=True)\ntime.sleep(300)", str(lockfile)],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    yield process.pid, {"GRADER_SIMULATED_ACCELERATOR": "tpu", "GRADER_TPU_LOCKFILE": str(lockfile)}
    process.kill()
    process.wait()


def test_a_device_held_by_another_process_grades_on_the_cpu_saying_who_holds_it(holder, tmp_path):
    pid, env = holder
    code, report, errors = grade(SOLUTIONS, tmp_path, "--seed", "11", env=env)
    assert code == 0 and report["score"] == FULL, errors
    assert report["device"]["platform"] == "cpu" and report["device"]["holder"]["pid"] == pid
    note = report["device"]["note"]
    assert f"pid {pid}" in note and "graded on the CPU" in note
    assert "device_turns" not in report["timings"]  # nothing took a turn on the device
    assert note in (tmp_path / "report.md").read_text(encoding="utf-8")  # every report says it
    shown = subprocess.run([sys.executable, "-m", "grader", str(SOLUTIONS), "-k", "ex01", "--seed", "11",
                            "--report-dir", str(tmp_path / "t")], capture_output=True, text=True, timeout=300, cwd=ROOT,
                           env={**os.environ, **env})
    assert f"pid {pid}" in " ".join(shown.stdout.split()), shown.stdout  # the terminal's table too


def test_device_device_with_the_device_held_is_one_line(holder, tmp_path):
    pid, env = holder
    done = subprocess.run([sys.executable, "-m", "grader", str(SOLUTIONS), "--device", "device", "--report-dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, **env})
    assert done.returncode == 2 and done.stdout == "", done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pid {pid}" in lines[0] and "Traceback" not in done.stderr, done.stderr


def test_a_device_taken_as_a_job_starts_falls_back_to_the_cpu(tmp_path):
    code, report, errors = grade(SOLUTIONS, tmp_path, "--seed", "11",
                                 env={"GRADER_SIMULATED_ACCELERATOR": "tpu:unavailable"})
    assert code == 0 and report["score"] == FULL, errors
    assert report["device"]["platform"] == "cpu"
    assert report["device"]["note"].startswith("TPU (simulated) could not be opened "
                                               "(Unable to initialize backend 'tpu'")
    assert {(e.get("device") or {}).get("backend") for e in report["exercises"]} == {"cpu"}


def test_no_accelerator_with_device_device_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "grader", str(SOLUTIONS), "--device", "device", "--report-dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no accelerator was found" in done.stderr


def test_a_batch_refuses_device(tmp_path):
    done = subprocess.run([sys.executable, "-m", "grader", "batch", str(tmp_path), "--chapter", "ch4", "--out",
                           str(tmp_path / "out"), "--device", "cpu"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 2 and "--device is for one grading" in done.stderr and "Traceback" not in done.stderr


def test_check_in_a_kernel_that_holds_the_device_names_the_kernel(tmp_path, monkeypatch):
    """Colab's and Kaggle's way: the notebook's kernel ran JAX and holds the TPU; check() grades in a process
    the kernel starts, on the CPU, saying that the kernel holds it and how to measure on the device."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    lockfile = tmp_path / "libtpu_lockfile"
    lockfile.write_text("")
    monkeypatch.setenv("GRADER_SIMULATED_ACCELERATOR", "tpu")
    monkeypatch.setenv("GRADER_TPU_LOCKFILE", str(lockfile))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from grader.notebook import check"),
                nbformat.v4.new_code_cell("import os\nchip = open(os.environ['GRADER_TPU_LOCKFILE'])  "
                                          "# JAX on the TPU, as a kernel that ran a cell holds it\nos.getpid()"),
                nbformat.v4.new_code_cell("import jax.numpy as jnp\n\ndef piecewise(x):\n"
                                          "    return jnp.where(x > 0, x * x, 0.5 * x)"),
                nbformat.v4.new_code_cell('r = check("ex02", seed=3, lang="en")\nr'),
                nbformat.v4.new_code_cell("r.report['device']['platform'], r.report['device']['holder']['pid']")]
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    def result(cell) -> dict:
        return next(o for o in cell.outputs if o.output_type == "execute_result")["data"]

    kernel = int(result(nb.cells[1])["text/plain"])
    shown = " ".join(result(nb.cells[3])["text/plain"].split())
    assert f"held by this notebook's kernel (pid {kernel})" in shown and "graded on the CPU" in shown, shown
    assert "run grade on it from a terminal" in shown
    assert result(nb.cells[4])["text/plain"] == f"('cpu', {kernel})"
    html = result(nb.cells[3])["text/html"]
    assert f"pid {kernel}" in html


def test_a_preview_with_another_jax_than_the_records_says_so(tmp_path):
    """A release keeps a JAX installed for the accelerator (its pyproject asks jax>=0.4.30; the extra [pinned]
    the records' version): a grading with another JAX says which, and what that changes."""
    from dataclasses import replace

    from grader.chapter import load_chapter
    from grader.grading import GradeOptions, Machinery, grade
    from grader.i18n import grader_catalog
    from grader.preview import record_reference

    chapter = load_chapter("ch4")
    records = record_reference(chapter, 5, scratch_root=tmp_path)
    here = records.environment["jax"]
    same = grade(SOLUTIONS, GradeOptions(chapter="ch4", exercises=("ex02",)),
                 Machinery(preview=records, scratch_root=tmp_path))
    assert "version_note" not in same.device and same.score == 10
    other = grade(SOLUTIONS, GradeOptions(chapter="ch4", exercises=("ex02",)),
                  Machinery(scratch_root=tmp_path,
                            preview=replace(records, environment={**records.environment, "jax": "0.4.30"})))
    line = grader_catalog().render(other.device["version_note"], "en")
    assert line.startswith(f"JAX {here} here, while the reference records were made with JAX 0.4.30")
    assert other.score == 10
