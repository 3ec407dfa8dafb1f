"""The grader's handle on a template of hosts (:mod:`grader.child.template`): :class:`HostTemplate`, a
sandboxed process that has imported JAX already and forks a host on :meth:`~HostTemplate.spawn`, each with
a fresh ``/tmp`` and IPC namespace of its own: a batch worker's students each get a host that way, in a
few milliseconds. The template is itself a :class:`~grader.runner.host_handles.HostProcess` (its own
entry, its own words)."""
from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path

from grader.protocol import FromTemplate, ToTemplate, message
from grader.runner import sandbox as sandboxes
from grader.runner.host_handles import HostProcess
from grader.runner.job_sessions import Limits


class HostTemplate:
    """The grader's handle on a template (:mod:`grader.child.template`): a sandboxed process with
    JAX imported that forks a host on :meth:`spawn`, each starting clean (an IPC namespace of
    its own, nothing a job made left in ``/tmp``).

    Its sandbox is every forked host's: it binds ``stage`` (read-only: where each student's
    modules are put, one student at a time) and the ``read_caches``, and its scratch
    folder's ``jobs`` and ``home``. It keeps the capabilities to start each host clean; the
    hosts' jobs drop every capability with their uid.
    """

    def __init__(self, *, stage: Path, scratch: Path, plan: sandboxes.SandboxPlan, limits: Limits,
                 modules: list[str], chapter_folders: list[Path] | None = None, read_caches: list[Path] | None = None,
                 compile_cache: Path | None = None, isolate: bool = True):
        """``compile_cache``: a cache its hosts' jobs write (bound writable in its sandbox); ``isolate``:
        each host starts clean (``False``: the trusted reference's template, outside any sandbox)."""
        self.process = HostProcess(side="template" if isolate else "reference", module_dir=stage, scratch=scratch,
                                   plan=plan, limits=limits, modules=modules, chapter_folders=chapter_folders,
                                   read_caches=read_caches, compile_cache=compile_cache,
                                   entry="grader.child.template",
                                   caps=("CAP_SYS_ADMIN", "CAP_DAC_OVERRIDE", "CAP_FOWNER") if isolate else (),
                                   config={} if isolate else {"isolate": False},
                                   words=(ToTemplate, FromTemplate))
        self._counter = 0
        self._lock = threading.Lock()
        #: hosts seen to end (their events are let go)
        self._gone: set[str] = set()

    def start(self) -> None:
        self.process.start()

    def works(self) -> bool:
        """Whether a host it forks comes up isolated (a sandbox without the capability cannot)."""
        probe = HostProcess(side="student", module_dir=self.process.module_dir, scratch=self.process.scratch,
                            plan=self.process.plan, limits=self.process.limits, modules=self.process.modules,
                            template=self)
        try:
            probe.start()
            return probe.wait_ready(60)
        finally:
            probe.stop(grace_s=5)

    def spawn(self, sock: socket.socket) -> "_Forked":
        """Fork a host whose control socket is ``sock`` (the other end is the grader's)."""
        if not self.process.ensure():
            raise OSError(f"the host template is not running: {self.process.log_tail()[-300:]}")
        with self._lock:
            self._counter += 1
            name = f"host-{self._counter}"
        self.process.send(message(ToTemplate.SPAWN, host=name), [sock.fileno()])
        if self.process.next_event(name, {FromTemplate.SPAWNED}, time.monotonic() + 60) is None:
            raise OSError("the host template did not fork a host")
        return _Forked(self, name)

    def ended(self, name: str) -> bool:
        """Whether the host ``name`` has ended (or the template, and with it every host)."""
        return self.wait_ended(name, 0)

    def wait_ended(self, name: str, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds for the host ``name`` to end; whether it has."""
        if name in self._gone:
            return True
        deadline = time.monotonic() + (timeout if timeout is not None else 3600)
        if self.process.next_event(name, {FromTemplate.HOST_EXITED}, deadline) is None and not self.process.failed:
            return False
        self._gone.add(name)
        self.process.forget(name)
        return True

    def kill(self, name: str) -> None:
        try:
            self.process.send(message(ToTemplate.KILL, host=name))
        except OSError:
            pass

    def close(self) -> None:
        """Stop the template and every host it forked."""
        self.process.close()


class _Forked:
    """A host the template forked, seen as :class:`subprocess.Popen` sees a process (``poll``,
    ``wait``, ``kill``); its pid is the template's to know."""

    def __init__(self, template: HostTemplate, name: str):
        self.template = template
        self.name = name

    def poll(self) -> int | None:
        return 0 if self.template.ended(self.name) else None

    def wait(self, timeout: float | None = None) -> int:
        if not self.template.wait_ended(self.name, timeout):
            raise subprocess.TimeoutExpired(self.name, timeout or 0)
        return 0

    def kill(self) -> None:
        self.template.kill(self.name)
