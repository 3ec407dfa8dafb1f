"""Where the gradings of a batch run: here, N at once (:class:`LocalExecutor`), or on a Dask
cluster (:class:`DaskExecutor`), a local one it starts or a running one it joins.

Both take the same work, a list of ``(name, payload)`` and the class's shipped
reference, and hand each result to ``on_result(name, result)`` in the calling thread
as it arrives. Each slot grades in a worker subprocess of its own, kept from one
student to the next (:class:`grader.batch.worker_process.WorkerProcess`). A Ctrl-C stops them
all (each worker stops what it started) and is raised again.
"""
from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Callable

from grader.batch.worker import failure
from grader.batch.worker_process import WorkerProcess, dask_task, dask_warm

OnResult = Callable[[str, dict], None]

#: a local cluster's settings. The scheduler gives each worker exactly as many tasks as it has threads
#: (saturation 1.0, see :class:`DaskExecutor`); and the cluster's own upkeep is quieted, since the
#: gradings, not the cluster, should have the cores: Dask's defaults cost an idle local cluster of two
#: workers about 0.1 of a core (measured: 1.9 core-seconds over 20 s of tasks that sleep, 0.54 with
#: these), most of it each worker's statistical profiler sampling every thread's stack every 10 ms
#: (``distributed/worker.py``, ``Worker.__init__``: ``distributed.worker.profile.enabled``, read
#: only by the dashboard), each server's event-loop tick every 20 ms and system monitor every
#: 500 ms (``distributed/core.py``, ``Server.__init__``: ``distributed.admin.tick.interval``,
#: ``distributed.admin.system-monitor.interval``), and each worker's memory monitor every 100 ms
#: (``distributed/worker_memory.py``, ``WorkerMemoryManager.__init__``: a grading's memory is
#: bounded by the limits of its own jobs, not by Dask's). A running cluster (``--scheduler``)
#: keeps its own settings.
LOCAL_CLUSTER = {
    "distributed.scheduler.worker-saturation": 1.0,
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "500ms",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
}


class LocalExecutor:
    """``jobs`` worker subprocesses at once on this machine, each pinned to its own cores and kept
    for one student after another (:class:`~grader.batch.worker_process.WorkerProcess`)."""

    def __init__(self, jobs: int):
        self.jobs = max(1, jobs)
        self._workers: list[WorkerProcess] = []
        self._ready: list[WorkerProcess] = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._left = 0  # students not yet handed to a worker

    def describe(self) -> str:
        return f"local, -j {self.jobs}"

    def prepare(self, payload: dict, tasks: int) -> None:
        """Start the workers (as many as will be busy) and their hosts now, for the tasks to come like
        ``payload`` (its chapter and sandbox), while the batch computes the reference."""
        for _ in range(min(self.jobs, tasks) - len(self._ready)):
            worker = WorkerProcess(self.jobs)
            worker.warm(payload)
            self._ready.append(worker)
            self._workers.append(worker)

    def run(self, tasks: list[tuple[str, dict]], reference: dict | None, timeout_s: float,
            on_result: OnResult) -> None:
        pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="batch")
        self._left = len(tasks)
        futures = {pool.submit(self._one, payload, reference, timeout_s): name for name, payload in tasks}
        try:
            for future in as_completed(futures):
                on_result(futures[future], future.result())
        except KeyboardInterrupt:
            self._stopping.set()
            for future in futures:
                future.cancel()
            for worker in list(self._workers):
                worker.interrupt()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for worker in self._workers:  # all told first: each stops its hosts while the others do
                worker.let_go()
            for worker in self._workers:
                worker.close()

    def stop(self) -> None:
        """The batch was interrupted (whether or not :meth:`run` had begun): every worker told to stop, then
        waited for (each stops its hosts; :meth:`WorkerProcess.close` removes the folder its scratch was
        mounted on). Interrupted while the reference ran, the workers :meth:`prepare` started were left to end
        with the batch, their folders in the system's temporary folder."""
        self._stopping.set()
        for worker in list(self._workers):
            worker.interrupt()
        for worker in list(self._workers):
            worker.close()

    def _one(self, payload: dict, reference: dict | None, timeout_s: float) -> dict:
        if self._stopping.is_set():
            return failure("interrupted", "interrupted")
        worker = getattr(self._local, "worker", None)
        if worker is None:  # this thread's worker (started by prepare, when it was), kept for its next students
            with self._lock:
                worker = self._ready.pop() if self._ready else None
                if worker is None:
                    worker = WorkerProcess(self.jobs)
                    self._workers.append(worker)
            self._local.worker = worker
            if self._stopping.is_set():
                worker.interrupt()
        with self._lock:
            self._left -= 1
        try:
            return worker.grade(payload, reference, timeout_s=timeout_s)
        finally:
            with self._lock:
                last = self._left == 0
            if last:  # no student left for it: it stops its hosts while the others grade their last
                worker.let_go()


