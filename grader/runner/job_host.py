"""What a job's session needs of the host that forks its job (:class:`JobHost`, which
:class:`grader.runner.host_handles.HostProcess` satisfies as it is), of the limits it holds
(:class:`JobLimits`: :class:`grader.runner.job_sessions.Limits`) and of the class's compiler
(:class:`Compiles`), each named as a ``Protocol`` so that the session imports none of them."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol

from grader.protocol import FromHost
from grader.runner import sandbox as sandboxes
from grader.runner.devices import DevicePlan


class JobLimits(Protocol):
    """A host's per-job limits, as a session uses them (:class:`grader.runner.job_sessions.Limits`)."""

    #: bytes in the job's scratch folder, watched by the grader
    disk_bytes: int

    def for_job(self, timeout_s: float) -> dict: ...


class Compiles(Protocol):
    """The class's compiler, as a job's session uses it (:class:`grader.runner.class_compiler.ClassCompiler`)."""

    def compile(self, module: str, options: str, deadline: float) -> tuple[str | None, float]:
        """``(key, cpu_s)``: where the program is (``None``: not there) and what compiling it cost."""
        ...


class JobHost(Protocol):
    """What a job needs of the host that forks it (:class:`grader.runner.host_handles.HostProcess`)."""

    #: ``student`` or ``reference``
    side: str
    #: the folder the job imports the student's (or the reference's) modules from
    module_dir: Path
    #: the host's scratch folder: ``jobs/`` (each job's folder), ``output/`` (what jobs print)
    scratch: Path
    #: the side's compilation cache that its jobs write, if any (its growth counts against a job's disk)
    compile_cache: Path | None
    limits: JobLimits
    plan: sandboxes.SandboxPlan
    uids: sandboxes.UidPool | None
    #: the group its jobs take besides their uid (the grading's), if any
    group: int | None
    #: closed for good: grading was cancelled
    closed: bool
    #: told of every job's progress (called with the job's session)
    listener: Callable[[Any], None] | None
    #: a batch's students: what compiles the programs their jobs ask for (``compile(module, options, deadline)``)
    compiler: "Compiles | None"

    def ensure(self) -> bool: ...

    def alive(self) -> bool: ...

    def log_tail(self) -> str: ...

    def send(self, message: dict, fds: list[int] | None = None) -> None: ...

    def next_event(self, job: str, ops: set[FromHost], deadline: float) -> dict | None: ...

    def device_plan(self) -> DevicePlan: ...

    def device_uid(self) -> int: ...

    def why_failed(self) -> str | None: ...
