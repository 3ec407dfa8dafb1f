"""The grader's handle on the class's compiler (:mod:`grader.child.compiler`): :class:`ClassCompiler`.

A batch worker keeps one beside its warm hosts (:mod:`grader.runner.warm`): a host of its
own in the students' sandbox (its own uid, no network, nothing of any student's
mounted), whose one job compiles, request after request, the programs students' jobs
ask for, into the class's cache (:func:`grader.store.class_dir`), which every student's
sandbox mounts read-only. Requests are taken one at a time. A request that is not
answered by the asking job's deadline, or that crashes the compiler (a program made to),
ends the compiler's job; the next request starts a new one. A compiler that cannot start
is no longer asked: each job then compiles its programs itself, as before.
"""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import NamedTuple

from grader.protocol import FromJob, ToJob, message
from grader.runner import sandbox as sandboxes
from grader.runner.host_handles import HostProcess
from grader.runner.job_sessions import JobSession, Limits

log = logging.getLogger("grader")

#: the compiler's job lives as long as the batch (a request's own limit is the asking job's deadline)
LIFE_S = 7 * 24 * 3600.0
#: after this many of its jobs failed to start, the compiler is no longer asked
MAX_FAILURES = 3
#: a request waits at most this long for the one before it (or for the compiler's host to be ready);
#: then its job compiles the program itself
MAX_QUEUE_S = 2.0
#: the most a request waits for the compiler's job to start (a fork, JAX's backend)
START_S = 10.0


class Compiled(NamedTuple):
    """What a request to the class's compiler gave: the program's key (``None``: the job compiles it
    itself), and the compiler's CPU seconds for it (for the asking job's timings)."""

    key: str | None
    cpu_s: float = 0.0


NONE = Compiled(None)


class ClassCompiler:
    """Compiles the programs a batch's students' jobs ask for (see the module)."""

    def __init__(self, *, folder: Path, read: list[Path], scratch: Path, plan: sandboxes.SandboxPlan):
        self.folder = Path(folder)
        empty = Path(scratch) / "modules"
        empty.mkdir(parents=True, exist_ok=True)
        self.host = HostProcess(side="compiler", module_dir=empty, scratch=Path(scratch), plan=plan,
                                limits=Limits(disk_bytes=1 << 30), modules=[], compile_cache=self.folder,
                                read_caches=read, uids=sandboxes.UidPool() if plan.uid_isolation else None)
        self._session: JobSession | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._keeper: threading.Thread | None = None
        self._closing = False
        #: the compiler's jobs that did not start, and that ended without answering
        self.failures = self.ended = 0
        #: requests answered with a key, and with none
        self.answered = self.refused = 0

    def start(self) -> None:
        """Start the host now (it imports JAX while other work runs), and the keeper that starts it
        again if it ends."""
        self.host.start()
        if self._keeper is None:
            self._keeper = threading.Thread(target=self._keep, name="class-compiler-keeper", daemon=True)
            self._keeper.start()

    def compile(self, module: str, options: str, deadline: float) -> Compiled:
        """The key the program ``module`` (MLIR bytecode, base64) compiled with ``options`` (serialized,
        base64) is in the class's cache under (``None`` when it is not there by ``deadline``), and the
        CPU seconds the compiler spent on it."""
        wait = min(MAX_QUEUE_S, deadline - time.monotonic())
        if self.failures >= MAX_FAILURES or wait <= 0 or not self._lock.acquire(timeout=wait):
            return NONE  # busy with a long program (a classmate's): the asking job compiles its own
        try:
            session = self._server(deadline)
            if session is None:
                return NONE
            if not session.send(message(ToJob.COMPILE, module=module, options=options)):
                return self._failed()
            answer = session.expect({FromJob.COMPILED}, deadline=deadline)
            if answer is None:
                return self._failed()
            key, spent = answer.get("key"), answer.get("cpu_s")
            spent = float(spent) if isinstance(spent, (int, float)) and not isinstance(spent, bool) else 0.0
            if isinstance(key, str):
                self.answered += 1
                return Compiled(key, spent)
            self.refused += 1
            return Compiled(None, spent)
        finally:
            self._lock.release()

    def _server(self, deadline: float) -> JobSession | None:
        """The compiler's job, started now if need be; ``None`` while its host is not ready (still
        importing JAX, or ended and started again by the keeper): a request waits briefly for a host
        that is starting, never for one to be started."""
        if self._session is not None:
            return self._session
        if not self.host.wait_ready(timeout=max(0.0, min(MAX_QUEUE_S, deadline - time.monotonic()))):
            if not self.host.alive():
                self._wake.set()  # the keeper starts it again
            return None
        session = self.host.session(exercise="compiler", student_module="", package="", functions=(),
                                    timeout_s=min(START_S, max(0.0, deadline - time.monotonic())),
                                    options={"serve": "compiles", "compile_cache": str(self.folder),
                                             "compile_cache_read": [str(p) for p in self.host.read_caches]})
        if not session.start():
            session.finish()
            log.warning("the class's compiler did not start: %s", session.outcome.end)
            self.failures += 1  # a compiler that cannot start is no longer asked, after a few tries
            return None
        session.renew(LIFE_S)
        self._session = session
        return session

    def _keep(self) -> None:
        """The keeper: starts the host again when a request found it ended. A thread of its own that
        lives as long as the compiler: a sandbox dies with the thread that started it (bwrap's
        ``--die-with-parent``), and a grading's threads end with the grading."""
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closing:
                return
            if not self.host.closed and not self.host.alive() and not self.host.ensure():
                self.failures += 1

    def _failed(self) -> Compiled:
        """The compiler's job gave no answer (it ran past the asking job's deadline, or a program it was
        sent crashed it: its sandbox holds it): it is ended, and the next request starts another."""
        session, self._session = self._session, None
        if session is not None:
            self.ended += 1
            log.info("the class's compiler ended: %s", session.outcome.end)
            session.abandon()
            session.finish()
        return NONE

    def close(self) -> None:
        """End the compiler's job (a request in progress is answered ``None`` at once) and its host."""
        self.failures = MAX_FAILURES  # asked no more
        self._closing = True
        self._wake.set()
        session = self._session
        if session is not None:
            session.abandon()  # wakes a request waiting for it
        with self._lock:
            session, self._session = self._session, None
            if session is not None:
                session.finish()
        self.host.close()
