"""The local Dask cluster of ``grade batch --executor dask``, run in a session of its own:
``python -m grader.batch.cluster_host``.

A terminal's Ctrl-C is sent to its foreground process group. A ``distributed.LocalCluster`` started
inside the batch's process spawned its workers into that group, so a Ctrl-C reached each of them, and
each printed a ``KeyboardInterrupt`` traceback as it died (``asyncio.Runner`` in
``distributed/nanny.py``'s worker process raises it), while the batch itself was already stopping
them. Here the cluster runs in a process of its own session, with SIGINT ignored: its scheduler,
nannies and worker processes never see the terminal's Ctrl-C (an ignored signal stays ignored through
``fork`` and ``exec``, and Python then installs no handler of its own), and the batch ends them by
closing this process's standard input (:class:`grader.batch.executors.DaskExecutor`). A worker's
grading process takes Ctrl-C again (:func:`grader.batch.worker.main`): it stops when its worker dies.

On standard input, a pickled dict: ``workers`` (how many), ``config`` (the batch's Dask settings, which
the scheduler and the workers then read: :data:`grader.batch.executors.LOCAL_CLUSTER` and the caller's
own) and ``sys_path`` (the batch's, where the scheduler and the workers import what a task names, as in
a cluster started in the batch's process). On standard output, one JSON line: ``{"address": ...}``, or
``{"error": ...}`` where the cluster did not start (where the batch is gone by then, nothing, and it closes the
cluster: ``_say``). Then it waits for its standard input to close (the
batch is done, or gone: a process's pipes close as it dies, however it dies), and closes the cluster.
(Not ``PR_SET_PDEATHSIG``: it fires when the *thread* that started this process ends, and the batch
starts it from a thread of its own that ends at once.)
"""
from __future__ import annotations

import json
import os
import pickle
import signal
import sys


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the batch's Ctrl-C is the batch's to handle
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the cluster closed on the way out
    request = pickle.load(sys.stdin.buffer)
    sys.path[:] = request["sys_path"]  # the batch's, as multiprocessing gives a process it spawns
    import dask
    from distributed import LocalCluster

    dask.config.update(dask.config.config, request["config"], priority="new")
    # its logging: where the batch configured it for its cluster's processes (grader.cli.batch.dask_logs: Dask's
    # log file, and standard error, which this process shares with the batch, with --verbose), as configured;
    # else Dask's own lines quieted below warnings, as a local cluster in the batch's process had them
    configured = bool(os.environ.get("DASK_DISTRIBUTED__LOGGING"))
    try:
        cluster = LocalCluster(n_workers=request["workers"], threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=False if configured else 40)
    except Exception as exc:  # noqa: BLE001 - said to the batch, which raises it where it waits for the cluster
        _say({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    try:
        if _say({"address": cluster.scheduler_address}):
            sys.stdin.buffer.read()  # until the batch closes it, or ends
    finally:
        cluster.close(timeout=20)
    return 0


def _say(line: dict) -> bool:
    """Write ``line`` to the batch; ``False`` where the batch is gone (Ctrl-C'd as the cluster started: it stopped
    reading, and a ``BrokenPipeError`` traceback on the standard error it shares with the batch was the last thing
    the user saw). Standard output then points at ``/dev/null``, so that Python's flush at exit says nothing either."""
    try:
        print(json.dumps(line), flush=True)
        return True
    except (BrokenPipeError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return False


if __name__ == "__main__":
    sys.exit(main())
