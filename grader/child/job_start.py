"""A job's first moments, in the process the host forked: it leaves the host's control socket and
wake-up behind, takes its own session, output file and limits (:func:`tasks_of_user` for a job with the
user's uid), a ``/tmp`` of its own, its uid, its folder and environment, then hands over to the job
runner (:func:`grader.child.job.run`). Never returns (:func:`become_job`)."""
from __future__ import annotations

import os
import signal
import socket
import sys

from grader.child import confine
from grader.child.orders import forget_wakeup

#: the folder, in a student's job's own, where XLA writes every module it compiles (the grader counts them)
XLA_DUMP = ".xla-dump"


def _apply_limits(limits: dict) -> None:
    import resource

    table = {
        "cpu_s": resource.RLIMIT_CPU,
        "fsize_bytes": resource.RLIMIT_FSIZE,
        "nofile": resource.RLIMIT_NOFILE,
        "core": resource.RLIMIT_CORE,
        "nproc": resource.RLIMIT_NPROC,
    }
    for key, which in table.items():
        value = limits.get(key)
        if value is None:
            continue
        value = int(value)
        if key == "nproc" and limits.get("nproc_beyond_user"):
            value += tasks_of_user(os.getuid())
        try:
            _soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass


def tasks_of_user(uid: int, proc_root: str = "/proc") -> int:
    """How many tasks (processes and threads) user ``uid`` runs now, as ``RLIMIT_NPROC`` counts them.

    A job without a uid of its own (the grader not root) shares its user's count with everything the
    user runs: a desktop's 300 to 1500 threads, the grading's other jobs. Its limit is set this many
    above what it may start itself, so a fork storm is still stopped, and the user's other threads
    cost the job nothing. Only processes whose ``status`` can be read are counted (all of the user's)."""
    count = 0
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc_root, entry, "status"), "rb") as status:
                head = status.read(4096)
        except OSError:
            continue
        real = threads = None
        for line in head.split(b"\n"):
            if line.startswith(b"Uid:"):
                real = int(line.split()[1])
            elif line.startswith(b"Threads:"):
                threads = int(line.split()[1])
        if real == uid:
            count += threads or 1
    return count


def _drop_privileges(uid: int | None, gid: int | None, groups: list[int] | None = None) -> None:
    """Become ``uid`` (group ``gid``, else ``uid``); ``groups``: the grading's group, which alone may
    enter its scratch folder (:attr:`grader.grading.Grading.group`)."""
    if uid is None:
        return
    os.setgroups([int(g) for g in groups or []])
    os.setgid(gid if gid is not None else uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise RuntimeError("could not drop privileges")

def become_job(order: dict, job_fd: int, out_fd: int, control_fd: int) -> None:
    """In the forked job: become the job, then hand over to the job runner. Never returns."""
    code = 70
    try:
        os.close(control_fd)
        forget_wakeup()
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        for fd in (devnull, out_fd):
            if fd > 2:
                os.close(fd)
        _unbuffered_output()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        _apply_limits(order.get("limits", {}))
        options = order.get("options") or {}
        if order.get("side") == "student" and order.get("uid") is not None and not options.get("on_device"):
            # a /tmp of its own (root, or bubblewrap's root, alone may mount: an ordinary user's job shares the
            # host's); a device's jobs keep the machine's, where its runtime's lock file is
            confine.private_tmp([order["workdir"], order.get("module_dir") or "", *sys.path,
                                 options.get("compile_cache") or "", *(options.get("compile_cache_read") or [])])
        _drop_privileges(order.get("uid"), order.get("gid"), order.get("groups"))
        if order.get("side") == "student":
            os.umask(0o077)  # what it writes is its own uid's alone (another job's code reads none of it)
            confine.no_disk_reservations()  # no fallocate: the disk limit holds for reserved blocks too
        os.chdir(order["workdir"])
        os.environ["HOME"] = order["workdir"]
        os.environ["TMPDIR"] = order["workdir"]
        if order.get("side") == "student":  # XLA writes every module it compiles here, from C++,
            # and the grader counts them itself (the reference and the class's compiler run no student code)
            os.environ["XLA_FLAGS"] = f"--xla_dump_to={os.path.join(order['workdir'], XLA_DUMP)}"
        from grader.child import job

        job.run(order, socket.socket(fileno=job_fd))
        code = 0
    except BaseException:  # noqa: BLE001 - whatever happens, the job ends here
        import traceback

        try:
            sys.stderr.write("grader job failed to start:\n" + traceback.format_exc())
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        flush_output()
        os._exit(code)


def _unbuffered_output() -> None:
    """Python's streams write straight to the job's output file, so nothing printed is lost: a job
    ends with ``os._exit`` (so may a student's code, or crash), and what a buffer held would be lost."""
    import io

    for fd, name in ((1, "stdout"), (2, "stderr")):
        stream = io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  line_buffering=True, write_through=True)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def flush_output() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - a closed or replaced stream
            pass

