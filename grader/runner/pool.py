"""The grader's side of the child processes: hosts, and the jobs they fork.

A :class:`Host` is one long-lived child (inside the sandbox for a student) that has
imported JAX once. :meth:`Host.session` forks a fresh job for one exercise and
returns a :class:`JobSession`, which speaks the job protocol of
:mod:`grader.runner.job`, enforces the exercise's wall-clock deadline and always ends
with a :class:`JobOutcome`: what was recorded, and how the job ended.

Every failure mode ends in an outcome, never an exception: an import error, an exit,
a crash, a hang (killed at the deadline), a protocol violation, or the host itself
dying (then the host is restarted for the next job).
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from grader.runner import sandbox as sandboxes
from grader.runner.host import XLA_DUMP
from grader.runner.job import STACK_FILE
from grader.wire import Channel, ProtocolError

log = logging.getLogger("grader")

GRADER_PACKAGE = Path(__file__).resolve().parent.parent
OUTPUT_HEAD = 6000
OUTPUT_TAIL = 3000


@dataclass
class Limits:
    """Per-job limits. ``memory_bytes`` is address space on top of JAX's own start-up."""

    cpu_s: float = 120
    memory_bytes: int = 4 << 30
    nproc: int = 256
    fsize_bytes: int = 64 << 20
    nofile: int = 512
    disk_bytes: int = 256 << 20  # the job's scratch folder, watched by the grader

    def for_job(self, timeout_s: float) -> dict:
        return {
            "cpu_s": int(max(self.cpu_s, timeout_s * 2) + 1),
            "memory_bytes": self.memory_bytes,
            "nproc": self.nproc,
            "fsize_bytes": self.fsize_bytes,
            "nofile": self.nofile,
            "core": 0,
        }


@dataclass
class JobOutcome:
    """How one job ended, and what it recorded before that."""

    #: how the job ended: ``done``, ``import_error``, ``timeout``, ``crashed``, ``probe_error``,
    #: ``protocol_error``, ``disk_limit``, ``host_lost``, ``abandoned`` (the grader no longer
    #: needed it), ``cancelled`` (grading was interrupted) or ``not_started``
    end: str
    observations: dict[str, Any] = field(default_factory=dict)
    names: dict[str, dict] = field(default_factory=dict)
    env: dict | None = None
    detail: dict = field(default_factory=dict)
    output: str = ""
    output_bytes: int = 0
    duration_s: float = 0.0
    integrity: list[dict] = field(default_factory=list)  # the job's reports on its instruments
    xla_compiles: int | None = None  # modules in XLA's dump, counted by the grader
    arrivals: dict[str, float] = field(default_factory=dict)  # when each record reached the grader

    def attempted(self) -> bool:
        """Whether some call of the student's got past ``NotImplementedError`` (returned or raised).

        A stub records only "not attempted" calls, and then no reference run is needed; nor
        after an import error, or a crash before any record (the checks report those).
        """
        return self.end != "import_error" and any(
            isinstance(v, dict) and v.get("status") in ("ok", "raised") for v in self.observations.values())


