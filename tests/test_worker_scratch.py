"""A batch worker's scratch in memory (``grader.batch.worker.private_scratch``): a tmpfs mounted in the worker's
own mount namespace, on a folder of the system's temporary folder. The tmpfs goes with the worker however it
ends; the folder it was mounted on does not, and a worker that was killed (a hung student past its time, a
crash, the batch's Ctrl-C escalated) cannot remove it: three to six empty ``grade-worker-*`` folders were left in
``/tmp`` by each run of this suite. The batch now names the folder, the worker makes it and removes it as it ends,
and the batch removes it once the worker has ended (where the worker was killed first). The batch does not make it
itself: a Dask worker stopped in the moment it started a worker left a folder nobody removed.
"""
from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from grader.batch import worker_process as workers

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the worker mounts its scratch in memory only as root")


def _mounted_in(pid: int, folder: Path) -> bool:
    try:
        return any(line.split()[4] == str(folder) for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines())
    except OSError:
        return False


def _worker_with_scratch(tmp_path: Path, monkeypatch) -> tuple[workers.WorkerProcess, Path]:
    """A worker started as a batch starts it, the system's temporary folder being ``tmp_path``; once its scratch
    is mounted, the worker and the folder it is mounted on."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    process = workers.WorkerProcess()
    process.proc = process._start()
    deadline = time.monotonic() + 30
    while True:
        folders = list(tmp_path.glob("grade-worker-*"))
        if len(folders) == 1 and _mounted_in(process.proc.pid, folders[0]):
            return process, folders[0]
        assert process.proc.poll() is None, "the worker ended before it mounted its scratch"
        assert time.monotonic() < deadline, "the worker never mounted its scratch"
        time.sleep(0.02)


def test_a_killed_workers_scratch_folder_is_removed(tmp_path, monkeypatch):
    process, folder = _worker_with_scratch(tmp_path, monkeypatch)
    assert not _mounted_in(os.getpid(), folder), "the worker's tmpfs is seen outside its mount namespace"
    os.killpg(process.proc.pid, signal.SIGKILL)  # as a hung student's worker is stopped
    process._end(None)
    assert not folder.exists(), "the folder of a killed worker's scratch was left behind"
    assert list(tmp_path.iterdir()) == []


def test_a_worker_that_finishes_leaves_nothing(tmp_path, monkeypatch):
    process, folder = _worker_with_scratch(tmp_path, monkeypatch)
    process.close()  # no student left: it stops its hosts, unmounts its scratch and ends
    assert process.proc is None
    assert list(tmp_path.iterdir()) == []


def test_a_worker_started_again_after_a_crash_gets_a_folder_of_its_own(tmp_path, monkeypatch):
    process, first = _worker_with_scratch(tmp_path, monkeypatch)
    process.proc.kill()
    process.proc.wait()
    process.proc = process._start()  # as grade() starts the next one when the last has died
    assert not first.exists(), "the dead worker's folder was left when the next one started"
    process.close()
    assert list(tmp_path.iterdir()) == []


def test_a_worker_whose_start_was_interrupted_leaves_no_folder(tmp_path, monkeypatch):
    """A Ctrl-C inside ``subprocess.Popen`` as the batch starts a worker: ``proc`` is never set, and a folder the batch
    made for the worker's scratch was left (seen in the full suite: a batch Ctrl-C'd at its first process, 2 runs in
    2). The batch only names it now: nothing is made before the worker runs."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(workers.subprocess, "Popen", interrupted)
    process = workers.WorkerProcess()
    with pytest.raises(KeyboardInterrupt):
        process.warm({})
    assert process.proc is None and list(tmp_path.glob("grade-worker-*")) == []
    process.interrupt()
    process.close()  # as the batch's executor stops it
    assert list(tmp_path.iterdir()) == []