class DaskExecutor:
    """Each submission a Dask task of its own: a local cluster of ``jobs`` workers, or the one at ``scheduler``.

    Every task has a distinct key (``pure=False``: two identical submissions are two
    students), is retried ``retries`` times when it fails, and one whose workers keep
    dying (``KilledWorker``) becomes that student's error row. The class's reference
    (about 100 kB for all of chapter 4) travels inside every task: the tasks depend on
    nothing, so the scheduler spreads them by load, and a dying worker takes no shared
    data with it. (As a task of their own that the gradings depended on, the scheduler
    queued gradings on the worker holding it, where one dying worker took its
    neighbours' tasks with it.) A local cluster gives each worker exactly as many tasks
    as it has threads (``worker-saturation`` 1.0), so no task waits on a worker that a
    classmate's task might bring down.
    """

    def __init__(self, jobs: int, scheduler: str | None = None, *, retries: int = 2, task: Callable = dask_task,
                 warm: Callable | None = dask_warm, on_dashboard: Callable[[str], None] | None = None):
        self.jobs = max(1, jobs)
        self.scheduler = scheduler
        self.retries = retries
        self.task = task
        #: run once on each worker of a local cluster before its first task (:meth:`_warm`)
        self.warm = warm
        #: told the address of the cluster's dashboard, once it is up
        self.on_dashboard = on_dashboard
        #: how many workers died while the batch ran (Dask ran their tasks again elsewhere)
        self.workers_lost = 0
        self._starting: threading.Thread | None = None
        self._cluster = None
        #: a local cluster's grading subprocesses started before the first task (:meth:`_warm`), by worker
        self.warmed: dict[str, int] = {}

    def describe(self) -> str:
        return f"dask, {self.scheduler}" if self.scheduler else f"dask, local cluster of {self.jobs} workers"

    def prepare(self, payload: dict, tasks: int) -> None:
        """Start the local cluster now (its workers import Dask) and, for tasks like ``payload`` (its
        chapter and sandbox), each worker's grading subprocess and hosts, while the batch computes
        the reference (as :class:`LocalExecutor` does)."""
        if self.scheduler is None and self._starting is None:
            self._starting = threading.Thread(target=self._start_cluster, args=(payload,), daemon=True,
                                              name="dask-cluster")
            self._starting.start()

    def _start_cluster(self, payload: dict | None = None) -> None:
        try:
            self._cluster = ClusterHost.start(self.jobs)
        except Exception as exc:  # noqa: BLE001 - raised again where the batch waits for the cluster
            self._cluster = exc
            return
        if payload and self.warm is not None:
            self.warmed = self._warm(self._cluster, payload)

    def _warm(self, cluster: "ClusterHost", payload: dict) -> dict[str, int]:
        """One :func:`~grader.batch.worker_process.dask_warm` task on each worker of the local cluster (one
        thread each, so the thread that runs it runs that worker's gradings): the process id of the
        grading subprocess each started, by worker address; nothing where it failed (the first task
        starts it then)."""
        from distributed import Client, wait

        try:
            with Client(cluster.scheduler_address, timeout="60s") as client:
                workers = client.scheduler_info().get("workers", {})
                host_slots = _host_slots(workers)
                futures = {address: client.submit(self.warm, payload, host_slots, workers=[address],
                                                  allow_other_workers=False, pure=False,
                                                  key=f"warm-{uuid.uuid4().hex[:12]}")
                           for address in workers}
                wait(list(futures.values()), timeout=60)
                return {address: future.result() for address, future in futures.items() if future.done()
                        and future.status == "finished"}
        except Exception:  # noqa: BLE001 - warming only saves time: the first task starts what it needs
            return {}

    def stop(self) -> None:
        """The batch was interrupted: nothing to do here. :meth:`run` cancels its tasks and closes the cluster; a
        cluster still starting closes itself as the batch ends (its host reads the batch's end on its standard
        input: :class:`ClusterHost`)."""

    def run(self, tasks: list[tuple[str, dict]], reference: dict | None, timeout_s: float,
            on_result: OnResult) -> None:
        from distributed import Client, as_completed as completed

        cluster = None
        if self.scheduler is None:
            self.prepare({}, len(tasks))
            self._starting.join()
            cluster, self._cluster, self._starting = self._cluster, None, None
            if isinstance(cluster, Exception):
                raise cluster
        client = Client(cluster.scheduler_address if cluster is not None else self.scheduler, timeout="60s")
        futures: dict = {}
        if self.on_dashboard is not None and client.dashboard_link:
            self.on_dashboard(client.dashboard_link)
        lost_before = _workers_lost(client)  # a running scheduler's record holds its earlier days too
        try:
            host_slots = _host_slots(client.scheduler_info().get("workers", {}))
            for name, payload in tasks:
                key = f"grade-{uuid.uuid4().hex[:12]}-{''.join(c if c.isalnum() else '_' for c in name)[:40]}"
                future = client.submit(self.task, payload, reference, host_slots, timeout_s, key=key,
                                       pure=False, retries=self.retries)
                futures[future] = name
            for future in completed(futures):
                on_result(futures[future], _result(future))
            self.workers_lost = _workers_lost(client) - lost_before
        except KeyboardInterrupt:
            client.cancel(list(futures), force=True)
            raise
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


