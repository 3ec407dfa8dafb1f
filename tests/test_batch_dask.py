"""grade batch --executor dask: a real ``distributed.LocalCluster`` (no mock).

A small class (full marks, stubs, a crash, and two students who handed in the same
files) graded on a local cluster of two workers, with the plain process sandbox
allowed explicitly (so the summary says so on its first line); and a task whose
workers keep dying, which must become that student's error row and not lose the
batch. About 40 seconds.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import SOLUTIONS, STUBS, make_submission

from grader.cli import main

distributed = pytest.importorskip("distributed", reason="Dask is in the batch extra: pip install -e '.[batch]'")
pytestmark = pytest.mark.slow
SEED = 21
CRASH = (SOLUTIONS / "ex01_jit_forms.py").read_text(encoding="utf-8").replace(
    "    shifted = x - jnp.max(x, axis=-1, keepdims=True)\n    e = jnp.exp(shifted)",
    "    import os\n    os._exit(7)")


def _student(klass: Path, name: str, replacements: dict | None = None, base: Path = SOLUTIONS) -> None:
    made = make_submission(klass / f".{name}-tmp", replacements, base=base)
    made.rename(klass / name)
    shutil.rmtree(klass / f".{name}-tmp")


@pytest.fixture(scope="module")
def dask_batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("dask")
    klass = root / "class"
    klass.mkdir()
    _student(klass, "ada")
    _student(klass, "ada-twin")  # the same files: two students, not one merged task
    _student(klass, "bea", base=STUBS)
    _student(klass, "cy", {"ex01_jit_forms": CRASH})
    out = root / "results"
    code = main(["batch", str(klass), "--chapter", "ch4", "--out", str(out), "--executor", "dask", "-j", "2",
                 "-k", "1", "--seed", str(SEED), "--exercise-timeout", "20", "--sandbox", "process",
                 "--allow-weak-sandbox", "--lang", "en", "--similarity"])
    with (out / "grades.csv").open(encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    return {"code": code, "out": out, "rows": rows}


def test_a_class_is_graded_on_a_local_dask_cluster(dask_batch):
    rows = dask_batch["rows"]
    assert dask_batch["code"] == 0
    assert {n: r["status"] for n, r in rows.items()} == {"(max points)": "", "ada": "completed",
                                                         "ada-twin": "completed", "bea": "completed", "cy": "crash"}
    assert rows["ada"]["total"] == rows["ada-twin"]["total"] == "10" and rows["bea"]["total"] == "0"
    for name in ("ada", "ada-twin", "bea", "cy"):
        report = json.loads((dask_batch["out"] / name / "report.partial.json").read_text(encoding="utf-8"))
        assert report["seed"] == SEED and float(rows[name]["total"]) == report["score"]
        assert report["submission"]["path"].endswith(f"/class/{name}")


def test_the_workers_used_the_reference_shipped_to_them(dask_batch):
    manifest = json.loads((dask_batch["out"] / "manifest.json").read_text(encoding="utf-8"))
    sources = {name: entry["reference_source"] for name, entry in manifest["students"].items()}
    assert sources == {"ada": "shipped", "ada-twin": "shipped", "bea": "shipped", "cy": "shipped"}
    cores = len(os.sched_getaffinity(0))
    if cores >= 2:  # two workers on this machine: each grading on half the cores
        assert all(len(entry["cpus"]) == cores // 2 for entry in manifest["students"].values()), manifest


def test_the_summary_says_on_its_first_line_that_the_sandbox_was_weaker(dask_batch):
    for name in ("summary.md", "summary.html"):
        text = (dask_batch["out"] / name).read_text(encoding="utf-8")
        first = text.split("<body>", 1)[-1].strip().splitlines()[0]
        assert "Warning: graded with a weaker sandbox (process+uid" in first or \
            "Warning: graded with a weaker sandbox (process" in first, first


# ------------------------------------------------------------------ workers that keep dying
def doomed(payload: dict, reference, host_slots, timeout_s: float) -> dict:
    """A Dask task that kills its worker for the student ``doomed``, and grades nobody."""
    if payload["name"] == "doomed":
        os._exit(1)
    return {"ok": False, "status": "crash", "message": "not graded in this test"}


def test_a_task_whose_workers_keep_dying_becomes_an_error_row(tmp_path):
    import cloudpickle
    import dask

    import test_batch_dask
    from grader.batch.executors import DaskExecutor

    cloudpickle.register_pickle_by_value(test_batch_dask)  # the workers cannot import this test module
    results: dict[str, dict] = {}
    tasks = [("doomed", {"name": "doomed"}), ("fine", {"name": "fine"})]
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        DaskExecutor(2, task=doomed, retries=0).run(tasks, {"digest": "x"}, 60,
                                                    lambda name, result: results.__setitem__(name, result))
    assert results["doomed"]["status"] == "crash" and "KilledWorker" in results["doomed"]["message"]
    assert results["fine"]["message"] == "not graded in this test"


def test_a_running_scheduler_is_used_and_force_grades_again(tmp_path, capsys):
    """--scheduler ADDRESS: the batch joins a cluster started beforehand (as `dask scheduler` and
    `dask worker ADDRESS` would be); the same command again keeps the student, --force grades again."""
    from distributed import LocalCluster

    klass = tmp_path / "class"
    klass.mkdir()
    _student(klass, "ada", base=STUBS)
    out = tmp_path / "results"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster:
        args = ["batch", str(klass), "--chapter", "ch4", "--out", str(out), "--executor", "dask", "--scheduler",
                cluster.scheduler_address, "-k", "1", "--seed", str(SEED), "--sandbox", "process",
                "--allow-weak-sandbox", "--lang", "en"]
        assert main(args) == 0
        err = capsys.readouterr().err
        assert f"1 to grade, 0 already graded (kept), seed {SEED}, dask, {cluster.scheduler_address}" in err
        assert main(args) == 0
        assert "0 to grade, 1 already graded (kept)" in capsys.readouterr().err
        assert main(args + ["--force"]) == 0
        assert "1 to grade, 0 already graded (kept)" in capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["students"]["ada"]["status"] == "completed" and manifest["seed"] == SEED


def test_a_local_clusters_own_upkeep_is_quieted():
    """The local cluster a batch starts runs its workers without Dask's statistical profiler and with
    slower housekeeping (``grader.batch.executors.LOCAL_CLUSTER``): read from the workers themselves,
    where Dask reads the settings (``distributed/worker.py`` ``Worker.__init__`` registers the
    ``profile`` periodic callback only when ``distributed.worker.profile.enabled``;
    ``distributed/core.py`` ``Server.__init__`` sets ``_tick_interval``), and the scheduler's
    worker-saturation. A cluster started with Dask's defaults has the profiler (so this could fail)."""
    from distributed import Client, LocalCluster

    from grader.batch.executors import DaskExecutor

    executor = DaskExecutor(2)
    executor.prepare({}, 2)
    executor._starting.join()
    cluster = executor._cluster
    assert not isinstance(cluster, Exception), cluster

    def upkeep(dask_worker):
        import dask

        return {"profile": "profile" in dask_worker.periodic_callbacks, "tick_s": dask_worker._tick_interval,
                "memory_monitor_s": dask_worker.memory_manager.memory_monitor_interval,
                "saturation": dask.config.get("distributed.scheduler.worker-saturation")}

    try:  # the cluster's own process (grader.batch.cluster_host), which the test talks to as the batch does
        with Client(cluster.scheduler_address) as client:
            seen = list(client.run(upkeep).values())
            saturation = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.WORKER_SATURATION)
    finally:
        cluster.close()
    assert len(seen) == 2 and all(s == {"profile": False, "tick_s": 0.5, "memory_monitor_s": 1.0, "saturation": 1.0}
                                  for s in seen), seen
    assert saturation == 1.0
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as plain, Client(plain) as client:
        assert list(client.run(upkeep).values())[0]["profile"] is True  # Dask's default: the profiler runs


def test_a_dask_batch_ranks_the_class_s_similar_pairs_too(dask_batch):
    """--similarity on Dask: each student's programs traced in the worker's sandbox and kept; the twins who
    handed in the reference's own files are said to equal the reference, not to have copied each other."""
    out = dask_batch["out"]
    kept = {path.stem for path in (out / ".similarity" / "programs").glob("*.json")}
    assert {"ada", "ada-twin", "bea", "cy"} <= kept
    ada = json.loads((out / ".similarity" / "programs" / "ada.json").read_text(encoding="utf-8"))
    assert "jaxpr" in ada["ex01_jit_forms"]["functions"]["softmax"]
    with (out / "similarity.csv").open(encoding="utf-8") as handle:
        pairs = {(row["student_a"], row["student_b"]): row for row in csv.DictReader(handle)}
    twins = pairs[("ada", "ada-twin")]
    assert twins["equals_reference"] == "yes"
    assert float(twins["source_score"]) == max(float(row["source_score"]) for row in pairs.values())
