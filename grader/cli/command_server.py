"""The warm command: a process of the user's own that has imported what ``grade`` imports, and runs each
student's command handed to it (:mod:`grader.cli.relay`) in a child of its own, forked in a millisecond.

Started by the warm service (:mod:`grader.runner.service_daemon`) as ``python -m grader.cli.command_server
SOCKET``, with the environment of the grading that started the service, and ended with it (it also ends
when its parent is gone or its socket's name is taken). It runs no student code: the command it forks
grades as ``grade`` does, its student's code in hosts of the grading's own or the service's.

It imports every module a grading imports but the chapters' (whose code an author may be editing: each
child imports them afresh) and JAX (which the command never imports), and stays single-threaded, so a
fork of it is a clean process. A peer of another uid is refused. Each request is checked in the child,
before anything of it is used; one that is not this process's to run is refused and the command runs by
itself, as it would without a warm command:

* another Python (its executable, version or prefix), or another copy of the grader;
* another value of an environment variable read as modules are imported or as Python starts
  (:func:`grader.cli.relay.matters`);
* the grader's files changed since this process imported them (their sizes and times, :func:`code_signature`):
  then this process ends too, and the service that starts next starts a new one;
* another control group (``/proc/self/cgroup``: the command's CPU and memory limits, which a process cannot
  take up), a limit the child cannot take (a hard limit above its own), a niceness below its own.

Otherwise the child becomes the command: the three standard streams passed with the request on descriptors
0 to 2 (written as the command's Python writes them: :func:`_streams`), its folder, environment, umask,
limits, CPUs and niceness, a process group of its own (the command relays Ctrl-C and the like to it),
SIGINT handled as the ``grade`` command handles it, and ``tempfile``'s folder found again. It says ``started``, runs
:func:`grader.cli.app.main` with the command's arguments, says ``exit`` with the status and ends. The
command gone before that (killed) is a Ctrl-C: the grading stops as after one, and after
:data:`ORPHAN_KILL_S` its process group is killed.
"""
from __future__ import annotations

import io
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from grader.cli import relay
from grader.service_folder import Listening, same_user

#: the modules a grading imports (not the chapters', not JAX), imported before any request
WARM_MODULES = (
    "grader.cli.app", "grader.cli.batch", "grader.cli.check", "grader.cli.dev", "grader.grading",
    "grader.scheduling", "grader.sides", "grader.submission", "grader.verdicts", "grader.outcomes",
    "grader.replay", "grader.preview", "grader.reference_source", "grader.integrity", "grader.ipynb",
    "grader.runner.service", "grader.runner.job_host", "grader.runner.reference_host", "grader.runner.warm",
    "grader.runner.host_template", "grader.runner.devices", "grader.report.render", "grader.report.terminal",
    "grader.report.markdown", "grader.report.page", "grader.report.html_parts", "grader.report.svg",
    "grader.child.job", "grader.child.jax_setup", "grader.primitives.numeric", "grader.primitives.structure",
    "grader.primitives.purity", "grader.primitives.compiles", "grader.primitives.comparison",
    "grader.primitives.guards", "grader.primitives.instrument", "grader.primitives.placing",
    "grader.primitives.wording", "grader.batch.warmup", "grader.bytecode", "grader.platform_names", "numpy.random",
    "concurrent.futures", "csv", "email.parser", "zipfile", "subprocess", "queue", "importlib.metadata",
    "importlib.resources", "sysconfig", "py_compile", "encodings.ascii", "encodings.unicode_escape",
)
#: how long a child whose command is gone (killed) is given to stop as after Ctrl-C before its group is killed
ORPHAN_KILL_S = 10.0
#: how often the warm command looks whether its parent and its socket's name are still there
LOOK_S = 0.5
GRADER_DIR = Path(__file__).resolve().parent.parent


def code_signature(root: Path = GRADER_DIR) -> list:
    """The grader's files as the file system sees them (name, size, time of change), and the time of change of
    each folder of packages Python imports from (one installed, upgraded or removed): equal before and after
    only if nothing was written."""
    found: list = []
    for entry in sys.path:
        if not entry.endswith(("site-packages", "dist-packages")):
            continue
        try:
            found.append((entry, os.stat(entry).st_mtime_ns))
        except OSError:
            pass
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".toml")):
                seen = os.stat(os.path.join(folder, name))
                found.append((os.path.join(folder, name), seen.st_size, seen.st_mtime_ns))
    return found


