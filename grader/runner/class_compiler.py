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

from grader.protocol import FromJob, ToJob, message
from grader.runner import sandbox as sandboxes
from grader.runner.host_handles import HostProcess
from grader.runner.job_sessions import JobSession, Limits

log = logging.getLogger("grader")

#: the compiler's job lives as long as the batch (a request's own limit is the asking job's deadline)
LIFE_S = 7 * 24 * 3600.0
#: after this many of its jobs failed to start, the compiler is no longer asked
MAX_FAILURES = 3
#: a request waits at most this long for the one before it; then its job compiles the program itself
MAX_QUEUE_S = 2.0


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
        #: the compiler's jobs that did not start, and that ended without answering
        self.failures = self.ended = 0
        #: requests answered with a key, and with none
        self.answered = self.refused = 0
        #: what the compiler's job spent (its CPU seconds: ``total_cpu_s``), once closed
        self.work: dict = {}

    def start(self) -> None:
        """Start the host now (it imports JAX while other work runs)."""
        self.host.start()

    def compile(self, module: str, options: str, deadline: float) -> str | None:
        """The key the program ``module`` (MLIR bytecode, base64) compiled with ``options`` (serialized,
        base64) is in the class's cache under; ``None`` when it is not there by ``deadline``."""
        wait = min(MAX_QUEUE_S, deadline - time.monotonic())
        if self.failures >= MAX_FAILURES or wait <= 0 or not self._lock.acquire(timeout=wait):
            return None  # busy with a long program (a classmate's): the asking job compiles its own
        try:
            session = self._server()
            if session is None or not session.send(message(ToJob.COMPILE, module=module, options=options)):
                return self._failed()
            answer = session.expect({FromJob.COMPILED}, deadline=deadline)
            if answer is None:
                return self._failed()
            key = answer.get("key")
            if isinstance(key, str):
                self.answered += 1
                return key
            self.refused += 1
            return None
        finally:
            self._lock.release()

    def _server(self) -> JobSession | None:
        if self._session is not None:
            return self._session
        session = self.host.session(exercise="compiler", student_module="", package="", functions=(),
                                    timeout_s=LIFE_S,
                                    options={"serve": "compiles", "compile_cache": str(self.folder),
                                             "compile_cache_read": [str(p) for p in self.host.read_caches]})
        if not session.start():
            session.finish()
            log.warning("the class's compiler did not start: %s", session.outcome.end)
            self.failures += 1  # a compiler that cannot start is no longer asked, after a few tries
            return None
        self._session = session
        return session

    def _failed(self) -> None:
        """The compiler's job gave no answer (it ran past the asking job's deadline, or a program it was
        sent crashed it: its sandbox holds it): it is ended, and the next request starts another."""
        session, self._session = self._session, None
        if session is not None:
            self.ended += 1
            log.info("the class's compiler ended: %s", session.outcome.end)
            session.abandon()
            session.finish()
        return None

    def close(self) -> None:
        """End the compiler's job (a request in progress is answered ``None`` at once) and its host."""
        self.failures = MAX_FAILURES  # asked no more
        session = self._session
        if session is not None:
            session.abandon()  # wakes a request waiting for it
        with self._lock:
            session, self._session = self._session, None
            if session is not None:
                self.work = session.finish().work
        self.host.close()