class ClusterHost:
    """The batch's local Dask cluster, in a process of its own session (:mod:`grader.batch.cluster_host`): a
    Ctrl-C at the terminal reaches the batch, which stops the cluster (:meth:`close`), and none of the
    cluster's processes."""

    def __init__(self, proc: subprocess.Popen, scheduler_address: str):
        self.proc, self.scheduler_address = proc, scheduler_address

    @classmethod
    def start(cls, workers: int) -> "ClusterHost":
        """A cluster of ``workers`` workers with one thread each, under this process's Dask settings and
        :data:`LOCAL_CLUSTER`, once its scheduler listens; raises what kept it from starting."""
        import dask

        with dask.config.set(LOCAL_CLUSTER):
            request = pickle.dumps({"workers": workers, "config": dask.config.config, "sys_path": sys.path})
        # its standard error is the batch's: Dask's lines there with --verbose (grader.cli.batch.dask_logs)
        proc = subprocess.Popen([sys.executable, "-m", "grader.batch.cluster_host"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, start_new_session=True)
        try:
            proc.stdin.write(request)
            proc.stdin.flush()
            said = json.loads(proc.stdout.readline() or "{}")
        except (OSError, ValueError):
            said = {}
        if "address" not in said:
            cls._end(proc)
            raise RuntimeError(said.get("error") or f"the local Dask cluster ended as it started ({proc.returncode})")
        return cls(proc, said["address"])

    def close(self) -> None:
        """Close the cluster (its process closes it as its standard input closes) and wait for it."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._end(self.proc)

    @staticmethod
    def _end(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # it leads its session: the cluster's processes with it
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def _host_slots(workers: dict) -> dict[str, int]:
    """How many tasks each machine of the cluster runs at once (its workers' threads), by host name,
    from the scheduler's record of its workers: what each task's grading takes as its cores' share."""
    slots: Counter = Counter()
    for worker in workers.values():
        slots[worker.get("host", "")] += int(worker.get("nthreads", 1))
    return dict(slots)


def _workers_lost(client) -> int:
    """How many workers left the cluster unexpectedly (died) so far, from the scheduler's own record:
    ``Scheduler.remove_worker`` (distributed/scheduler.py) logs an ``all`` event ``remove-worker``
    with ``expected`` false for a worker that was not retired or closed on purpose."""
    try:
        events = client.get_events("all")
    except Exception:  # noqa: BLE001 - a scheduler that keeps no events: nothing to say
        return 0
    return sum(1 for _, event in events if isinstance(event, dict) and event.get("action") == "remove-worker"
               and not event.get("expected"))


def _result(future) -> dict:
    """A task's result; a task that failed for good is a crash row, saying why."""
    from distributed import KilledWorker

    try:
        return future.result()
    except KilledWorker:
        return failure("crash", "the Dask workers grading this submission kept dying (KilledWorker); "
                                "it was not graded")
    except Exception as exc:  # noqa: BLE001 - one student's row, never the batch
        return failure("crash", f"the Dask task failed: {type(exc).__name__}: {exc}")
