"""The grader's handle on a host process: :class:`HostProcess` (on a template of hosts:
:class:`grader.runner.host_template.HostTemplate`; the environment it gets:
:mod:`grader.runner.host_environment`).

A host is one long-lived child (inside the sandbox for a student) that has imported
JAX and the chapter's modules once (:mod:`grader.child.host` is its code).
:meth:`HostProcess.session` prepares a fresh job for one exercise: a
:class:`~grader.runner.job_sessions.JobSession`, which the host forks on :meth:`start
<grader.runner.job_sessions.JobSession.start>`. A host that dies is restarted for the next job;
a closed one never is.

A host is started as a process of its own (its sandbox around it), or forked by a
:class:`~grader.runner.host_template.HostTemplate` (:mod:`grader.child.template`) that has imported JAX already and
gives each host a fresh ``/tmp`` and IPC namespace of its own: a batch worker's
students each get a host that way, in a few milliseconds.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from enum import StrEnum
from typing import TYPE_CHECKING, Callable, Protocol

from grader.runner import devices, sandbox as sandboxes
from grader.runner.devices import DevicePlan
from grader.runner.host_environment import scrubbed_environment
from grader.runner.job_host import Compiles
from grader.runner.job_sessions import JobSession, Limits
from grader.protocol import OP, FromHost, FromTemplate, ToHost, message, word_of
from grader.wire import Channel, ProtocolError

if TYPE_CHECKING:
    from grader.chapter import ExerciseSpec
    from grader.runner.kept import KeptJobs

log = logging.getLogger("grader")

GRADER_PACKAGE = Path(__file__).resolve().parent.parent


class Spawned(Protocol):
    """A host a template forked, seen as :class:`subprocess.Popen` sees a process."""

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


class Template(Protocol):
    """What a host that a template forks needs of it (:class:`grader.runner.host_template.HostTemplate`, or
    one of the user's warm service: :class:`grader.runner.service.RemoteTemplate`)."""

    def spawn(self, sock: socket.socket) -> Spawned:
        """Fork a host whose control socket is ``sock``, seen as :class:`subprocess.Popen` sees a process."""
        ...


def failure_line(log: str) -> str | None:
    """The last error a process's log names (``ModuleNotFoundError: No module named 'jax'``), shortened."""
    import re

    found = re.findall(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception|Exit)\b.*)$", log or "", re.M)
    if not found:
        return None
    line = found[-1].strip()
    return line if len(line) <= 200 else line[:197] + "..."


