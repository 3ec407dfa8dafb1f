"""A batch worker's reference jobs of timed exercises, kept from one student to the next: :class:`KeptJobs`.

A timed exercise (chapter 4's ex06) times the student's process against the
reference's, in alternating rounds, in every grading: the reference's gain is measured
in the same run as the student's. Its reference job cannot be shipped with the class's
outcomes, and starting one for every student (JAX's backend, the reference's values,
compiling and warming up every candidate) cost a batch about an eighth of each
student's core-seconds. The reference is trusted and, for one seed, does the same work
for every student: a worker keeps its job once it serves timing requests, and the next
student's grading times against the same process, in rounds alternating with that
student's, as before. Its records (made once, deterministic for the seed) stand for
each student's reference outcome.

A kept job is used for one exercise and one seed (a new seed starts a new one), by one
grading at a time (a worker grades one student at a time, and a timed exercise runs
alone), at most :data:`MOST_USES` times; one that failed, timed out or ended is
replaced. Only batch workers keep jobs (:class:`grader.runner.warm.WarmHosts`);
``grade`` starts a reference job in each grading.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Callable

from grader.protocol import FromJob, ToJob, message, word_of
from grader.runner.job_sessions import JobOutcome, JobSession

#: students one kept job serves before a fresh one is started (its CPU limit is far away)
MOST_USES = 200


class KeptSession:
    """A reference job that outlives the grading it was started for (see the module).

    Seen by a timing driver as a :class:`~grader.runner.job_sessions.JobSession` (it delegates to
    one): starting it again, or sending it the same inputs again, does nothing; asked to
    stop or abandoned while healthy, it stays, serving timing requests; :meth:`finish`
    gives a copy of its outcome so far. A job that is no longer healthy (it ended,
    crashed, timed out) is ended for good the usual way.
    """

    def __init__(self, session: JobSession, key: tuple):
        self.session = session
        self.key = key
        self.uses = 0
        self._started: bool | None = None
        self._inputs_sent = False
        self._began = time.monotonic()

    def __getattr__(self, name: str) -> Any:  # outcome, expect, host, channel, ... are the job's
        return getattr(self.session, name)

    def healthy(self) -> bool:
        """Whether the job is running and can serve the next grading."""
        return bool(self._started) and self.session.channel is not None and self.session.outcome.end == "not_started"

    def renew(self, timeout_s: float) -> None:
        """Another grading's use: its own deadline."""
        self.uses += 1
        self._began = time.monotonic()
        self.session.renew(timeout_s)

    def extend(self, timeout_s: float) -> None:
        """The same grading's use, from now on (its driver takes it, started early): a deadline from now."""
        self.session.renew(timeout_s)

    def start(self) -> bool:
        if self._started is None:
            self._started = self.session.start()
            return self._started
        return self.healthy() and self._in_step()

    def _in_step(self) -> bool:
        """Whether the job answers a ping with nothing else in between (an answer a grading stopped
        waiting for, interrupted, is read and dropped here, never taken for the next one's)."""
        if not self.session.send(message(ToJob.PING)):
            return False
        return self.session.expect({FromJob.PONG}, deadline=time.monotonic() + 30) is not None

    def send_inputs(self, inputs: dict) -> bool:
        if not self._inputs_sent:
            self._inputs_sent = self.session.send_inputs(inputs)
            return self._inputs_sent
        return self.healthy()

    def send(self, order: dict) -> bool:
        if word_of(order, ToJob) is ToJob.STOP and self.healthy():
            return False  # kept for the next grading: nothing to wait for
        return self.session.send(order)

    def abandon(self) -> None:
        if not self.healthy():
            self.session.abandon()

    def finish(self) -> JobOutcome:
        """What the job recorded so far, as a finished job's outcome; a job no longer healthy is ended."""
        if not self.healthy():
            return self.session.finish()
        outcome = self.session.outcome
        return dataclasses.replace(outcome, end="done", records=dict(outcome.records),
                                   arrivals=dict(outcome.arrivals), detail=dict(outcome.detail),
                                   duration_s=time.monotonic() - self._began, work={"kept_uses": self.uses})

    def end(self) -> None:
        """Stop the job for good (it ends its probe as any job does, or is killed)."""
        if self._started is None:
            return
        if self.healthy() and self.session.send(message(ToJob.STOP)):
            self.session.deadline = time.monotonic() + 5
            self.session.run_to_end()
        else:
            self.session.abandon()
        self.session.finish()


