"""The instructor's terminal during ``grade batch --executor dask`` (issue 25), on a real
``distributed.LocalCluster``: Dask's own INFO lines (the scheduler starting, workers
registering, nannies closing, a hint to install jupyter-server-proxy) go to ``OUT/dask.log``,
not through the progress; the dashboard's address is one line; a worker that dies while the
batch runs is said in one line, every student graded all the same.

The terminal is read at the file descriptors (``capfd``): what the cluster's processes write
is caught too.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import STUBS, make_submission

from grader.cli import main

distributed = pytest.importorskip("distributed", reason="Dask is in the batch extra: pip install -e '.[batch]'")
pytestmark = pytest.mark.slow

#: what Dask says at INFO while a local cluster starts, runs and stops (distributed's own words)
DASK_WORDS = ("State start", "Registering Worker plugin", "Nanny", "jupyter-server-proxy", "Scheduler at",
              "Register worker", "Remove worker", "Receive client connection", "Lost all workers")


def _class(root: Path, names=("ada", "bea")) -> Path:
    klass = root / "class"
    for name in names:
        made = make_submission(root / f".{name}", base=STUBS)
        klass.mkdir(parents=True, exist_ok=True)
        made.rename(klass / name)
    return klass


def _batch(klass: Path, out: Path, *extra: str) -> int:
    return main(["batch", str(klass), "--chapter", "ch4", "--out", str(out), "--executor", "dask", "-j", "2",
                 "-k", "1", "--seed", "5", "--sandbox", "process", "--allow-weak-sandbox", "--lang", "en", *extra])


def test_dask_logs_go_to_a_file_and_the_dashboard_is_one_line(tmp_path, capfd):
    out = tmp_path / "results"
    assert _batch(_class(tmp_path), out) == 0
    captured = capfd.readouterr()
    terminal = captured.out + captured.err
    leaked = [line for line in terminal.splitlines() if any(word in line for word in DASK_WORDS)]
    assert leaked == [], "\n".join(leaked)  # it was 30-odd lines for two students
    ours = [line for line in captured.err.splitlines() if line.strip()]
    dashboards = [line for line in ours if "dashboard" in line]
    assert len(dashboards) == 1 and re.search(r"Dask's dashboard: https?://\S+ \(Dask's own log: "
                                               + re.escape(str(out / "dask.log")), dashboards[0]), ours
    assert [line for line in ours if line.startswith("[")] and len(ours) == 2 + 1 + 2, ours  # plan, dashboard, rows
    log = (out / "dask.log").read_text(encoding="utf-8")
    assert "State start" in log and "Registering Worker plugin shuffle" in log
    assert main(["verify", str(out)]) == 0  # the log is the batch's own, not a file it did not write


def test_verbose_shows_dask_logs_on_the_terminal(tmp_path):
    import subprocess
    import sys

    klass = _class(tmp_path, ("ada",))
    run = subprocess.run([sys.executable, "-c", "import sys; from grader.cli import main; sys.exit(main())", "batch",
                          str(klass), "--chapter", "ch4", "--out", str(tmp_path / "results"), "--executor", "dask",
                          "-j", "1", "-k", "1", "--seed", "5", "--sandbox", "process", "--allow-weak-sandbox",
                          "--lang", "en", "--verbose"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "State start" in run.stderr and "Registering Worker plugin shuffle" in run.stderr
    assert "State start" in (tmp_path / "results" / "dask.log").read_text(encoding="utf-8")  # and in the file


def _dies_once(marker: str):
    """A Dask task that kills its worker the first time it is given ``ada``, then grades as usual."""
    from grader.batch.worker_process import dask_task

    def task(payload, reference, host_slots, timeout_s):
        if payload["name"] == "ada" and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return dask_task(payload, reference, host_slots, timeout_s)

    return task


def test_a_worker_that_dies_mid_batch_is_one_line_and_every_student_is_graded(tmp_path, capfd, monkeypatch):
    import grader.batch.run
    from grader.batch.executors import DaskExecutor

    marker = tmp_path / "died-once"
    monkeypatch.setattr(grader.batch.run, "make_executor",
                        lambda options: DaskExecutor(options.jobs, options.scheduler, task=_dies_once(str(marker))))
    out = tmp_path / "results"
    assert _batch(_class(tmp_path), out) == 0
    err = capfd.readouterr().err
    assert marker.exists()  # a worker did die
    said = [line for line in err.splitlines() if "died" in line]
    assert said == ["1 Dask worker(s) died during the batch; Dask graded their students again on the others: "
                    "2 of 2 graded to the end"], err
    assert (out / "ada" / "report.partial.json").exists() and (out / "bea" / "report.partial.json").exists()
    assert not [line for line in err.splitlines() if any(word in line for word in DASK_WORDS)]


def _worker_says(text: str) -> str:
    import logging

    logging.getLogger("distributed.worker").error(text)
    return text


def test_what_a_workers_own_process_logs_goes_to_the_file_too(tmp_path, capfd):
    """A local cluster's workers are processes of their own: under load a worker logs ERROR lines such
    as "Failed to communicate with scheduler during heartbeat" while the cluster closes, from its own
    logging (distributed/config.py, initialize_logging, run when the worker process imports Dask). They
    reached the terminal through the progress before the workers' logging was given the file too."""
    from distributed import Client, LocalCluster

    from grader.cli.batch import dask_logs

    log = tmp_path / "dask.log"
    with dask_logs(log, verbose=False, dask=True):
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=40) as cluster, Client(cluster) as client:
            assert client.submit(_worker_says, "a worker's own error line", pure=False).result() \
                == "a worker's own error line"
    captured = capfd.readouterr()
    assert "a worker's own error line" not in captured.out + captured.err
    assert "distributed.worker ERROR a worker's own error line" in log.read_text(encoding="utf-8")