class HostProcess:
    """The grader's handle on a forking host for one side of one submission.

    ``side``: ``student`` (sandboxed with ``plan``, jobs under their own uids from
    ``uids``) or ``reference`` (trusted); ``module_dir``: the modules it imports jobs
    from; ``modules``: what it imports before any job (the chapter's modules);
    ``chapter_folders``: folders to find a chapter that is not one of the grader's own;
    ``words``: the boundary it speaks, its orders and what it says (a template's, for a template).
    """

    def __init__(self, *, side: str, module_dir: Path, scratch: Path, plan: sandboxes.SandboxPlan,
                 limits: Limits, modules: list[str], chapter_folders: list[Path] | None = None,
                 uids: sandboxes.UidPool | None = None, start_timeout_s: float = 120.0,
                 compile_cache: Path | None = None, read_caches: list[Path] | None = None,
                 template: Template | None = None, entry: str = "grader.child.host",
                 caps: tuple[str, ...] = (), config: dict | None = None,
                 words: tuple[type[StrEnum], type[StrEnum]] = (ToHost, FromHost), device: DevicePlan | None = None):
        self.side = side
        #: where its jobs run (:mod:`grader.runner.devices`); ``None``: :func:`~grader.runner.devices.default_plan`
        self.device = device
        #: the uid its jobs on an exclusive device share (under per-job uids), taken at the first
        self._device_uid: int | None = None
        self.orders, self.says = words
        #: JAX's persistent compilation cache of this side (:mod:`grader.store`), writable by its jobs
        self.compile_cache = compile_cache
        #: caches its jobs may also load programs from, by key only (never written, never listed)
        self.read_caches = [Path(p) for p in read_caches or []]
        #: forks this host instead of starting a process for it (its sandbox is the template's)
        self.template = template
        #: the module the process runs, the capabilities it keeps in its sandbox, and more of its config
        self.entry, self.caps, self.config = entry, caps, dict(config or {})
        self.modules = list(modules)
        self.chapter_folders = [Path(f) for f in chapter_folders or []]
        self.module_dir = Path(module_dir)
        self.scratch = Path(scratch)
        self.plan = plan
        self.limits = limits
        self.uids = uids
        self.start_timeout_s = start_timeout_s
        self.versions: dict = {}
        self._proc: subprocess.Popen | Spawned | None = None
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
        #: a batch worker's reference host keeps its timed exercises' jobs here (:mod:`grader.runner.kept`)
        self.kept: "KeptJobs | None" = None
        #: a batch's students: the class's compiler their jobs ask (:mod:`grader.runner.class_compiler`)
        self.compiler: "Compiles | None" = None
        #: the student's jobs record the programs their functions trace to (``grade batch --similarity``:
        #: :mod:`grader.child.programs`)
        self.programs = False
        #: the group its jobs take besides their uid: the grading's, which alone may enter the grading's
        #: scratch folder (:attr:`grader.grading.Grading.group`); ``None``: no per-job uids
        self.group: int | None = None

    # ------------------------------------------------------------- life cycle
    def start(self) -> None:
        """Start the host process; returns at once (see :meth:`wait_ready`)."""
        self._ready.clear()
        self._failed = None
        home = self.scratch / "home"
        pylib = self.scratch / "pylib"
        home.mkdir(parents=True, exist_ok=True)
        pylib.mkdir(parents=True, exist_ok=True)
        # a student's jobs (uids of their own) pass through to their folders; the trusted reference's are its own
        os.chmod(self.scratch, 0o700 if self.side == "reference" else 0o755)
        os.chmod(home, 0o755)  # the host's own: its jobs have homes of their own
        link = pylib / "grader"
        if self.plan.kind != "bwrap" and not link.exists():
            link.symlink_to(GRADER_PACKAGE, target_is_directory=True)
        elif self.plan.kind == "bwrap":
            link.mkdir(exist_ok=True)
        if self.plan.kind != "bwrap":  # JAX where the user's Python found it outside its site folders
            for name, source in sandboxes.jax_stack():
                if not (pylib / name).is_symlink():
                    (pylib / name).symlink_to(source)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        (self.scratch / "jobs").mkdir(exist_ok=True)
        if self.side in ("student", "template") and self.plan.uid_isolation:
            # what its jobs write stops at the size of a tmpfs (root alone mounts; elsewhere the grader's
            # watch and the jobs' seccomp filter hold the limit)
            sandboxes.cap_folder(self.scratch / "jobs", self.limits.disk_bytes + sandboxes.SCRATCH_MARGIN_BYTES)
        os.chmod(self.scratch / "jobs", 0o711)
        try:
            self._proc = self.template.spawn(theirs) if self.template is not None else \
                self._popen(theirs, home, pylib, link)
        except OSError as exc:
            self._proc, self._failed = None, f"host not started: {exc}"
            ours.close()
            self._ready.set()
            return
        finally:
            theirs.close()
        self._control = Channel(ours, expects=self.says)
        threading.Thread(target=self._read_control, args=(self._control, self._proc), daemon=True,
                         name=f"host-{self.side}").start()

    def _popen(self, theirs: socket.socket, home: Path, pylib: Path, link: Path) -> subprocess.Popen:
        """Start the host's process in its sandbox."""
        config = json.dumps({"modules": self.modules, "chapter_folders": [str(f) for f in self.chapter_folders],
                             **self.config})
        python_argv = [sys.executable, "-s", "-m", self.entry, str(theirs.fileno()), config]
        plan = self.device_plan()
        argv = sandboxes.host_command(
            self.plan, python_argv=python_argv,
            binds_ro=[(GRADER_PACKAGE, link), *((source, pylib / name) for name, source in sandboxes.jax_stack()),
                      (self.module_dir, self.module_dir),
                      *((folder, folder) for folder in self.chapter_folders),
                      *((folder, folder) for folder in self.read_caches)],
            binds_rw=[self.scratch / "jobs", home, *([self.compile_cache] if self.compile_cache else [])],
            # a student's host may give each job a /tmp of its own (:func:`grader.child.confine.private_tmp`)
            keep_fds=[theirs.fileno()], caps=self.caps + (("CAP_SYS_ADMIN",) if self.side == "student" else ()),
            user_caps=self.caps if self.side == "template" else (),
            devices=plan.accelerator.nodes if plan.accelerator is not None and plan.platform != "cpu" else (),
        )
        return subprocess.Popen(
            argv, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
            stdout=open(self.scratch / "host.log", "ab"), stderr=subprocess.STDOUT,
            env=scrubbed_environment(home, pylib), cwd=str(home), start_new_session=True,
        )

    def _read_control(self, control: Channel, proc) -> None:
        while True:
            try:
                message = control.recv()
            except (ProtocolError, OSError) as exc:
                message = None
                if self._control is control:  # not while the grader is stopping it
                    log.warning("%s host: bad control message: %s", self.side, exc)
            if message is None:
                with self._events_cv:
                    if self._control is control:
                        self._failed = self._failed or "host exited"
                    self._events_cv.notify_all()
                self._ready.set()
                return
            word = word_of(message, self.says)
            if word in (FromHost.READY, FromTemplate.READY):
                self.versions = message.get("versions", {})
                self._ready.set()
                continue
            if word is FromHost.FAILED:  # a forked host that could not be isolated: it never serves
                self._failed = str(message.get("error", "host failed"))
                self._ready.set()
                continue
            with self._events_cv:
                self._events.setdefault(str(message.get("job", message.get("host"))), []).append(message)
                self._events_cv.notify_all()

    def why_failed(self) -> str | None:
        """Why the process could not start, in one line (the last error its log names), else ``None``."""
        if self._failed is None or self.versions:
            return None
        return failure_line(self.log_tail())

    def device_plan(self) -> DevicePlan:
        """Where its jobs run (:mod:`grader.runner.devices`)."""
        return self.device if self.device is not None else devices.default_plan()

    def device_uid(self) -> int:
        """The uid its jobs on an exclusive device share, taken once (released when it stops)."""
        if self._device_uid is None:
            self._device_uid = self.uids.acquire()
        return self._device_uid

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
                    control.send(message(self.orders.EXIT))
            except OSError:
                pass
        if proc is not None:
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
            if proc.poll() is None:
                if isinstance(proc, subprocess.Popen):
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                else:
                    proc.kill()
                proc.wait(timeout=10)
        if control is not None:
            control.close()
        if self._device_uid is not None and self.uids is not None:
            self.uids.release(self._device_uid)
            self._device_uid = None

    def log_tail(self) -> str:
        try:
            return (self.scratch / "host.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    # ------------------------------------------------------------- jobs
    def send(self, message: dict, fds: list[int] | None = None) -> None:
        if self._control is None:
            raise OSError("host not running")
        with self._send_lock:
            if fds:
                self._control.send_with_fds(message, fds)
            else:
                self._control.send(message)

    def set_cores(self, cores: list[int], apart: list[str]) -> bool:
        """Have the host and its jobs, but those named in ``apart``, run on the CPUs ``cores``
        (:mod:`grader.affinity`); whether every thread of them was moved."""
        try:
            self.send(message(ToHost.CORES, cores=list(cores), apart=list(apart)))
        except OSError:
            return False
        said = self.next_event(ToHost.CORES.value, {FromHost.CORES}, time.monotonic() + 2.0)
        return bool(said and said.get("ok") is True)

    @property
    def failed(self) -> bool:
        """Whether the process failed, ended or was stopped (no event comes any more)."""
        return self._failed is not None

    def forget(self, name: str) -> None:
        """Let go of the events of ``name`` (a job or host that has ended)."""
        with self._events_cv:
            self._events.pop(name, None)

    def next_event(self, job: str, ops: set[StrEnum], deadline: float) -> dict | None:
        """The first event of ``job`` (a job's or a forked host's name) saying one of ``ops``, taken; ``None``
        when none comes by ``deadline`` or the process failed."""
        with self._events_cv:
            while True:
                for i, event in enumerate(self._events.get(job, [])):
                    if event.get(OP) in ops:
                        return self._events[job].pop(i)
                if self._failed:
                    return None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._events_cv.wait(remaining)

    def session(self, *, exercise: str, student_module: str, package: str, functions: tuple[str, ...],
                timeout_s: float, options: dict | None = None, import_timeout_s: float | None = None,
                measures_device: bool = False) -> JobSession:
        """A new job (not started): the student's ``student_module`` probed by the exercise ``package``;
        ``measures_device``: its checks measure the device (:class:`~grader.runner.devices.DevicePlan`)."""
        self._counter += 1
        return JobSession(self, f"{exercise}-{self._counter}", exercise=exercise, student_module=student_module,
                          package=package, functions=functions, timeout_s=timeout_s, options=options,
                          import_timeout_s=import_timeout_s, measures_device=measures_device)

    def exercise_session(self, ex: ExerciseSpec, timeout_s: float) -> JobSession:
        """A new job (not started) of the exercise ``ex`` (a :class:`~grader.chapter.ExerciseSpec`)
        with its settings; the import limit applies to the student's side only."""
        return self.session(exercise=ex.id, student_module=ex.student_module, package=ex.package_name,
                            functions=ex.functions, timeout_s=timeout_s,
                            options={"sync_cpu_dispatch": ex.sync_cpu_dispatch, "quick_compile": ex.quick_compile,
                                     "quick_until_timed": ex.quick_until_timed,
                                     "compile_cache": str(self.compile_cache) if self.compile_cache else None,
                                     "compile_cache_read": [str(p) for p in self.read_caches],
                                     "class_compiler": self.compiler is not None,
                                     "programs": self.programs and self.side == "student"},
                            import_timeout_s=min(ex.import_timeout_s, timeout_s) if self.side == "student" else None,
                            measures_device=ex.device)
