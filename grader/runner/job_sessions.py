"""The grader's handle on one job: :class:`JobSession`, and how a job ended: :class:`JobOutcome`
(:mod:`grader.runner.outcome`).

A job is a process the host forks for one exercise (:mod:`grader.child.job` is its
code). The session speaks the job protocol, enforces the exercise's wall-clock deadline
and always ends with a :class:`JobOutcome`: what was recorded, and how the job ended.

Every failure mode ends in an outcome, never an exception: an import error, an exit,
a crash, a hang (killed at the deadline, after asking the job where it was), a
protocol violation, the disk budget, cancellation, or the host itself dying.

What the session needs of its host and of the class's compiler is named in :mod:`grader.runner.job_host`;
what it keeps of the job's output, in :mod:`grader.runner.job_output`.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.child.job_start import XLA_DUMP
from grader.child.job import STACK_FILE
from grader.runner import sandbox as sandboxes
from grader.runner.devices import DeviceLease
from grader.runner.job_host import JobHost
from grader.runner.job_output import output_excerpt
from grader.runner.outcome import JobOutcome
from grader.runner.traces import count_xla_modules, disk_usage, dumped_line
from grader.protocol import FromHost, FromJob, ToHost, ToJob, fields, message, word_of
from grader.wire import Channel, ProtocolError

log = logging.getLogger("grader")

#: the least time a message to a job may take to go (a large one, to a job busy on a loaded machine)
SEND_S = 5.0


@dataclass
class Limits:
    """Per-job limits, applied in the job (rlimits) or watched by the grader (disk)."""

    #: CPU seconds (at least twice the job's wall-clock limit)
    cpu_s: float = 120
    #: address space on top of what JAX's start-up took (CPU backend only)
    memory_bytes: int = 4 << 30
    #: processes and threads of the job's uid (its own under per-job uids); where jobs have the user's
    #: uid, this many beyond what the user runs as the job starts (:func:`grader.child.job_start.tasks_of_user`),
    #: and none for the reference's jobs (trusted)
    nproc: int = 256
    #: the largest file the job may write (its output included)
    fsize_bytes: int = 64 << 20
    #: open file descriptors
    nofile: int = 512
    #: bytes in the job's scratch folder, watched by the grader up to ten times a second (and, as root, the
    #: hard size of the tmpfs its host's jobs write in, :func:`grader.runner.sandbox.cap_folder`)
    disk_bytes: int = 256 << 20

    def for_job(self, timeout_s: float) -> dict:
        return {"cpu_s": int(max(self.cpu_s, timeout_s * 2) + 1), "memory_bytes": self.memory_bytes,
                "nproc": self.nproc, "fsize_bytes": self.fsize_bytes, "nofile": self.nofile, "core": 0}


class JobSession:
    """One forked job, driven through the job protocol under one deadline."""

    def __init__(self, host: JobHost, name: str, *, exercise: str, student_module: str, package: str,
                 functions: tuple[str, ...], timeout_s: float, options: dict | None = None,
                 import_timeout_s: float | None = None, measures_device: bool = False):
        self.host = host
        #: the exercise's checks measure the device (its ``device`` setting): on a device that admits one
        #: process at a time it takes its turn there (:class:`grader.runner.devices.DeviceLease`), else
        #: it runs on the CPU beside it
        self.measures_device = measures_device
        #: the lease this job holds while it runs on such a device, else ``None``
        self.lease: DeviceLease | None = None
        #: the exercise package whose probe the job runs (``grader.chapters.ch4.ex02_where``)
        self.package = package
        self.import_timeout_s = import_timeout_s
        #: where the job is, one of :data:`PHASES`
        self.phase = "starting"
        self.calling: str | None = None
        self.options = options or {}
        self.name = name
        self.exercise = exercise
        #: the student's module the job imports (``ex02_where``)
        self.student_module = student_module
        self.functions = functions
        self.timeout_s = timeout_s
        self.outcome = JobOutcome(end="not_started", side=host.side)
        #: set when a call of the student's gets past ``NotImplementedError`` (returns or raises)
        self.attempted = threading.Event()
        #: a reference job's records for each seed drawn ahead, by its index in what was sent (:mod:`grader.ahead`)
        self.ahead: dict[int, dict] = {}
        self.channel: Channel | None = None
        self.uid: int | None = None
        self._started = 0.0
        self.deadline = 0.0
        self._workdir: Path | None = None
        self._output: Path | None = None
        self._disk_checked = 0.0
        #: seconds between two looks at its disk use: twenty times what the last look cost, within
        #: :data:`DISK_POLL_MIN_S` and :data:`DISK_POLL_S` (a folder of few files is looked at ten times a second)
        self._disk_every = DISK_POLL_MIN_S
        self._cache_at_start = 0

    # ------------------------------------------------------------- start
    def start(self) -> bool:
        """Fork the job and wait until it has imported the module; False if it ended."""
        host = self.host
        if not host.ensure():  # a host's start-up is not the exercise's time
            self._started = time.monotonic()
            self.outcome.end = "host_lost"
            self.outcome.detail = {"log": host.log_tail(), "host_error": host.why_failed()}
            return False
        plan = host.device_plan()
        platform = plan.platform_for(self.measures_device)
        on_device = plan.on_device(self.measures_device) and platform == plan.accelerator.jax_platform
        self.options = {**self.options, "platform": platform, "on_device": on_device}
        if on_device:  # one job at a time on the device
            if not self._take_turn(plan.lease):  # the grading was cancelled meanwhile
                self.outcome.end = "cancelled"
                return False
        self._started = time.monotonic()
        self.deadline = self._started + self.timeout_s
        # what the job may write: its folder and its side's cache's growth (the trusted reference's not counted)
        self._cache_counted = host.compile_cache is not None and host.side != "reference"
        self._workdir = Path(tempfile.mkdtemp(prefix=f"{self.exercise}-", dir=host.scratch / "jobs"))
        self._cache_at_start = disk_usage(host.compile_cache) if self._cache_counted else 0
        output_dir = host.scratch / "output"
        output_dir.mkdir(exist_ok=True)
        self._output = output_dir / f"{self.name}.txt"
        out_fd = os.open(self._output, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
        limits = host.limits.for_job(self.timeout_s)
        order = message(
            ToHost.FORK, job=self.name, exercise=self.exercise, package=self.package,
            chapter_modules=host.modules, student_module=self.student_module, module_dir=str(host.module_dir),
            functions=list(self.functions), workdir=str(self._workdir), limits=limits, options=self.options,
            side=host.side,
        )
        if host.uids is not None and host.plan.uid_isolation:
            # a device's jobs share one uid: libtpu's lock file (mode 0600) stays its creator's
            self.uid = host.device_uid() if self.lease is not None else host.uids.acquire()
            order["uid"] = self.uid
            if host.group is not None:
                order["groups"] = [host.group]
            os.chown(self._workdir, self.uid, self.uid)
        elif host.side == "reference":
            limits.pop("nproc", None)  # trusted, and under the user's own uid: no limit counts its threads
        else:  # no uid of its own: its processes and threads beyond what the user runs as it starts
            limits["nproc_beyond_user"] = True
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            host.send(order, [theirs.fileno(), out_fd])
        except OSError:
            self.outcome.end = "host_lost"
            return False
        finally:
            theirs.close()
            os.close(out_fd)
        self.channel = Channel(ours, expects=FromJob)
        hello = self.expect({FromJob.HELLO, FromJob.NO_BACKEND})
        self._work("hello_s", round(time.monotonic() - self._started, 3))  # the backend's start, mostly
        if hello is None:
            return False
        if word_of(hello, FromJob) is FromJob.NO_BACKEND:  # the accelerator taken, say: the grading decides
            self._end("no_backend", {"error": str(hello.get("error", ""))[:800]})
            return False
        self.outcome.env = hello.get("env")
        self._work("started_cpu_s", hello.get("cpu_s"))
        if isinstance(hello.get("memory"), dict):
            self.outcome.detail["memory"] = {k: hello["memory"].get(k) for k in ("rss_kb", "vm_kb", "limit_bytes")}
        self._set_phase("importing")
        limit = time.monotonic() + self.import_timeout_s if self.import_timeout_s else None
        imported = self.expect({FromJob.IMPORTED, FromJob.IMPORT_ERROR}, deadline=limit)
        if imported is None:
            return False
        self._set_phase("running")
        if word_of(imported, FromJob) is FromJob.IMPORT_ERROR:
            self.outcome.end = "import_error"
            self.outcome.detail.update(fields(imported))
            return False
        self._work("imported_cpu_s", imported.get("cpu_s"))
        self.outcome.names = imported.get("names", {})
        skipped = imported.get("skipped")
        self.outcome.skipped = [item for item in skipped[:20] if isinstance(item, dict)] \
            if isinstance(skipped, list) else []
        return True

    def _take_turn(self, lease: DeviceLease) -> bool:
        """Wait for the device (another job of the grading holds it), as long as the grading goes on."""
        while not self.host.closed:
            if lease.acquire(self.name, time.monotonic() + 0.2):
                self.lease = lease
                return True
        return False

    def renew(self, timeout_s: float) -> None:
        """A deadline from now (a job started early, driven from now on: :mod:`grader.runner.kept`)."""
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s

    def send_inputs(self, inputs: dict, ahead: list[dict] | None = None, part: tuple[int, int] = (0, 1)) -> bool:
        return self.send(message(ToJob.INPUTS, inputs=inputs, **({"ahead": ahead} if ahead else {}),
                                 **({"part": list(part)} if part[1] > 1 else {})))

    # ------------------------------------------------------------- conversation
    def send(self, message: dict) -> bool:
        if self.channel is None:
            return False
        try:  # a job that takes in nothing more (stuck, or hostile) holds the grader until its deadline at most
            self.channel.send(message, timeout=max(SEND_S, (self.deadline or 0) - time.monotonic()))
            return True
        except OSError:  # TimeoutError included
            return False

    def expect(self, ops: set[FromJob], *, deadline: float | None = None) -> dict | None:
        """Receive until a message saying one of the words ``ops``; records are stored on the way.

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
                said = self.channel.recv(timeout=min(remaining, self._disk_every))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    self._timed_out()
                    return None
                continue
            except (ProtocolError, OSError) as exc:
                self._end("protocol_error", {"error": str(exc)})
                return None
            if said is None:
                self._end("crashed")
                return None
            op = word_of(said, FromJob)
            if op is FromJob.RECORD:
                value = said.get("value")
                if self._observe(said.get("key"), value) and isinstance(value, dict) \
                        and value.get("status") in ("ok", "raised"):
                    self.attempted.set()
            elif op is FromJob.MARK:  # the job waits for GO: what it does next starts after this stamp
                self._observe(said.get("key"), True)
                self.send(message(ToJob.GO))
            elif op is FromJob.PROGRAMS:  # what the functions traced to: the class's similarity's, no check's
                functions = said.get("functions")
                if isinstance(functions, dict):
                    self.outcome.programs.update({str(k): v for k, v in functions.items() if isinstance(v, dict)})
            elif op is FromJob.CALLING:
                self.calling = str(said.get("function", "?"))[:80]
                self._set_phase("calling")
            elif op is FromJob.COMPILE:  # the job waits for the answer: its own compile, done elsewhere
                self._compile(said, deadline)
            elif op is FromJob.AHEAD and type(said.get("index")) is int and isinstance(said.get("records"), dict):
                self.ahead[said["index"]] = said["records"]
            elif op is FromJob.INTEGRITY and len(self.outcome.integrity) < 4:
                self.outcome.integrity.append({k: said.get(k) for k in ("stage", "changed", "compiles_total")})
            if op in ops:
                return said
            if op is FromJob.PROBE_ERROR:
                self._end("probe_error", {"type": said.get("type"), "traceback": said.get("traceback")})
                return None

    def _compile(self, asked: dict, deadline: float) -> None:
        """Have the class's compiler compile the program the job sent; tell the job its key (``None``: the
        job compiles it itself). It waits no longer than the job's own deadline."""
        compiler = getattr(self.host, "compiler", None)
        key = None
        if compiler is not None and isinstance(asked.get("module"), str) and isinstance(asked.get("options"), str):
            key, spent = compiler.compile(asked["module"], asked["options"], deadline)
            # the compiler's CPU for this job, in its timings (the job's own count leaves it out)
            self.outcome.work["class_compiler_cpu_s"] = round(self.outcome.work.get("class_compiler_cpu_s", 0.0)
                                                              + spent, 4)
        self.send(message(ToJob.COMPILED, key=key))

    def _observe(self, key: Any, value: Any) -> bool:
        """Keep a record of the child's, stamped now; ``False`` for a key it may not write: one of
        the grader's own (``grader/...``) or one already recorded."""
        if not isinstance(key, str) or key.startswith("grader/") or key in self.outcome.records:
            return False
        self.outcome.records[key] = value
        self.outcome.arrivals[key] = time.monotonic() - self._started
        return True

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
            self.host.send(message(ToHost.DUMP, job=self.name))
        except OSError:
            return None
        return dumped_line(self._workdir / STACK_FILE, os.path.realpath(str(self.host.module_dir)))

    def _over_disk(self) -> bool:
        """Stop a job whose scratch folder outgrows its budget (looked at up to ten times a second)."""
        now = time.monotonic()
        if self._workdir is None or now - self._disk_checked < self._disk_every:
            return False
        used = disk_usage(self._workdir)
        if self._cache_counted:
            used += max(0, disk_usage(self.host.compile_cache) - self._cache_at_start)
        self._disk_checked = time.monotonic()
        self._disk_every = min(DISK_POLL_S, max(DISK_POLL_MIN_S, 20 * (self._disk_checked - now)))
        if used > self.host.limits.disk_bytes:
            self._end("disk_limit", {"disk_bytes": used, "limit": self.host.limits.disk_bytes})
            return True
        return False

    def abandon(self) -> None:
        """The grader no longer needs this job (from any thread): it stops waiting for it at once,
        and :meth:`finish` kills it without waiting."""
        self._end("abandoned")
        if self.channel is not None:
            with contextlib.suppress(OSError):  # wakes a thread blocked reading from the job
                self.channel.sock.shutdown(socket.SHUT_RDWR)

    def run_to_end(self) -> None:
        done = self.expect({FromJob.DONE})
        if done is not None:
            self.outcome.end = "done"
            work = done.get("work")
            for key, value in (work.items() if isinstance(work, dict) else ()):
                self._work(key, value)

    def _work(self, key: str, value: Any) -> None:
        """Keep one of the job's figures of what it spent (a number; anything else is dropped)."""
        if isinstance(key, str) and len(self.outcome.work) < 16 and isinstance(value, (int, float)) \
                and not isinstance(value, bool):
            self.outcome.work[key[:32]] = value

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
        ending = time.monotonic()
        # a process that held an accelerator takes seconds to let it go (a TPU v5e: 2 to 4 s): it is
        # waited for longer before it is killed, and the device's next job waits for it all the same
        exited = host.next_event(self.name, {FromHost.EXITED}, ending + (EXIT_WAIT_DEVICE_S if self.lease else 3.0))
        if exited is None:
            self._kill()
            exited = host.next_event(self.name, {FromHost.EXITED}, time.monotonic() + 2.0)
        self._work("exit_s", round(time.monotonic() - ending, 3))
        if exited is not None:
            self.outcome.detail.setdefault("exit", {k: v for k, v in exited.items() if k in ("code", "signal")})
            if isinstance(exited.get("cpu_s"), float):
                self.outcome.work["total_cpu_s"] = round(exited["cpu_s"], 4)
            for said, kept in (("peak_rss_kb", "peak_kb"), ("peak_vm_kb", "peak_vm_kb")):  # resident, reserved
                if "memory" in self.outcome.detail and isinstance(exited.get(said), int):
                    self.outcome.detail["memory"][kept] = exited[said]
        elif self.outcome.end != "host_lost" and not host.alive():
            self.outcome.detail.setdefault("host", host.log_tail())
        if self.uid is not None and host.uids is not None:
            if self.lease is not None:  # the device's uid, kept for its next job: only what it left is ended
                sandboxes.kill_uid(self.uid)
            else:
                host.uids.release(self.uid)
        if self.lease is not None:  # its process has ended (or was killed): the device is free
            self.lease.release()
            self.lease = None
        self._read_output()
        if self._workdir is not None:
            self.outcome.xla_compiles = count_xla_modules(self._workdir / XLA_DUMP)
            shutil.rmtree(self._workdir, ignore_errors=True)
        self.outcome.duration_s = time.monotonic() - self._started
        return self.outcome

    def _kill(self) -> None:
        if self.uid is not None:
            sandboxes.kill_uid(self.uid)
        with contextlib.suppress(OSError):
            self.host.send(message(ToHost.KILL, job=self.name))

    def _read_output(self) -> None:
        if self._output is None or not self._output.exists():
            return
        self.outcome.output, self.outcome.output_bytes = output_excerpt(self._output)
        self._output.unlink(missing_ok=True)


DISK_POLL_S = 1.0
DISK_POLL_MIN_S = 0.1
#: how long a job that held an exclusive device is given to end by itself once it is done (its runtime
#: lets the chip go as the process ends)
EXIT_WAIT_DEVICE_S = 10.0
#: where a job can be: ``starting`` (forked, JAX's backend starting), ``importing`` (the
#: student's module), ``running`` (the probe, between calls), ``calling`` (one of the
#: student's functions, named by ``JobSession.calling``), ``ended``
PHASES = ("starting", "importing", "running", "calling", "ended")
def run_job(session: JobSession, inputs: dict, ahead: list[dict] | None = None,
            part: tuple[int, int] = (0, 1)) -> JobOutcome:
    """Fork, import, send the inputs (``ahead``: :attr:`JobSession.ahead`; ``part``: which of how many jobs sharing
    the probe this is), and let the probe run to the end."""
    try:
        if session.start() and session.send_inputs(inputs, ahead, part):
            session.run_to_end()
    finally:
        outcome = session.finish()
    return outcome
