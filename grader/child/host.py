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
"""
from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import signal
import socket
import sys
import time
from enum import StrEnum
from typing import Callable

from grader import affinity as cores
from grader.child import confine, jax_setup
from grader.protocol import OP, FromHost, ToHost, message, word_of


def _preload(modules: list[str], chapter_folders: list[str]) -> dict:
    """Import what every job needs, so that forking is cheap and jobs import nothing of ours.

    ``modules``: the chapter's modules (exercise packages, provided code), found in
    ``chapter_folders`` when the chapter is not one of the grader's own.
    """
    for name in ("math", "functools", "itertools", "collections", "statistics", "time", "typing",
                 "dataclasses", "numbers", "operator", "contextlib", "abc", "enum", "re", "copy",
                 "random", "warnings", "traceback", "tempfile", "json", "string", "textwrap", "inspect",
                 "resource"):
        importlib.import_module(name)
    import numpy  # noqa: F401
    import jax
    import jax.numpy  # noqa: F401
    import jaxlib

    for name in ("jax.lax", "jax.random", "jax.nn", "jax.tree_util", "jax.extend", "jax.extend.core",
                 "jax.scipy", "jax.scipy.special", "jax.numpy.linalg", "jax.experimental", "jax.stages",
                 "jax.monitoring", "jax.errors", "jax.debug"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    from grader import chapters

    chapters.extend(chapter_folders)
    for name in ("grader.primitives.compiles", "grader.primitives.timing", "grader.primitives.instrument",
                 "grader.primitives.purity",
                 "grader.primitives.structure", "grader.primitives.numeric", "grader.child.guard",
                 "grader.child.job", "grader.child.compiler", *modules):  # a job's own code, imported once here
        importlib.import_module(name)  # everything a probe may use: the guard's snapshot must see it all
    from grader.primitives.compiles import COUNTER

    COUNTER.install()
    jax_setup.prepare_host()

    return {
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "jaxlib": getattr(jaxlib, "__version__", "?"),
    }


def preload_frozen(modules: list[str], chapter_folders: list[str]) -> dict:
    """:func:`_preload`, then everything it made frozen for the jobs to come (``gc.freeze``).

    Importing JAX leaves about 150 000 objects for the collector to track, all kept for
    good. Collecting while they are made finds nothing; frozen before the first fork, they
    are skipped by every job's collections, which would otherwise walk them all, and write
    to each of their pages (copying them from the host's memory into the job's).
    """
    gc.disable()
    try:
        return _preload(modules, chapter_folders)
    finally:
        gc.freeze()
        gc.enable()


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


XLA_DUMP = ".xla-dump"
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Have orphaned descendants handed to this process (Linux), so none escapes :func:`end_leftovers`."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children(pid: int) -> list[int]:
    """The children of process ``pid``, from /proc."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def kill_until_gone(find: Callable[[], list[int]], *, rounds: int = 50,
                    settle: Callable[[list[int]], None] | None = None) -> int:
    """SIGKILL the processes ``find()`` lists, round after round, until it lists none.

    ``settle(pids)`` waits between rounds (default: 10 ms). Returns how many were killed.
    """
    killed = 0
    for _ in range(rounds):
        pids = find()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        if settle is None:
            time.sleep(0.01)
        else:
            settle(pids)
    return killed


def end_leftovers(jobs: dict[int, str], rounds: int = 100) -> int:
    """SIGKILL every child of the host that is not a running job, until none is left.

    As the subreaper the host inherits what a killed leftover had started, so killing
    its children round after round ends the whole tree. Returns how many were killed.
    """
    me = os.getpid()

    def settle(strays: list[int]) -> None:
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline and any(p in _children(me) for p in strays):
            _reap_strays(jobs)
            time.sleep(0.005)

    return kill_until_gone(lambda: [pid for pid in _children(me) if pid not in jobs], rounds=rounds, settle=settle)


def _reap_strays(jobs: dict[int, str]) -> None:
    """Collect the exit of leftovers (not jobs: their exits are reported by :func:`_reap`)."""
    for pid in _children(os.getpid()):
        if pid in jobs:
            continue
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def _job_child(order: dict, job_fd: int, out_fd: int, control_fd: int) -> None:
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