class Server:
    """The listening process (see the module)."""

    def __init__(self, sock_path: Path):
        self.sock_path = sock_path
        self.parent = os.getppid()
        self.env = _started_with()
        self.signature = code_signature()  # before the imports: an edit meanwhile is seen as one
        for name in WARM_MODULES:
            try:
                __import__(name)
            except Exception:  # noqa: BLE001 - an optional extra not installed: imported in the child if needed
                pass

    def run(self) -> int:
        listening = Listening(self.sock_path)
        listener = listening.socket
        listener.settimeout(LOOK_S)
        try:
            while os.getppid() == self.parent and listening.still_ours():
                _reap()
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                if not same_user(conn):
                    conn.close()
                    continue
                conn.settimeout(None)
                if os.fork() == 0:  # the child: whatever happens, it never goes back to this loop
                    code = 70
                    try:
                        listener.close()
                        code = self._child(conn)
                    finally:
                        os._exit(code)
                conn.close()
        finally:
            listener.close()
            if listening.still_ours():
                try:
                    self.sock_path.unlink()
                except OSError:
                    pass
        return 0

    # ------------------------------------------------------------- the child: one command
    def _child(self, conn: socket.socket) -> int:
        try:
            os.setpgid(0, 0)
            for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
                signal.signal(signum, signal.SIG_DFL)
            said, fds = relay.recv(conn, 3)
            why = "no request" if said is None or len(fds) != 3 else self.refusal(said)
            if why is not None:
                if why == "the grader's files changed":  # this process is stale: the next service starts anew
                    os.kill(os.getppid(), signal.SIGTERM)
                relay.send(conn, {"refused": why})
                return 0
            _become(said, fds)
            relay.send(conn, {"started": os.getpid()})
        except Exception as exc:  # noqa: BLE001 - the command runs by itself
            try:
                relay.send(conn, {"refused": f"{type(exc).__name__}: {exc}"[:300]})
            except OSError:
                pass
            return 0
        done = threading.Event()
        threading.Thread(target=_orphaned, args=(conn, done), daemon=True, name="command-gone").start()
        code = _run(list(said["argv"]))
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        done.set()
        try:
            relay.send(conn, {"exit": code})
        except OSError:
            pass
        from grader.cli import after_the_command

        after_the_command()  # the student has the prompt back
        return code

    def refusal(self, said: dict) -> str | None:
        """Why this process cannot run the command ``said`` describes, or ``None``."""
        ours = {"executable": sys.executable, "version": sys.version, "prefix": sys.prefix, "grader": str(GRADER_DIR)}
        for field, value in ours.items():
            if said.get(field) != value:
                return f"another {field}"
        env = said.get("env")
        if not isinstance(env, dict):
            return "no environment"
        for name in set(env) | set(self.env):
            if relay.matters(name) and env.get(name) != self.env.get(name):
                return f"another {name}"
        if said.get("cgroup") != relay.cgroup():  # its CPU and memory limits, which a process cannot take up
            return "another control group"
        if code_signature() != self.signature:
            return "the grader's files changed"
        return None


def _started_with() -> dict:
    """The environment of the grading that started the service, as this process was given it: its
    ``PYTHONPATH`` as that grading had it (the service adds the grader's folder to find its own modules)."""
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the command sets it before NumPy loads (grader.cli)
    kept = env.pop("GRADER_COMMAND_PYTHONPATH", None)
    if kept is not None:
        original = json.loads(kept)
        if original is None:
            env.pop("PYTHONPATH", None)
        else:
            env["PYTHONPATH"] = original
    return env


def _become(said: dict, fds: list[int]) -> None:
    """This child takes over the command's streams, folder, environment, umask and limits."""
    import resource
    import tempfile

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(str(said["cwd"]))
    os.umask(int(said["umask"]))
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in dict(said["env"]).items()})
    tempfile.tempdir = None  # found again from the command's environment
    for name, (soft, hard) in dict(said.get("limits", {})).items():
        number = getattr(resource, name, None)
        if number is not None and resource.getrlimit(number) != (soft, hard):
            resource.setrlimit(number, (soft, hard))  # above its own hard limit: refused (OSError/ValueError)
    os.sched_setaffinity(0, [int(cpu) for cpu in said["cpus"]])  # the cores the grading plans with (grader.affinity)
    if os.getpriority(os.PRIO_PROCESS, 0) != int(said["nice"]):
        os.setpriority(os.PRIO_PROCESS, 0, int(said["nice"]))  # a higher priority than its own: refused (OSError)
    _streams(dict(said["stdio"]))
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _streams(stdio: dict) -> None:
    """``sys.stdin``, ``stdout`` and ``stderr`` on descriptors 0 to 2, as the command's Python made its own."""
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        how = stdio[name]
        stream = io.TextIOWrapper(io.open(fd, "rb" if fd == 0 else "wb", closefd=False), encoding=how["encoding"],
                                  errors=how["errors"], line_buffering=bool(how["line_buffering"]))
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _run(argv: list[str]) -> int:
    """``grade ARGV`` as the command's own process runs it."""
    from grader import interrupts
    from grader.cli.app import main

    signal.signal(signal.SIGINT, interrupts.on_sigint)
    sys.argv = ["grade", *argv]
    relay.SERVED[0] = True
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:  # noqa: BLE001 - main answers every error itself; this is a last resort
        code = 1
    return int(code)


def _orphaned(conn: socket.socket, done: threading.Event) -> None:
    """The command's socket closed before its end (the command killed): stop as after Ctrl-C, then be killed."""
    try:
        while conn.recv(1024):
            pass
    except OSError:
        pass
    if done.is_set():
        return
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(ORPHAN_KILL_S)
    os.killpg(0, signal.SIGKILL)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _terminate(*_) -> None:
    """SIGTERM (the service ending): out of the loop, its socket removed (a child resets it: it is a command's)."""
    raise SystemExit(0)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the terminal that started the service is not ours
    signal.signal(signal.SIGTERM, _terminate)
    server = Server(Path(argv[0]))
    return server.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