def _says_its_grading_process(payload, reference, host_slots, timeout_s):
    """The real task, and the grading subprocesses its Dask worker's thread has (their process ids)."""
    from grader.batch import worker_process as worker

    result = worker.dask_task(payload, reference, host_slots, timeout_s)
    return {**result, "grading_pids": sorted(p.proc.pid for p in worker._DASK_WORKERS.values() if p.proc is not None)}


def test_each_dask_worker_grades_in_the_process_it_started_while_the_reference_ran(tmp_path, monkeypatch):
    """A local cluster's workers start their grading subprocess and its hosts while the batch computes
    the reference (one ``dask_warm`` task each, as ``-j 2`` starts its workers), and every student is
    then graded by the very process so started: one per worker, none started twice. Without the warm
    tasks the first student of each worker waited for three JAX imports after the reference's run."""
    import cloudpickle

    import grader.batch.run
    import test_batch_dask_terminal
    from grader.batch.executors import DaskExecutor

    cloudpickle.register_pickle_by_value(test_batch_dask_terminal)  # the workers cannot import this test module
    made: list[DaskExecutor] = []
    monkeypatch.setattr(grader.batch.run, "make_executor", lambda options: made.append(
        DaskExecutor(options.jobs, options.scheduler, task=_says_its_grading_process)) or made[-1])
    seen: list = []
    store = grader.batch.run._store
    monkeypatch.setattr(grader.batch.run, "_store",
                        lambda name, outcome, *rest: (seen.append(outcome.get("grading_pids"))
                                                      or store(name, outcome, *rest)))
    assert _batch(_class(tmp_path, names=("ada", "bea", "cy", "dee")), tmp_path / "results") == 0
    warmed = set(made[0].warmed.values())
    assert len(made[0].warmed) == 2 and len(warmed) == 2 and 0 not in warmed, made[0].warmed
    assert len(seen) == 4 and all(pids is not None and len(pids) == 1 and set(pids) <= warmed for pids in seen), \
        (seen, warmed)


def _in_session(sid: int) -> set[int]:
    """The living processes of session ``sid`` (the cluster's process leads its own), from /proc."""
    found = set()
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.add(int(entry))
    return found


def test_a_cluster_whose_batch_is_gone_as_it_starts_closes_without_a_traceback():
    """Ctrl-C while the local cluster starts: the batch stops reading its address (tests/test_ctrl_c.py, under load,
    caught the cluster's ``BrokenPipeError`` traceback on the batch's standard error, after the batch's own line).
    Its process (grader.batch.cluster_host, as ClusterHost.start runs it) finds the pipe closed, says nothing, closes
    the cluster and ends: status 0, no traceback, no process of its session left."""
    import pickle
    import subprocess
    import sys
    import time

    import dask

    from grader.batch.executors import LOCAL_CLUSTER

    with dask.config.set(LOCAL_CLUSTER):
        request = pickle.dumps({"workers": 1, "config": dask.config.config, "sys_path": sys.path})
    proc = subprocess.Popen([sys.executable, "-m", "grader.batch.cluster_host"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        proc.stdin.write(request)
        proc.stdin.flush()
        proc.stdout.close()  # the batch, interrupted, reads no address
        _, err = proc.communicate(timeout=120)  # its standard input stays open: it ends of itself
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    assert proc.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()[-2000:]
    deadline = time.monotonic() + 10
    while _in_session(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _in_session(proc.pid), "the cluster's processes outlived it"