def serve(control, control_fd: int) -> int:
    """A host's life: fork jobs on order until told to stop, then end them and what they left."""
    jobs: dict[int, str] = {}

    def obey(order: dict, fds: list[int]) -> None:
        op = word_of(order, ToHost)
        if op is ToHost.FORK and len(fds) == 2:
            pid = os.fork()
            if pid == 0:
                _job_child(order, fds[0], fds[1], control_fd)
            jobs[pid] = order["job"]
            control.send(message(FromHost.STARTED, job=order["job"], pid=pid))
        elif op is ToHost.DUMP:  # where is the job now? (it ran past its limit)
            signal_named(jobs, order["job"], os.kill, signal.SIGUSR1)
        elif op is ToHost.KILL:
            signal_named(jobs, order["job"], os.killpg, signal.SIGKILL)
            signal_named(jobs, order["job"], os.kill, signal.SIGKILL)
        elif op is ToHost.CORES:
            moved = cores.set_cores(jobs, list(order["cores"]), list(order.get("apart", ())))
            control.send(message(FromHost.CORES, job=ToHost.CORES.value, ok=moved))

    def exited(name: str, status: int, peak_kb: int, cpu_s: float) -> None:
        info = message(FromHost.EXITED, job=name, peak_rss_kb=peak_kb, cpu_s=cpu_s)
        if os.WIFSIGNALED(status):
            info["signal"] = os.WTERMSIG(status)
        else:
            info["code"] = os.WEXITSTATUS(status)
        control.send(info)

    take_orders(control, 2, obey, jobs, exited, kill=os.killpg, stop=ToHost.EXIT)
    return 0


def take_orders(control, max_fds: int, obey: Callable[[dict, list[int]], None], children: dict[int, str],
                exited: Callable[[str, int, int, float], None], *, kill: Callable[[int, int], None] = os.kill,
                stop: StrEnum = ToHost.EXIT) -> None:
    """Obey the grader's orders (``obey(message, fds)``; the fds are closed after it) until it says
    ``stop`` or goes; meanwhile collect each of ``children`` (pid: name) that ends (``exited(name,
    status, peak_kb, cpu_s)``, its peak resident memory in KiB and the CPU seconds it used) and end what
    it left behind. Then end every child still there (``kill(pid, SIGKILL)``) and every leftover. A
    child's end wakes it at once (``SIGCHLD``), so the grader hears of it without delay."""
    wake = _wake_on_child_exit()
    while True:
        try:
            if wake is not None and not control.buffered() and not _readable(control, wake):
                raise TimeoutError  # a child ended (or 50 ms passed): reap
            message, fds = control.recv_with_fds(max_fds, timeout=0.05)
        except TimeoutError:
            message, fds = "idle", []
        if message is None or (isinstance(message, dict) and message.get(OP) == stop):
            break
        if isinstance(message, dict):
            obey(message, fds)
        for fd in fds:
            os.close(fd)
        _reap(children, exited)
    for pid in list(children):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 2
    while children and time.monotonic() < deadline:
        _reap(children, exited)
        time.sleep(0.01)
    end_leftovers({})


#: the pipe a host's (or a template's) ``SIGCHLD`` writes to (:func:`_wake_on_child_exit`): its children close it
_WAKE: list[int] = []


def _wake_on_child_exit() -> int | None:
    """A pipe's read end that becomes readable when a child ends (``signal.set_wakeup_fd``); ``None`` where
    that cannot be set up (then the loop polls every 50 ms, as before)."""
    try:
        read, write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except (OSError, ValueError, AttributeError):
        return None
    _WAKE[:] = [read, write]
    return read


def forget_wakeup() -> None:
    """In a forked child: drop its parent's ``SIGCHLD`` wake-up (the handler and the pipe)."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    except (OSError, ValueError):
        pass
    for fd in _WAKE:
        try:
            os.close(fd)
        except OSError:
            pass
    _WAKE.clear()


def _readable(control, wake: int) -> bool:
    """Wait up to 50 ms for the grader's next order or a child's end; whether an order came (the pipe drained)."""
    import select

    ready, _, _ = select.select([control.sock, wake], [], [], 0.05)
    if wake in ready:
        try:
            while os.read(wake, 512):
                pass
        except OSError:
            pass
    return control.sock in ready


def signal_named(children: dict[int, str], named: str, send, number: int) -> None:
    """Send signal ``number`` to the child ``named`` (``send`` is ``os.kill``, or ``os.killpg`` for its group)."""
    for pid, name in list(children.items()):
        if name == named:
            try:
                send(pid, number)
            except (ProcessLookupError, PermissionError):
                pass


def _reap(children: dict[int, str], exited: Callable[[str, int, int, float], None]) -> None:
    """Collect the children that ended (``exited(name, status, peak_kb, cpu_s)``: the most memory it held, in
    KiB, and the CPU seconds it used, from the kernel's accounting), ending what each left behind."""
    while children:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        name = children.pop(pid, None)
        if name is None:
            continue  # a leftover that ended
        end_leftovers(children)  # what the child started ends with it
        try:
            exited(name, status, usage.ru_maxrss, usage.ru_utime + usage.ru_stime)
        except OSError:  # the grader is gone
            return


if __name__ == "__main__":
    code = main(sys.argv[1:])
    flush_output()
    # Every job is reaped: skip the interpreter's teardown (with JAX loaded it takes most of a second).
    os._exit(code)
