"""A batch worker (``python -m grader.batch.worker``) never outlives what started it, and leaves nothing as it goes.

Seen in CI, in the batch Ctrl-C test on a local Dask cluster: a worker still there, its parent ``init``, after the
batch had ended; a worker's scratch folder left with no worker naming it; and the next batch of the suite (``-j 1``,
all the cores) waiting ten minutes for the core the stray worker held. A Dask worker stopped as its cluster closes
may die in the moment it starts a worker, before the worker asks to be stopped with its parent
(``PR_SET_PDEATHSIG``, which a parent already dead never sends); and the parent's death arriving while a worker
wound up cut its winding-up short.
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT

from grader.batch import worker, worker_process
from grader.protocol import ToWorker, message


def _held_cores(folder: Path) -> list[int]:
    """Every core's lock taken in ``folder`` (as another grading holding them would): a worker that asks for a slot
    waits (:func:`grader.batch.cpus.acquire`)."""
    from grader.batch import cpus

    fds = []
    for core in cpus.machine_cpus():
        fd = os.open(folder / f"cpu-{core}.lock", os.O_CREAT | os.O_RDWR, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fds.append(fd)
    return fds


def _warm_order() -> bytes:
    order = message(ToWorker.WARM, chapter="ch4", options={"sandbox": "auto"}, slots=1)
    return (json.dumps(order) + "\n").encode()


def _waiting_worker(tmp_path: Path, parent: int) -> tuple[subprocess.Popen, list[int]]:
    """A worker started by hand, told that ``parent`` started it, in ``tmp_path`` (its scratch named there), warmed
    with every core's lock held elsewhere; its pipe stays open. The worker and the locks' descriptors."""
    locks = tmp_path / "locks"
    locks.mkdir()
    fds = _held_cores(locks)
    env = {**os.environ, worker.PARENT_ENV: str(parent), "GRADER_CPU_LOCK_DIR": str(locks), "TMPDIR": str(tmp_path),
           worker.SCRATCH_ENV: str(tmp_path / "grade-worker-named")}
    proc = subprocess.Popen([sys.executable, "-m", "grader.batch.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    proc.stdin.write(_warm_order())
    proc.stdin.flush()
    return proc, fds


def _ends_interrupted(proc: subprocess.Popen, fds: list[int], tmp_path: Path, what: str) -> None:
    """The worker ends within 20 s with the status of an interrupted one and leaves no scratch folder; the cores'
    locks and its pipe are let go whatever happened."""
    try:
        code = _ends_within(proc, 20)
    finally:
        for fd in fds:
            os.close(fd)
        proc.stdin.close()
    assert code == worker.INTERRUPTED, f"{what} ({code}): {proc.stderr.read()[-1500:]!r}"
    assert not list(tmp_path.glob("grade-worker-*"))


def _ends_within(proc: subprocess.Popen, seconds: float) -> int | None:
    try:
        return proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


def test_a_worker_whose_parent_died_before_it_asked_to_follow_it_ends_at_once(tmp_path):
    """The worker is told its parent's process id; a parent already gone when the worker asks to be stopped with it
    (here a process id that is not its parent: its parent ``init`` or a subreaper, as after the death) ends it at
    once, its scratch folder unmade. Without the check it read the warm order on its pipe and waited for a slot of
    cores held elsewhere (ten minutes), then started hosts for nobody."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    proc, fds = _waiting_worker(tmp_path, dead.pid)  # its pipe stays open: only the parent's death can end it
    _ends_interrupted(proc, fds, tmp_path, "the orphaned worker went on")


def test_a_worker_whose_parent_is_alive_goes_on(tmp_path):
    """The same worker, its parent named rightly (this test's process): it waits for its slot, as it should; a
    Ctrl-C then ends it, and it leaves no scratch folder (run as root, it made one: a worker killed here instead
    left one in the system's temporary folder at each run)."""
    proc, fds = _waiting_worker(tmp_path, os.getpid())
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        pass
    alive = proc.poll() is None
    proc.send_signal(signal.SIGINT)
    _ends_interrupted(proc, fds, tmp_path, "the worker ended before the Ctrl-C, or not on it")
    assert alive, "a worker whose parent lives ended by itself"


def test_a_worker_whose_parent_dies_as_it_starts_ends_with_it(tmp_path):
    """The real sequence: a parent starts a worker as a batch does, warms it, and dies at once (as a Dask worker
    stopped by its nanny), with every core held elsewhere. The worker ends within seconds, whichever came first,
    its request to follow its parent or the parent's death, and leaves no scratch folder."""
    locks = tmp_path / "locks"
    locks.mkdir()
    fds = _held_cores(locks)
    script = ("import os, sys\nfrom grader.batch.worker_process import WorkerProcess\n"
              "p = WorkerProcess(1)\np.warm({'chapter': 'ch4', 'options': {'sandbox': 'auto'}})\n"
              "print(p.proc.pid, flush=True)\nos._exit(0)\n")
    env = {**os.environ, "GRADER_CPU_LOCK_DIR": str(locks), "TMPDIR": str(tmp_path)}
    parent = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60)
    pid = int(parent.stdout.split()[0])
    try:
        deadline = time.monotonic() + 15
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "the worker outlived the parent that started it by 15 s"
    finally:
        for fd in fds:
            os.close(fd)
        if _alive(pid):
            os.kill(pid, 9)
    assert not list(tmp_path.glob("grade-worker-*"))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


WINDING_UP = """
import os, signal, sys, time
from pathlib import Path
from grader.batch import worker

folder = Path(sys.argv[1])
folder.mkdir()
os.environ[worker.SCRATCH_ENV] = str(folder)
signal.signal(signal.SIGINT, signal.default_int_handler)


class Hosts:
    def close(self):  # the parent dies while the hosts stop: its signal comes now
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.3)


worker._wind_up(Hosts(), None)
print("wound up")
"""


def test_an_interrupt_while_a_worker_winds_up_does_not_cut_it_short(tmp_path):
    """A Ctrl-C (the parent's death) as the worker stops its hosts: it still removes its scratch folder. Before, the
    interrupt raised in the middle of stopping the hosts skipped the rest, and the folder stayed."""
    folder = tmp_path / "grade-worker-x"
    run = subprocess.run([sys.executable, "-c", WINDING_UP, str(folder)], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and "wound up" in run.stdout, run.stderr[-1500:]
    assert not folder.exists()


def test_a_closed_worker_process_starts_no_worker_again(tmp_path, monkeypatch):
    """Closed (a Dask worker's exit closes its grading processes), it starts none: a task thread that asked for one
    after it was closed started a worker that nobody would stop."""
    started = []
    monkeypatch.setattr(worker_process.WorkerProcess, "_start", lambda self: started.append(1))
    process = worker_process.WorkerProcess(1)
    process.close()
    process.warm({"chapter": "ch4", "options": {"sandbox": "auto"}})
    result = process.grade({"name": "ann"}, None, timeout_s=5)
    assert started == [] and process.proc is None
    assert result["status"] == "interrupted"
