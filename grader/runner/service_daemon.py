"""The warm service: a user's process that keeps two templates of hosts with JAX imported between
gradings, so that a student's next ``grade`` forks its hosts instead of importing JAX twice.

Started by a grading (:func:`grader.runner.service.connect`) as ``python -m grader.runner.service_daemon
SOCKET CONFIG``, in a session of its own, as the grading's own user. It is the grader's own code and runs
none of a student's: it starts

* a :class:`~grader.runner.host_template.HostTemplate` in the student's sandbox, whose hosts import the
  student's modules from a folder of the grading's own under its ``stage`` (read-only in the sandbox) and
  write the submission's own compilation cache (the one folder its settings name): in bubblewrap each host
  starts clean (a ``/tmp`` and an IPC namespace of its own); in an ordinary user's process sandbox it is
  the user's own process, as a host a grading starts there is;
* a template of the trusted reference's hosts, outside any sandbox, as a grading starts the reference's host;

then serves one grading at a time on ``SOCKET`` (a folder only its user enters; a peer of another uid is
refused): ``hello`` with the grading's settings' digest (``other`` when they are not the ones it serves:
the grading starts a service of its own in its place, and this one ends when the socket's name is no longer
its own), ``spawn`` with a host's control socket (the grading then speaks to the host directly, as to a host
it started), ``kill``, and ``release`` (the grading's hosts ended, whatever they left in the folders the hosts
share emptied, the stage's folders removed), also done when the grading goes away without a word. A second
grading while one is served hears ``busy`` and starts hosts of its own.

It ends after ``idle_s`` seconds without a grading, on ``exit``, on SIGTERM, or when its socket's name is
taken by another service; ending, it stops both templates (bubblewrap ends with its parent) and removes its
scratch folder. Nothing a student's code starts outlives its grading: the hosts forked for a grading end
with it, and each template ends what its hosts leave behind (it is their subreaper).
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.protocol import FromService, ToService, message, word_of
from grader.runner import sandbox as sandboxes
from grader.runner.host_handles import Spawned
from grader.runner.host_template import HostTemplate
from grader.runner.job_sessions import Limits
from grader.runner.warm import empty_folder
from grader.service_folder import Listening, command_socket, same_user
from grader.wire import Channel, ProtocolError

#: how long a host is given to end when its grading goes (then it is killed)
HOST_END_S = 5.0
#: how long a grading that comes while another is served waits before it hears ``busy`` (the other may be gone
#: already: its hosts see their sockets close as this service sees its own)
BUSY_GRACE_S = 0.5


class Service:
    """The templates and the socket of one user's warm service (see the module)."""

    def __init__(self, sock_path: Path, config: dict):
        self.sock_path = sock_path
        self.config = config
        self.key = str(config["key"])
        self.idle_s = float(config.get("idle_s", 600))
        root = config.get("scratch_root") or None
        self.scratch = Path(tempfile.mkdtemp(prefix="grade-service-", dir=root))
        os.chmod(self.scratch, 0o711)  # the jobs reach their folders; nobody lists it
        (self.scratch / "owner").write_text(f"{os.getpid()}\n")  # swept by a grading once this process is gone
        self.stage = self.scratch / "stage"
        self.stage.mkdir()
        os.chmod(self.stage, 0o711)
        self.plan = sandboxes.plan(str(config["sandbox"]))
        limits = Limits(disk_bytes=int(config["disk_bytes"])) if config.get("disk_bytes") else Limits()
        modules, folders = list(config["modules"]), [Path(f) for f in config.get("chapter_folders", [])]
        student_cache = Path(config["student_cache"]) if config.get("student_cache") else None
        # in bubblewrap each host starts clean; in the process sandbox (an ordinary user's) it is the user's own
        # process with the machine's /tmp, as a host started afresh there is
        self.student = HostTemplate(stage=self.stage, scratch=self.scratch / "student", plan=self.plan, limits=limits,
                                    modules=modules, chapter_folders=folders,
                                    read_caches=[Path(p) for p in config.get("read_caches", [])],
                                    compile_cache=student_cache, isolate=self.plan.kind == "bwrap")
        reference_cache = Path(config["reference_cache"]) if config.get("reference_cache") else None
        self.reference = HostTemplate(stage=Path(config["reference_dir"]), scratch=self.scratch / "reference",
                                      plan=sandboxes.SandboxPlan("process", False), limits=limits, modules=modules,
                                      chapter_folders=folders, compile_cache=reference_cache, isolate=False)
        self._failed: str | None = None
        self._checked = False
        self._stop = threading.Event()
        self._waiting: queue.Queue[socket.socket] = queue.Queue()
        self._busy = threading.Event()
        self.command: subprocess.Popen | None = None

    # ------------------------------------------------------------- life
    def run(self) -> int:
        """Start the templates, listen, serve gradings until idle for ``idle_s`` (or told to end)."""
        listening: Listening | None = None
        try:
            self.student.start()  # both import JAX at once, from this thread (bubblewrap dies with its parent's)
            self.reference.start()
            self.command = _start_command()
            listening = Listening(self.sock_path)  # the grading that started this service waits for the name
            self.sock_path.with_suffix(".pid").write_text(f"{os.getpid()}\n")
            threading.Thread(target=self._accept, args=(listening.socket,), daemon=True,
                             name="service-accept").start()
            self.ready()  # now, not when the next grading comes: it finds the templates ready
            last = time.monotonic()
            while not self._stop.is_set():
                try:
                    conn = self._waiting.get(timeout=0.5)
                except queue.Empty:
                    if time.monotonic() - last > self.idle_s or not listening.still_ours():
                        break
                    continue
                try:
                    self._serve(conn)
                finally:
                    last = time.monotonic()
        finally:
            if listening is not None:
                listening.socket.close()
            # its name, its number, its log and the lock of its starts; also where it ended before it listened
            # (stopped as it started) and no other took the name meanwhile: else they are left for ever
            if listening.still_ours() if listening is not None else not self.sock_path.exists():
                for path in (self.sock_path, *(self.sock_path.with_suffix(x) for x in (".pid", ".log", ".lock"))):
                    try:
                        path.unlink()
                    except OSError:
                        pass
            self.close()
        return 0

    def _accept(self, listener: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            if not same_user(conn):
                conn.close()
                continue
            deadline = time.monotonic() + BUSY_GRACE_S  # a grading that has just gone is noticed first
            while self._busy.is_set() and time.monotonic() < deadline:
                time.sleep(0.01)
            if self._busy.is_set():
                try:
                    Channel(conn).send(message(FromService.BUSY), timeout=1)
                except OSError:
                    pass
                conn.close()
                continue
            self._busy.set()  # cleared when the grading goes (one waiting meanwhile is served after)
            self._waiting.put(conn)

    def close(self) -> None:
        if self.command is not None:
            self.command.terminate()
            try:
                self.command.wait(2)
            except subprocess.TimeoutExpired:
                self.command.kill()
        for template in (self.student, self.reference):
            template.close()
        sandboxes.release_folder(self.scratch)  # the jobs' capped folder (root)
        shutil.rmtree(self.scratch, ignore_errors=True)

    # ------------------------------------------------------------- one grading
    def ready(self) -> str | None:
        """Wait for both templates; why they cannot serve, else ``None`` (a student's template whose hosts
        cannot start clean, checked once, cannot)."""
        if self._failed is None:
            for template in (self.student, self.reference):
                if not template.process.ensure():
                    self._failed = f"a template did not start: {template.process.log_tail()[-300:]}"
        if self._failed is None and not self._checked:
            self._checked = True
            if not self.student.works():
                self._failed = "the student's template cannot start a host clean here"
        return self._failed

    def _serve(self, conn: socket.socket) -> None:
        channel = Channel(conn, expects=ToService)
        lock = threading.Lock()
        hosts: dict[str, tuple[Spawned, threading.Event]] = {}  # each forked host, and the moment it ended

        def say(word, **fields) -> None:
            with lock:
                try:
                    channel.send(message(word, **fields), timeout=5)
                except OSError:
                    pass

        try:
            hello = channel.recv(timeout=10)
            if hello is None or word_of(hello, ToService) is not ToService.HELLO:
                return
            if str(hello.get("key")) != self.key:
                say(FromService.OTHER)
                return
            why = self.ready()
            if why is not None:
                say(FromService.FAILED, error=why)
                self._stop.set()
                return
            say(FromService.READY, stage=str(self.stage), student_scratch=str(self.student.process.scratch),
                reference_scratch=str(self.reference.process.scratch), pid=os.getpid())
            while True:
                order, fds = channel.recv_with_fds(1)
                if order is None:
                    break
                word = word_of(order, ToService)
                if word is ToService.SPAWN and len(fds) == 1:
                    self._spawn(str(order["host"]), str(order["side"]), fds[0], hosts, say)
                elif word is ToService.KILL and str(order.get("host")) in hosts:
                    hosts[str(order["host"])][0].kill()
                elif word is ToService.RELEASE:
                    self._busy.clear()  # the next grading waits for the cleaning, not for a grading
                    self._release(hosts)
                    say(FromService.RELEASED)
                elif word is ToService.EXIT:
                    self._stop.set()
                    break
                else:
                    for fd in fds:
                        os.close(fd)
        except (ProtocolError, OSError, ValueError, KeyError):
            pass
        finally:
            self._busy.clear()  # gone: a grading that comes now is served once what this one left is emptied
            self._release(hosts)
            channel.close()

    def _spawn(self, name: str, side: str, fd: int, hosts: dict, say) -> None:
        template = self.student if side == "student" else self.reference if side == "reference" else None
        sock = socket.socket(fileno=fd)
        try:
            if template is None:
                raise OSError(f"no template of side {side!r}")
            forked = template.spawn(sock)
        except OSError as exc:
            say(FromService.FAILED, error=str(exc)[:300])
            return
        finally:
            sock.close()
        ended = threading.Event()  # the watcher below takes the template's word of the host's end: this is it
        hosts[name] = (forked, ended)
        say(FromService.SPAWNED, host=name, pid=0)

        def watch() -> None:
            forked.wait(None)
            ended.set()
            say(FromService.HOST_EXITED, host=name)

        threading.Thread(target=watch, daemon=True, name=f"service-{name}").start()

    def _release(self, hosts: dict) -> None:
        """The grading's hosts ended (killed after :data:`HOST_END_S`); what they left emptied."""
        for forked, ended in hosts.values():
            if self._stop.is_set() or ENDING.is_set():  # ending now: no grading waits for them
                forked.kill()
            if not ended.wait(HOST_END_S):
                forked.kill()
                ended.wait(HOST_END_S)
        hosts.clear()
        for template in (self.student, self.reference):
            shared = template.process.scratch
            for folder in (shared / "home", shared / "output", shared / "jobs"):
                empty_folder(folder)
        empty_folder(self.stage)


def _start_command() -> subprocess.Popen | None:
    """The user's warm command (:mod:`grader.cli.command_server`), with the environment of the grading that
    started this service (its own ``PYTHONPATH`` given back); ``None`` where it has no socket to take."""
    sock_path = command_socket()
    if sock_path is None:
        return None
    env = dict(os.environ)
    env["GRADER_COMMAND_PYTHONPATH"] = COMMAND_PYTHONPATH
    try:
        return subprocess.Popen([sys.executable, "-m", "grader.cli.command_server", str(sock_path)],
                                stdin=subprocess.DEVNULL, env=env, cwd="/")  # its words in the service's log
    except OSError:
        return None


#: the ``PYTHONPATH`` of the grading that started the service, as JSON (the service's own names the grader)
COMMAND_PYTHONPATH = os.environ.pop("GRADER_COMMAND_PYTHONPATH", "null")
#: set by SIGTERM: a grading's hosts are killed, not waited for
ENDING = threading.Event()


def _terminate(*_) -> None:
    """SIGTERM (``grade dev service --stop``): end now, a grading served or not; :meth:`Service.run`'s ending
    stops the templates (and with them the grading's hosts)."""
    ENDING.set()
    raise SystemExit(0)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the terminal that started it is its grading's
    signal.signal(signal.SIGTERM, _terminate)
    service = Service(Path(argv[0]), json.loads(argv[1]))
    return service.run()


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)