def scrubbed_environment(home: Path, pylib: Path) -> dict[str, str]:
    """The only environment a host (and its jobs) gets."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(home),
        "TMPDIR": str(home),
        "PYTHONPATH": str(pylib),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONNOUSERSITE": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "TF_CPP_MIN_LOG_LEVEL": "1",
    }
    for key in ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "XLA_PYTHON_CLIENT_PREALLOCATE",
                "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR", "LD_LIBRARY_PATH",
                "TPU_VISIBLE_CHIPS"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


class Host:
    """A forking host for one side of one submission (student or reference)."""

    def __init__(self, *, side: str, chapter: str, probes: str, module_dir: Path, scratch: Path,
                 plan: sandboxes.SandboxPlan, limits: Limits, uids: sandboxes.UidPool | None = None,
                 start_timeout_s: float = 120.0):
        self.side = side
        self.chapter = chapter
        self.probes = probes
        self.module_dir = Path(module_dir)
        self.scratch = Path(scratch)
        self.plan = plan
        self.limits = limits
        self.uids = uids
        self.start_timeout_s = start_timeout_s
        self.versions: dict = {}
        self._proc: subprocess.Popen | None = None
        self._control: Channel | None = None
        self._send_lock = threading.Lock()
        self._ready = threading.Event()
        self._failed: str | None = None
        self._events: dict[str, list[dict]] = {}
        self._events_cv = threading.Condition()
        self._counter = 0
        self.restarts = 0
        self.closed = False
        #: told of every job's progress: ``listener(session)`` after its phase changes
        self.listener: Callable[["JobSession"], None] | None = None

    # ------------------------------------------------------------- life cycle
    def start(self) -> None:
        """Start the host process; returns at once (see :meth:`wait_ready`)."""
        self._ready.clear()
        self._failed = None
        home = self.scratch / "home"
        pylib = self.scratch / "pylib"
        home.mkdir(parents=True, exist_ok=True)
        pylib.mkdir(parents=True, exist_ok=True)
        os.chmod(self.scratch, 0o755)
        os.chmod(home, 0o777)
        link = pylib / "grader"
        if self.plan.kind != "bwrap" and not link.exists():
            link.symlink_to(GRADER_PACKAGE, target_is_directory=True)
        elif self.plan.kind == "bwrap":
            link.mkdir(exist_ok=True)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        config = json.dumps({"probes": self.probes})
        python_argv = [sys.executable, "-s", "-m", "grader.runner.host", str(theirs.fileno()), config]
        argv = sandboxes.host_command(
            self.plan, python_argv=python_argv,
            binds_ro=[(GRADER_PACKAGE, link), (self.module_dir, self.module_dir)],
            binds_rw=[self.scratch / "jobs", home], keep_fds=[theirs.fileno()],
        )
        (self.scratch / "jobs").mkdir(exist_ok=True)
        os.chmod(self.scratch / "jobs", 0o711)
        self._proc = subprocess.Popen(
            argv, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
            stdout=open(self.scratch / "host.log", "ab"), stderr=subprocess.STDOUT,
            env=scrubbed_environment(home, pylib), cwd=str(home), start_new_session=True,
        )
        theirs.close()
        self._control = Channel(ours)
        threading.Thread(target=self._read_control, args=(self._control, self._proc), daemon=True,
                         name=f"host-{self.side}").start()

    def _read_control(self, control: Channel, proc: subprocess.Popen) -> None:
        while True:
            try:
                message = control.recv()
            except (ProtocolError, OSError) as exc:
                message = None
                log.warning("%s host: bad control message: %s", self.side, exc)
            if message is None:
                with self._events_cv:
                    if self._control is control:
                        self._failed = self._failed or "host exited"
                    self._events_cv.notify_all()
                self._ready.set()
                return
            if message.get("op") == "ready":
                self.versions = message.get("versions", {})
                self._ready.set()
                continue
            with self._events_cv:
                self._events.setdefault(str(message.get("job")), []).append(message)
                self._events_cv.notify_all()

    def wait_ready(self, timeout: float | None = None) -> bool:
        self._ready.wait(self.start_timeout_s if timeout is None else timeout)
        return self._ready.is_set() and self._failed is None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self._failed is None

    def ensure(self) -> bool:
        """Make sure a host is running and ready, restarting a dead one (never once closed)."""
        if self.closed:
            return False
        if not self.alive():
            if self._proc is not None:
                self.restarts += 1
                self.stop()
            self.start()
        return self.wait_ready()

    def close(self) -> None:
        """Stop for good, at once: the host and every job it runs are killed, none starts again."""
        self.closed = True
        self.stop(grace_s=0.5)

    def stop(self, grace_s: float = 3.0) -> None:
        """Ask the host to end (it kills its jobs); kill it after ``grace_s``."""
        proc, control = self._proc, self._control
        self._control = None
        with self._events_cv:  # sessions waiting on this host give up at once
            self._failed = self._failed or "host stopped"
            self._events_cv.notify_all()
        if control is not None:
            try:
                with self._send_lock:
                    control.send({"op": "exit"})
            except OSError:
                pass
        if proc is not None:
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
        if control is not None:
            control.close()

    def log_tail(self) -> str:
        try:
            return (self.scratch / "host.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    # ------------------------------------------------------------- jobs
    def _send(self, message: dict, fds: list[int] | None = None) -> None:
        if self._control is None:
            raise OSError("host not running")
        with self._send_lock:
            if fds:
                self._control.send_with_fds(message, fds)
            else:
                self._control.send(message)

    def _next_event(self, job: str, ops: set[str], deadline: float) -> dict | None:
        with self._events_cv:
            while True:
                for i, event in enumerate(self._events.get(job, [])):
                    if event.get("op") in ops:
                        return self._events[job].pop(i)
                if self._failed:
                    return None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._events_cv.wait(remaining)

    def session(self, *, exercise: str, module: str, functions: tuple[str, ...], timeout_s: float,
                options: dict | None = None, import_timeout_s: float | None = None) -> "JobSession":
        self._counter += 1
        return JobSession(self, f"{exercise}-{self._counter}", exercise, module, functions, timeout_s, options,
                          import_timeout_s)


class JobSession:
    """One forked job, driven through the job protocol under one deadline."""

    def __init__(self, host: Host, name: str, exercise: str, module: str, functions: tuple[str, ...],
                 timeout_s: float, options: dict | None = None, import_timeout_s: float | None = None):
        self.host = host
        self.import_timeout_s = import_timeout_s
        #: where the job is, one of :data:`PHASES`
        self.phase = "starting"
        self.calling: str | None = None
        self.options = options or {}
        self.name = name
        self.exercise = exercise
        self.module = module
        self.functions = functions
        self.timeout_s = timeout_s
        self.outcome = JobOutcome(end="not_started")
        self.channel: Channel | None = None
        self.uid: int | None = None
        self._started = 0.0
        self.deadline = 0.0
        self._workdir: Path | None = None
        self._output: Path | None = None
        self._disk_checked = 0.0

    # ------------------------------------------------------------- start
    def start(self) -> bool:
        """Fork the job and wait until it has imported the module; False if it ended."""
        host = self.host
        if not host.ensure():  # a host's start-up is not the exercise's time
            self._started = time.monotonic()
            self.outcome.end = "host_lost"
            self.outcome.detail = {"log": host.log_tail()}
            return False
        self._started = time.monotonic()
        self.deadline = self._started + self.timeout_s
        jobs = host.scratch / "jobs"
        self._workdir = Path(tempfile.mkdtemp(prefix=f"{self.exercise}-", dir=jobs))
        output_dir = host.scratch / "output"
        output_dir.mkdir(exist_ok=True)
        self._output = output_dir / f"{self.name}.txt"
        out_fd = os.open(self._output, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
        order = {
            "op": "fork", "job": self.name, "chapter": host.chapter, "exercise": self.exercise,
            "module": self.module, "module_dir": str(host.module_dir), "functions": list(self.functions),
            "workdir": str(self._workdir), "limits": host.limits.for_job(self.timeout_s),
            "probes": host.probes, "options": self.options,
        }
        if host.uids is not None and host.plan.uid_isolation:
            self.uid = host.uids.acquire()
            order["uid"] = self.uid
            os.chown(self._workdir, self.uid, self.uid)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            host._send(order, [theirs.fileno(), out_fd])
        except OSError:
            self.outcome.end = "host_lost"
            return False
        finally:
            theirs.close()
            os.close(out_fd)
        self.channel = Channel(ours)
        hello = self.expect({"hello"})
        if hello is None:
            return False
        self.outcome.env = hello.get("env")
        self._set_phase("importing")
        limit = time.monotonic() + self.import_timeout_s if self.import_timeout_s else None
        imported = self.expect({"imported", "import_error"}, deadline=limit)
        if imported is None:
            return False
        self._set_phase("running")
        if imported["op"] == "import_error":
            self.outcome.end = "import_error"
            self.outcome.detail = {k: v for k, v in imported.items() if k != "op"}
            return False
        self.outcome.names = imported.get("names", {})
        return True

    def send_inputs(self, inputs: dict) -> bool:
        return self.send({"op": "inputs", "inputs": inputs})

    # ------------------------------------------------------------- conversation
    def send(self, message: dict) -> bool:
        if self.channel is None:
            return False
        try:
            self.channel.send(message)
            return True
        except OSError:
            return False

    def expect(self, ops: set[str], *, deadline: float | None = None) -> dict | None:
        """Receive until a message whose op is in ``ops``; observations are stored on the way.

        Returns ``None`` when the job ended first (``outcome.end`` says how).
        """
        deadline = self.deadline if deadline is None else min(deadline, self.deadline)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._timed_out()
                return None
            if self._over_disk():
                return None
            if self.host.closed:  # grading was cancelled
                self._end("cancelled")
                return None
            try:
                message = self.channel.recv(timeout=min(remaining, DISK_POLL_S))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    self._timed_out()
                    return None
                continue
            except (ProtocolError, OSError) as exc:
                self._end("protocol_error", {"error": str(exc)})
                return None
            if message is None:
                self._end("crashed")
                return None
            op = message.get("op")
            if op == "obs":
                key = message.get("key")
                # "grader/..." keys are the grader's own results: a child cannot write them
                if isinstance(key, str) and not key.startswith("grader/") and key not in self.outcome.observations:
                    self.outcome.observations[key] = message.get("value")
                    self.outcome.arrivals[key] = time.monotonic() - self._started
            elif op == "calling":
                self.calling = str(message.get("function", "?"))[:80]
                self._set_phase("calling")
            elif op == "integrity" and len(self.outcome.integrity) < 4:
                self.outcome.integrity.append({k: message.get(k) for k in ("stage", "changed", "compiles_total")})
            if op in ops:
                return message
            if op == "probe_error":
                self._end("probe_error", {"type": message.get("type"), "traceback": message.get("traceback")})
                return None

    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        listener = self.host.listener
        if listener is not None:
            try:
                listener(self)
            except Exception:  # noqa: BLE001 - a display must never stop grading
                log.exception("progress listener failed")

    def _timed_out(self) -> None:
        """The job ran past a limit: note where it was (phase, function, the student's line)."""
        if self.outcome.end == "not_started":
            self.outcome.detail["hung"] = {"phase": self.phase, "function": self.calling,
                                           "where": self._stack_line()}
        self._end("timeout")

    def _stack_line(self) -> str | None:
        """The innermost line of the student's module in the job's stack, dumped on request."""
        if self._workdir is None:
            return None
        try:
            self.host._send({"op": "dump", "job": self.name})
        except OSError:
            return None
        stack = self._workdir / STACK_FILE
        module_dir = os.path.realpath(str(self.host.module_dir))
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            try:
                text = stack.read_text(errors="replace")
            except OSError:
                text = ""
            if text.strip():
                time.sleep(0.05)  # let faulthandler finish writing every thread
                return student_line(stack.read_text(errors="replace"), module_dir)
            time.sleep(0.02)
        return None

    def _over_disk(self) -> bool:
        """Stop a job whose scratch folder outgrows its budget (checked about once a second)."""
        now = time.monotonic()
        if self._workdir is None or now - self._disk_checked < DISK_POLL_S:
            return False
        self._disk_checked = now
        used = disk_usage(self._workdir)
        if used > self.host.limits.disk_bytes:
            self._end("disk_limit", {"disk_bytes": used, "limit": self.host.limits.disk_bytes})
            return True
        return False

    def abandon(self) -> None:
        """The grader no longer needs this job: :meth:`finish` kills it without waiting."""
        self._end("abandoned")

    def run_to_end(self) -> None:
        if self.expect({"done"}) is not None:
            self.outcome.end = "done"

    # ------------------------------------------------------------- end
    def _end(self, end: str, detail: dict | None = None) -> None:
        if self.outcome.end == "not_started":
            self.outcome.end = end
            self.outcome.detail.update(detail or {})
            self._set_phase("ended")

    def finish(self) -> JobOutcome:
        """Make sure the job and everything it started are gone; return the outcome."""
        host = self.host
        if not self._started:  # never forked
            return self.outcome
        if self.outcome.end == "not_started":
            self.outcome.end = "done"
        if self.channel is not None:
            self.channel.close()
        exited = None
        if self.outcome.end not in ("done", "import_error", "crashed"):
            self._kill()
        exited = host._next_event(self.name, {"exited"}, time.monotonic() + 3.0)
        if exited is None:
            self._kill()
            exited = host._next_event(self.name, {"exited"}, time.monotonic() + 2.0)
        if exited is not None:
            self.outcome.detail.setdefault("exit", {k: v for k, v in exited.items() if k in ("code", "signal")})
        elif self.outcome.end != "host_lost" and not host.alive():
            self.outcome.detail.setdefault("host", host.log_tail())
        if self.uid is not None and host.uids is not None:
            host.uids.release(self.uid)
        self._read_output()
        if self._workdir is not None:
            self.outcome.xla_compiles = _count_xla_modules(self._workdir / XLA_DUMP)
            shutil.rmtree(self._workdir, ignore_errors=True)
        self.outcome.duration_s = time.monotonic() - self._started
        return self.outcome

    def _kill(self) -> None:
        if self.uid is not None:
            sandboxes.kill_uid(self.uid)
        try:
            self.host._send({"op": "kill", "job": self.name})
        except OSError:
            pass

    def _read_output(self) -> None:
        if self._output is None or not self._output.exists():
            return
        size = self._output.stat().st_size
        with self._output.open("rb") as handle:
            head = handle.read(OUTPUT_HEAD)
            tail = b""
            if size > OUTPUT_HEAD + OUTPUT_TAIL:
                handle.seek(size - OUTPUT_TAIL)
                tail = handle.read(OUTPUT_TAIL)
            elif size > OUTPUT_HEAD:
                tail = handle.read()
        text = head.decode("utf-8", errors="replace")
        if tail:
            gap = size - len(head) - len(tail)
            text += (f"\n[… {gap} bytes …]\n" if gap > 0 else "") + tail.decode("utf-8", errors="replace")
        self.outcome.output = text
        self.outcome.output_bytes = size
        self._output.unlink(missing_ok=True)


DISK_POLL_S = 1.0
#: where a job can be: ``starting`` (forked, JAX's backend starting), ``importing`` (the
#: student's module), ``running`` (the probe, between calls), ``calling`` (one of the
#: student's functions, named by ``JobSession.calling``), ``ended``
PHASES = ("starting", "importing", "running", "calling", "ended")
_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in (?P<function>.+)$')


def student_line(dump: str, module_dir: str) -> str | None:
    """``file:line`` of the innermost frame of the student's module in a faulthandler dump.

    The dump lists each thread's frames innermost first; the first frame whose file is
    in the submission's folder is where the student's code was.
    """
    for line in dump.splitlines():
        match = _FRAME.match(line)
        if match and os.path.dirname(os.path.realpath(match["file"])) == module_dir:
            return f"{os.path.basename(match['file'])}:{match['line']}"
    return None


def disk_usage(folder: Path) -> int:
    """Bytes really used under ``folder`` (allocated blocks: a sparse file does not fool it)."""
    total = 0
    stack = [str(folder)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        else:
                            total += entry.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def _count_xla_modules(folder: Path) -> int | None:
    """Distinct modules XLA compiled (its dump names files module_NNNN.<name>.*)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    return len({name.split(".", 1)[0] for name in names if name.startswith("module_")})


def run_job(host: Host, *, exercise: str, module: str, functions: tuple[str, ...], inputs: dict,
            timeout_s: float, driver: Callable[[JobSession], None] | None = None,
            import_timeout_s: float | None = None) -> JobOutcome:
    """Fork, import, send the inputs, let the probe run to the end (or ``driver`` drive it)."""
    session = host.session(exercise=exercise, module=module, functions=functions, timeout_s=timeout_s,
                           import_timeout_s=import_timeout_s)
    try:
        if session.start() and session.send_inputs(inputs):
            if driver is None:
                session.run_to_end()
            else:
                driver(session)
    finally:
        outcome = session.finish()
    return outcome
