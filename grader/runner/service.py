"""A grading's hold on its user's warm service (:mod:`grader.runner.service_daemon`): :func:`connect`,
:class:`Warm` (:class:`ServiceHosts`, or :class:`Later`).

A student grades the same folder again and again, and each ``grade`` started two hosts that each imported
JAX (about a core-second each on a 2-core laptop, a third of a whole grading). The first ``grade`` of a
folder starts its own hosts as always and, as it ends, a service (a process of the user's own, in a session
of its own) that keeps two templates of hosts with JAX imported, importing it while the student reads the
report; every later ``grade`` of that folder with the same settings forks its two hosts from them in
milliseconds (one that comes while the templates still import waits for them). The service ends after
``$GRADER_WARM_S`` seconds (600) without a grading; ``GRADER_WARM_S=0`` never starts one.

One service serves a user's cache (``$GRADER_CACHE_DIR``), one set of settings at a time: the grader's
code, Python, the chapter's modules, the sandbox, the submission's own compilation cache and the
reference's folder (:func:`service_key`). A grading with other settings starts its own hosts and, as it
ends, a service in that one's place; a grading while another is served starts hosts of its own, as without
a service. It is used where the student's hosts run in bubblewrap (whose template gives each host a clean
``/tmp`` and IPC namespace) or, as an ordinary user, in the process sandbox, and no accelerator is installed
(an accelerator's device files are bound per grading's plan: those gradings start their hosts): :func:`serves`.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from grader import store
from grader.protocol import OP, FromService, ToService, message, word_of
from grader.service_folder import alive, folder, sweep
from grader.wire import Channel, ProtocolError

if TYPE_CHECKING:
    from grader.chapter import Chapter
    from grader.runner.devices import DevicePlan
    from grader.runner.sandbox import SandboxPlan

log = logging.getLogger("grader")

#: seconds a service waits for the next grading before it ends (``0``: no service)
ENV = "GRADER_WARM_S"
DEFAULT_IDLE_S = 600
#: how long a grading waits for a service's templates (they import JAX) before it starts its own hosts
READY_S = 60.0
GRADER_PACKAGE = Path(__file__).resolve().parent.parent


def idle_seconds() -> int:
    """``$GRADER_WARM_S`` (a whole number of seconds, ``0``: none), else :data:`DEFAULT_IDLE_S`."""
    text = os.environ.get(ENV, "").strip()
    try:
        return max(0, int(text)) if text else DEFAULT_IDLE_S
    except ValueError:
        return DEFAULT_IDLE_S


def service_key(config: dict) -> str:
    """The digest of a service's settings, with what its code and its Python are (a grader upgraded, a
    chapter edited: another service)."""
    from grader.outcomes import folder_digest, grader_digest

    seen = {k: v for k, v in config.items() if k not in ("key", "idle_s", "scratch_root")}
    seen["grader"] = grader_digest()
    seen["python"] = [sys.executable, sys.version]
    seen["chapters"] = [folder_digest(Path(f)) for f in config.get("chapter_folders", [])]
    return hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()[:32]


class _Events:
    """What the service says of each host, by the grading's name for it."""

    def __init__(self):
        self.events: dict[str, list[dict]] = {}
        self.cv = threading.Condition()
        self.gone = False

    def put(self, said: dict | None) -> None:
        with self.cv:
            if said is None:
                self.gone = True
            else:
                self.events.setdefault(str(said.get("host", "")), []).append(said)
            self.cv.notify_all()

    def take(self, name: str, words: set[FromService], deadline: float) -> dict | None:
        with self.cv:
            while True:
                for i, said in enumerate(self.events.get(name, [])):
                    if said.get(OP) in words:
                        return self.events[name].pop(i)
                remaining = deadline - time.monotonic()
                if self.gone or remaining <= 0:
                    return None
                self.cv.wait(remaining)


