"""The host: a child process that imports JAX once and forks one job per exercise.

Started by the grader (inside the sandbox, when there is one) as
``python -m grader.child.host CONTROL_FD CONFIG``. It imports JAX, NumPy, the allowed
standard-library modules and the modules its config names (the chapter's exercise
modules and their provided code), but never the student's code and never JAX's
backend (forking after the backend starts its threads is unsafe). Then it waits for
orders on its control socket:

* ``fork``: with two file descriptors (the job's socket and its output file), fork a
  job: the job drops to its own uid when given one, applies its limits, redirects its
  output, and runs :func:`grader.child.job.run`;
* ``dump``: have a job write its stack (it ran past its limit: where is it?); ``kill``: kill a job's
  process group; ``cores``: move itself and its jobs to other CPUs (:mod:`grader.affinity`);
* ``exit``: stop.

It reports ``ready`` once, and ``exited`` (with the wait status) for every job. A job
never sees the control socket: a student's code cannot give the host orders.

A *template* (:mod:`grader.child.template`) imports the same modules once and forks
hosts that run :func:`serve`, each starting clean.

The host is the *child subreaper* of everything it starts (``PR_SET_CHILD_SUBREAPER``):
a process a job leaves behind (a grandchild that called ``setsid`` and outlived its
parent, say) is handed to the host rather than to init, and the host ends every such
leftover when a job ends, and when it stops itself, in every sandbox. Since leftovers
carry no name of their job, one job's end ends the leftovers of the host's other jobs
too; they all belong to the same submission.

Its parts: what it imports once (:mod:`grader.child.preloading`), its loop of orders and
reaped children (:mod:`grader.child.orders`), the leftovers ended (:mod:`grader.child.leftovers`),
and a forked job's first moments (:mod:`grader.child.job_start`).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import sys
from enum import StrEnum

from grader import affinity as cores
from grader.child.job_start import become_job, flush_output
from grader.child.leftovers import become_subreaper
from grader.child.orders import signal_named, take_orders
from grader.child.preloading import preload_frozen
from grader.protocol import FromHost, ToHost, message, word_of


def begin(argv: list[str], orders: type[StrEnum] = ToHost) -> tuple:
    """What a host and a template do first (``argv``: the control socket's fd, the config in JSON):
    the control channel (it takes ``orders`` only), the subreaper, every module imported once;
    returns the channel, its fd and the versions imported."""
    control_fd = int(argv[0])
    config = json.loads(argv[1])
    from grader.wire import Channel

    control = Channel(socket.socket(fileno=control_fd), expects=orders)
    become_subreaper()
    return control, control_fd, preload_frozen(config.get("modules", []), config.get("chapter_folders", []))


def main(argv: list[str]) -> int:
    control, control_fd, versions = begin(argv)
    control.send(message(FromHost.READY, versions=versions, pid=os.getpid()))
    return serve(control, control_fd)


def address_space_kb(jobs: dict[int, str], named: str) -> int | None:
    """The most address space the job ``named`` has held (``VmPeak``, KiB), or ``None``.

    A big array's pages are reserved when it is made and filled afterwards, one fault at a time:
    a job stopped by its time limit while it filled them holds far more address space than
    resident memory (:func:`grader.verdicts.out_of_memory`). Read before the job is stopped: a
    process that ended has none to show."""
    for pid, name in jobs.items():
        if name == named:
            try:
                with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as status:
                    for line in status:
                        if line.startswith("VmPeak:"):
                            return int(line.split()[1])
            except (OSError, ValueError, IndexError):
                return None
    return None


def serve(control, control_fd: int) -> int:
    """A host's life: fork jobs on order until told to stop, then end them and what they left."""
    jobs: dict[int, str] = {}
    #: the most address space each job stopped at its limit had held (KiB), read as it was stopped
    reserved: dict[str, int] = {}

    def obey(order: dict, fds: list[int]) -> None:
        op = word_of(order, ToHost)
        if op is ToHost.FORK and len(fds) == 2:
            pid = os.fork()
            if pid == 0:
                become_job(order, fds[0], fds[1], control_fd)
            jobs[pid] = order["job"]
            control.send(message(FromHost.STARTED, job=order["job"], pid=pid))
        elif op is ToHost.DUMP:  # where is the job now? (it ran past its limit)
            held = address_space_kb(jobs, order["job"])
            if held is not None:
                reserved[order["job"]] = held
            signal_named(jobs, order["job"], os.kill, signal.SIGUSR1)
        elif op is ToHost.KILL:
            signal_named(jobs, order["job"], os.killpg, signal.SIGKILL)
            signal_named(jobs, order["job"], os.kill, signal.SIGKILL)
        elif op is ToHost.CORES:
            moved = cores.set_cores(jobs, list(order["cores"]), list(order.get("apart", ())))
            control.send(message(FromHost.CORES, job=ToHost.CORES.value, ok=moved))

    def exited(name: str, status: int, peak_kb: int, cpu_s: float) -> None:
        info = message(FromHost.EXITED, job=name, peak_rss_kb=peak_kb, cpu_s=cpu_s)
        if name in reserved:
            info["peak_vm_kb"] = reserved.pop(name)
        if os.WIFSIGNALED(status):
            info["signal"] = os.WTERMSIG(status)
        else:
            info["code"] = os.WEXITSTATUS(status)
        control.send(info)

    take_orders(control, 2, obey, jobs, exited, kill=os.killpg, stop=ToHost.EXIT)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    flush_output()
    # Every job is reaped: skip the interpreter's teardown (with JAX loaded it takes most of a second).
    os._exit(code)