class KeptJobs:
    """The kept reference jobs of one host, one per timed exercise (see the module)."""

    def __init__(self) -> None:
        self._jobs: dict[str, KeptSession] = {}
        self._lock = threading.Lock()

    def session(self, exercise: str, key: tuple, timeout_s: float, make: Callable[[], JobSession]) -> KeptSession:
        """The kept job of ``exercise`` for ``key`` (its seed, its reference), or a new one made by ``make``."""
        with self._lock:
            found = self._jobs.get(exercise)
            if found is not None and found.key == key and found.healthy() and found.uses < MOST_USES:
                found.renew(timeout_s)
                return found
            self._jobs[exercise] = kept = KeptSession(make(), key)
        if found is not None:
            found.end()
        kept.renew(timeout_s)
        return kept

    def close(self) -> None:
        """End every kept job."""
        with self._lock:
            jobs, self._jobs = list(self._jobs.values()), {}
        for kept in jobs:
            kept.end()


class Prestarted:
    """A job started before its exercise's driver runs (:class:`EarlyStart`), seen by the driver as a
    session it starts itself: :meth:`start` and :meth:`send_inputs` give what they gave then. Anything
    else is the job's (or the kept job's) own."""

    def __init__(self, session: "JobSession | KeptSession"):
        self.session = session
        self.started = self.sent = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    def begin(self, inputs: dict) -> bool:
        self.started = bool(self.session.start())
        self.sent = self.started and bool(self.session.send_inputs(inputs))
        return self.sent

    def renew(self, timeout_s: float) -> None:
        getattr(self.session, "extend", self.session.renew)(timeout_s)

    def start(self) -> bool:
        return self.started

    def send_inputs(self, inputs: dict) -> bool:
        return self.sent


class EarlyStart:
    """A timed exercise's jobs, started while the other exercises are graded (:meth:`grader.sides.BothSides.prestart`).

    Its thread starts the student's job (which imports, records, compiles and warms up, then
    waits for timing requests), reads what it records until it attempted something or is
    ready (``ready_key``), and then, if it attempted something, starts the reference's
    (``reference()``: a new job, or a batch worker's kept one), as any exercise's reference
    starts. The driver, run alone later, takes both (:meth:`take`), their deadlines counted
    from then: the time spent waiting for the other exercises costs the exercise nothing.
    """

    def __init__(self, student: JobSession, inputs: dict, reference: Callable[[], JobSession | KeptSession] | None,
                 ready_key: str):
        self.student = Prestarted(student)
        self.reference: Prestarted | None = None
        self._thread = threading.Thread(target=self._run, args=(inputs, reference, ready_key), daemon=True,
                                        name=f"early-{student.exercise}")
        self._thread.start()

    def _run(self, inputs: dict, reference: Callable[[], JobSession | KeptSession] | None, ready_key: str) -> None:
        if not self.student.begin(inputs) or reference is None:
            return
        session = self.student.session
        while not session.attempted.is_set() and ready_key not in session.outcome.records:
            if session.expect({FromJob.RECORD}) is None:
                return  # it ended: the driver sees how
        if session.attempted.is_set():
            self.reference = Prestarted(reference())
            self.reference.begin(inputs)

    def take(self) -> "EarlyStart":
        """Wait until both jobs are started (the driver drives them from now on)."""
        self._thread.join()
        return self