class ServiceHosts:
    """A grading's connection to the service: where its modules go, and a template for each side
    (:class:`RemoteTemplate`) whose hosts the grading speaks to as to hosts it started."""

    def __init__(self, channel: Channel, ready: dict):
        self.channel = channel
        self.stage = Path(ready["stage"])
        self.scratch = {"student": Path(ready["student_scratch"]), "reference": Path(ready["reference_scratch"])}
        self.pid = int(ready.get("pid", 0))
        self._events = _Events()
        self._lock = threading.Lock()
        self._counter = 0
        self.student = RemoteTemplate(self, "student")
        self.reference = RemoteTemplate(self, "reference")
        threading.Thread(target=self._read, daemon=True, name="service-reader").start()

    def _read(self) -> None:
        while True:
            try:
                said = self.channel.recv()
            except (ProtocolError, OSError):
                said = None
            self._events.put(said)
            if said is None:
                return

    def send(self, said: dict, fds: list[int] | None = None) -> None:
        with self._lock:
            if fds:
                self.channel.send_with_fds(said, fds)
            else:
                self.channel.send(said)

    def name(self, side: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{side}-{self._counter}"

    def take(self, name: str, words: set[FromService], timeout: float) -> dict | None:
        return self._events.take(name, words, time.monotonic() + timeout)

    def grading_scratch(self) -> Path:
        """A scratch folder for the grading under the stage, where its modules will lie."""
        return Path(tempfile.mkdtemp(prefix="g-", dir=self.stage))

    def close(self, timeout: float = 10.0) -> None:
        """The grading is over: the service ends its hosts and empties what they left, then lets go."""
        try:
            self.send(message(ToService.RELEASE))
            self.take("", {FromService.RELEASED}, timeout)
        except OSError:
            pass
        self.channel.close()


class RemoteTemplate:
    """One side's template in the service, as :class:`grader.runner.host_handles.HostProcess` uses a template."""

    def __init__(self, hosts: ServiceHosts, side: str):
        self.hosts, self.side = hosts, side

    def spawn(self, sock: socket.socket) -> "RemoteHost":
        name = self.hosts.name(self.side)
        self.hosts.send(message(ToService.SPAWN, host=name, side=self.side), [sock.fileno()])
        said = self.hosts.take(name, {FromService.SPAWNED, FromService.FAILED}, READY_S)
        if said is None or said.get(OP) != FromService.SPAWNED:
            raise OSError(f"the warm service did not fork a host: {(said or {}).get('error', 'no answer')}")
        return RemoteHost(self.hosts, name)


class RemoteHost:
    """A host the service forked, seen as :class:`subprocess.Popen` sees a process."""

    def __init__(self, hosts: ServiceHosts, name: str):
        self.hosts, self.name = hosts, name
        self._ended = False

    def poll(self) -> int | None:
        return 0 if self._wait(0) else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._wait(3600 if timeout is None else timeout):
            raise subprocess.TimeoutExpired(self.name, timeout or 0)
        return 0

    def _wait(self, timeout: float) -> bool:
        if not self._ended:
            self._ended = self.hosts.take(self.name, {FromService.HOST_EXITED}, timeout) is not None \
                or self.hosts._events.gone
        return self._ended

    def kill(self) -> None:
        try:
            self.hosts.send(message(ToService.KILL, host=self.name))
        except OSError:
            pass


def serves(plan: "SandboxPlan", device: "DevicePlan") -> bool:
    """Whether a service can serve a grading under ``plan`` on ``device``: the student's hosts in bubblewrap (its
    template gives each a clean ``/tmp`` and IPC namespace), or in the process sandbox as an ordinary user (the
    hosts and their jobs are the user's own processes with the machine's ``/tmp`` anyway, as without a service);
    and no accelerator installed (its device files are bound per grading's device plan)."""
    if device.accelerator is not None:
        return False
    return plan.kind == "bwrap" or (plan.kind == "process" and not plan.uid_isolation and os.geteuid() != 0)


def connect_for(submission: Path, chapter: "Chapter", plan: "SandboxPlan", *, sandbox: str, reference_dir: Path,
                student_cache: Path | None, readable: list[Path], disk_bytes: int,
                scratch_root: Path | None) -> Warm | None:
    """:func:`connect` for a grading of ``submission`` (its settings as :func:`connect` takes them); ``None``
    whatever went wrong (the grading starts its own hosts, as without a service)."""
    config = {"submission": str(Path(submission).resolve()), "sandbox": sandbox,
              "plan": {"kind": plan.kind, "uid_isolation": plan.uid_isolation},
              "modules": list(chapter.child_modules), "chapter_folders": [str(f) for f in chapter.import_folders],
              "reference_dir": str(Path(reference_dir).resolve()),
              "student_cache": str(student_cache) if student_cache is not None else None,
              "read_caches": [str(p) for p in readable], "reference_cache": str(readable[0]) if readable else None,
              "disk_bytes": disk_bytes, "scratch_root": str(scratch_root) if scratch_root else None}
    try:
        return connect(config)
    except Exception as exc:  # noqa: BLE001 - no service: the grading starts its own hosts
        log.info("warm service not used: %s", exc)
        return None


#: the services a command starts once it has said everything (:func:`defer_starts`); ``None``: each at once
_DEFERRED: list["Later"] | None = None


def defer_starts() -> None:
    """From now on, a service a grading would start as it ends waits for :func:`start_deferred`: a one-shot ``grade``
    writes and shows its report first (the service's three processes importing would slow that tail on two cores),
    or, run by the warm command, has already said its status (the student has the prompt back)."""
    global _DEFERRED
    _DEFERRED = []


def start_deferred() -> None:
    """Start the services deferred since :func:`defer_starts`; later ones start at once again."""
    global _DEFERRED
    waiting, _DEFERRED = _DEFERRED or [], None
    for later in waiting:
        later.start()


class Warm:
    """A grading's part in its user's warm service: the hosts it forks from it (``hosts``), or the service it starts
    as it ends (``later``: none served its settings)."""

    def __init__(self, hosts: "ServiceHosts | None" = None, later: "Later | None" = None):
        self.hosts, self.later = hosts, later

    def close(self, completed: bool) -> None:
        """The grading is over: its hosts given back (ended, what they left emptied), or, where it ran to its end
        (not after a Ctrl-C), the service started for the next grading."""
        if self.hosts is not None:
            self.hosts.close()
        elif self.later is not None and completed:
            if _DEFERRED is not None:
                _DEFERRED.append(self.later)
            else:
                self.later.start()


class Later:
    """No service serves a grading's settings: it starts its own hosts, and one as it ends (:meth:`start`),
    in the background, for the next grading (a student's next ``grade`` comes after the time it takes to
    import JAX in two processes)."""

    def __init__(self, config: dict, sock_path: Path, replace: bool):
        self.config, self.sock_path, self.replace = config, sock_path, replace

    def start(self) -> bool:
        """Start the service, not waiting for it (another that took the slot meanwhile is left alone);
        whether one was started."""
        sweep(self.sock_path.parent)
        with open(self.sock_path.with_suffix(".lock"), "a") as lock:
            if not _lock(lock, 2.0):
                return False
            if self.replace:
                try:  # the old service ends once it sees its name taken
                    self.sock_path.unlink()
                except OSError:
                    pass
            else:
                running = _dial(self.sock_path)
                if running is not None:  # another grading started one meanwhile
                    running.close()
                    return False
            return _spawn(self.sock_path, self.config) is not None


def connect(config: dict) -> Warm | None:
    """The user's service for ``config`` (its settings: see :func:`service_key`), waited for while its
    templates import JAX (:attr:`Warm.hosts`); :attr:`Warm.later` where none serves them (none runs, or one
    with other settings): the grading starts its own hosts and the service as it ends; ``None`` where none
    can serve this grading (another grading holds it, it failed before with these settings, no folder of the
    user's own)."""
    base = folder()
    if base is None:
        return None
    config = {**config, "key": service_key(config), "idle_s": idle_seconds()}
    slot = slot_of(store.root())
    sock_path, failed = base / f"{slot}.sock", base / f"{slot}.failed"
    try:
        if failed.read_text() == config["key"]:
            return None  # these settings could not be served here: not tried again
    except OSError:
        pass
    channel = _dial(sock_path)
    if channel is None:
        return Warm(later=Later(config, sock_path, replace=False))
    said = _hello(channel, config["key"])
    word = word_of(said, FromService) if said is not None else None
    if word is FromService.READY:
        return Warm(hosts=ServiceHosts(channel, said))
    channel.close()
    if word is FromService.OTHER:
        return Warm(later=Later(config, sock_path, replace=True))
    if word is FromService.FAILED:
        log.info("warm service failed: %s", said.get("error"))
        try:
            failed.write_text(config["key"])
        except OSError:
            pass
    return None


def slot_of(cache_root: Path) -> str:
    """The name of the service of a cache's root (:func:`grader.store.root`): one a user's cache."""
    return hashlib.sha256(str(cache_root).encode()).hexdigest()[:16]


def _lock(handle, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


def _dial(sock_path: Path) -> Channel | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(sock_path))
    except OSError:
        sock.close()
        return None
    return Channel(sock, expects=FromService)


def _hello(channel: Channel, key: str) -> dict | None:
    try:
        channel.send(message(ToService.HELLO, key=key), timeout=5)
        return channel.recv(timeout=READY_S)
    except (ProtocolError, OSError):
        return None


def _spawn(sock_path: Path, config: dict) -> subprocess.Popen | None:
    """Start a service for ``config`` in a session of its own; it takes ``sock_path`` once it listens."""
    log_path = sock_path.with_suffix(".log")
    env = dict(os.environ)
    env["GRADER_COMMAND_PYTHONPATH"] = json.dumps(env.get("PYTHONPATH"))  # the warm command's, as the user's
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(GRADER_PACKAGE.parent), env.get("PYTHONPATH")]))
    try:
        with open(log_path, "wb") as out:
            return subprocess.Popen([sys.executable, "-m", "grader.runner.service_daemon", str(sock_path),
                                     json.dumps(config)], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, env=env, cwd="/", start_new_session=True)
    except OSError as exc:
        log.info("warm service not started: %s", exc)
        return None


def running() -> list[dict]:
    """The user's services running now: ``pid``, ``socket``, ``settings`` (the folders they serve)."""
    base = folder()
    found = []
    for pid_file in sorted(base.glob("*.pid")) if base is not None else []:
        try:
            pid = int(pid_file.read_text().split()[0])
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if b"grader.runner.service_daemon" not in argv:
            continue
        try:  # python -m grader.runner.service_daemon SOCKET CONFIG
            config = json.loads(argv[argv.index(b"grader.runner.service_daemon") + 2])
        except (ValueError, IndexError):
            config = {}
        found.append({"pid": pid, "socket": str(pid_file.with_suffix(".sock")), "settings": config})
    return found


def stop_all(timeout: float = 10.0) -> int:
    """End every service of the user (SIGTERM; SIGKILL after ``timeout``); how many were running."""
    import signal

    services = running()
    for service in services:
        try:
            os.kill(service["pid"], signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    for service in services:
        while alive(service["pid"]):
            if time.monotonic() > deadline:
                try:
                    os.kill(service["pid"], signal.SIGKILL)
                except OSError:
                    pass
                break
            time.sleep(0.02)
    base = folder()
    if base is not None:
        sweep(base)  # what services killed as they started left
    return len(services)
