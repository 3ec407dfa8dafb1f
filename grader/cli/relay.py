"""The ``grade`` command's first step: hand the command to the user's warm command, where one runs
(:mod:`grader.cli.command_server`), and relay what it says; :func:`through_warm_command`.

A ``grade`` spends about 0.3 s of a 2-core laptop's CPU importing its own modules (click, NumPy, the
grader's) before it reads a file, and about 0.4 s before its first job starts: a fifth of a student's next
grading once the warm service holds the hosts. The warm command is a process of the user's own, started
beside the warm service, that has imported them; it forks a child for each ``grade PATH`` it is handed,
which takes over the command's terminal (its standard input, output and error, passed over the socket),
its folder, environment, umask and limits, runs the command as ``grade`` would, and says how it ended.

This module is what runs first, so it imports nothing heavy: ``os``, ``socket``, ``json``, ``signal``. It
serves the student's commands (``grade PATH ...``, watch mode too; not ``grade dev``, which manages the
service, nor ``grade batch``). Anything amiss before the child has started (no warm command, another Python
or grader, another environment where it matters, its code changed since it started) and the command runs
here, as it always did; ``GRADER_WARM_S=0`` turns it off. Once started, Ctrl-C, SIGTERM, SIGHUP and SIGQUIT
sent to this process are sent on to the child's process group (where its hosts are, as in the terminal's
own process group), Ctrl-Z stops it with this process, and this process ends with the child's status.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

#: whether this process is a command the warm command runs (set in its child; the report's timings say so)
SERVED = [False]
#: the commands not handed over: they manage the service itself, or many processes of their own
NOT_SERVED = ("dev", "batch")
#: the environment that must be the warm command's own (read as modules are imported, or how Python started);
#: every other variable is the command's own in the child
MUST_MATCH = ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE", "PYTHONUSERBASE", "PYTHONUTF8",
              "PYTHONIOENCODING", "PYTHONWARNINGS", "PYTHONDONTWRITEBYTECODE", "LANG", "LC_ALL", "LC_CTYPE",
              "TMPDIR", "LD_LIBRARY_PATH", "LD_PRELOAD")
MUST_MATCH_PREFIXES = ("GRADER_", "JAX_", "XLA_", "TPU_", "OPENBLAS_", "OMP_", "MKL_")
#: the limits the child takes from the command (``resource``'s names)
LIMITS = ("RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_CORE", "RLIMIT_CPU",
          "RLIMIT_FSIZE", "RLIMIT_STACK")
#: the most a message may be (an environment of a few kilobytes; the child's words are tiny)
MAX_MESSAGE = 1 << 20
#: how long the command waits for the warm command to fork its child and say it started
START_S = 5.0


def matters(name: str) -> bool:
    """Whether the environment variable ``name`` must be the same in the command and the warm command."""
    return name in MUST_MATCH or name.startswith(MUST_MATCH_PREFIXES)


def served(argv: list[str]) -> bool:
    """Whether ``grade ARGV`` is handed to the warm command: a path to grade first, not a verb of its own."""
    return bool(argv) and argv[0] not in NOT_SERVED and os.path.exists(argv[0])


# The framing is grader.wire's (a 4-byte big-endian length, then JSON), written again here in a few lines:
# grader.wire imports NumPy for the arrays a job sends, which is most of what this module exists to spare.
def send(sock: socket.socket, said: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(said).encode("utf-8")
    frame = struct.pack(">I", len(data)) + data
    if fds:
        sent = socket.send_fds(sock, [frame], fds)
        sock.sendall(frame[sent:])
    else:
        sock.sendall(frame)


def recv(sock: socket.socket, fds: int = 0) -> tuple[dict | None, list[int]]:
    """The next message (``None`` at the end), with up to ``fds`` descriptors passed with it."""
    head, got = b"", []
    while len(head) < 4:
        if fds and not head:
            data, got, _flags, _addr = socket.recv_fds(sock, 4, fds)
        else:
            data = sock.recv(4 - len(head))
        if not data:
            return None, got
        head += data
    size = struct.unpack(">I", head)[0]
    if size > MAX_MESSAGE:
        raise OSError(f"a message of {size} bytes")
    body = b""
    while len(body) < size:
        data = sock.recv(size - len(body))
        if not data:
            return None, got
        body += data
    said = json.loads(body.decode("utf-8"))
    return (said if isinstance(said, dict) else None), got


def _stdio() -> dict:
    """How this Python writes and reads its standard streams, for the child to do the same."""
    found = {}
    for name in ("stdin", "stdout", "stderr"):
        stream = getattr(sys, name)
        found[name] = {"encoding": getattr(stream, "encoding", None) or "utf-8",
                       "errors": getattr(stream, "errors", None) or "strict",
                       "line_buffering": bool(getattr(stream, "line_buffering", False))}
    return found


def _limits() -> dict:
    import resource

    found = {}
    for name in LIMITS:
        number = getattr(resource, name, None)
        if number is not None:
            found[name] = list(resource.getrlimit(number))
    return found


def cgroup() -> str:
    """The control groups this process is in (``/proc/self/cgroup``): its CPU and memory limits."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""


def request(argv: list[str]) -> dict:
    """What the child needs to be this command (see :mod:`grader.cli.command_server`)."""
    import grader

    umask = os.umask(0)
    os.umask(umask)
    return {"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ), "umask": umask,
            "executable": sys.executable, "version": sys.version, "prefix": sys.prefix,
            "grader": os.path.dirname(os.path.abspath(grader.__file__)), "stdio": _stdio(), "limits": _limits(),
            "cpus": sorted(os.sched_getaffinity(0)), "nice": os.getpriority(os.PRIO_PROCESS, 0), "cgroup": cgroup()}


def through_warm_command(argv: list[str]) -> int | None:
    """Run ``grade ARGV`` in the user's warm command and return its status; ``None`` where it was not handed
    over (the caller runs it here)."""
    if os.environ.get("GRADER_WARM_S", "").strip() == "0" or not served(argv):
        return None
    from grader.service_folder import command_socket

    path = command_socket()
    if path is None or not os.path.exists(path):
        return None
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:  # a closed standard stream: nothing to hand over
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(START_S)
        sock.connect(str(path))
        send(sock, request(argv), [0, 1, 2])
        said, _ = recv(sock)
    except (OSError, ValueError):
        sock.close()
        return None
    if said is None or not isinstance(said.get("started"), int):
        sock.close()
        return None
    sock.settimeout(None)
    return _follow(sock, int(said["started"]))


def _follow(sock: socket.socket, pgid: int) -> int:
    """Relay signals to the child's process group until it says how it ended; its status."""
    relayed: list[int] = []

    def relay(signum, _frame) -> None:
        relayed.append(signum)
        try:
            os.killpg(pgid, signum)
        except OSError:
            pass

    def stop(_signum, _frame) -> None:  # Ctrl-Z: the child stops, then this process; both go on together
        try:
            os.killpg(pgid, signal.SIGSTOP)
        except OSError:
            pass
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)
        signal.signal(signal.SIGTSTP, stop)
        try:
            os.killpg(pgid, signal.SIGCONT)
        except OSError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, relay)
    signal.signal(signal.SIGTSTP, stop)
    try:
        said, _ = recv(sock)
    except (OSError, ValueError):
        said = None
    finally:
        sock.close()
    if said is not None and isinstance(said.get("exit"), int):
        return int(said["exit"])
    return 130 if signal.SIGINT in relayed else 1  # the child was killed before it could say
