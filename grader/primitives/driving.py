"""What the timing instruments and a timed exercise's driver use of the grader's processes, as Protocols.

A timed comparison (:mod:`grader.primitives.comparison`) drives jobs: it starts them, sends them inputs and
requests, reads their records and how they ended. The classes that do so live higher, in the processes'
layer (:class:`grader.runner.job_sessions.JobSession`, :class:`grader.runner.outcome.JobOutcome`) and the
grading's (:class:`grader.sides.Sides`); the instruments name them only through these Protocols, which
those classes satisfy as they are. So no module of the instruments (or of a chapter) imports a higher layer,
not even for its types (``tests/test_layers.py``, ``test_no_arrow_up_even_for_types``), and a driver can be
exercised with stand-ins (``tests/test_timing_instrument.py``).
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Iterable, Protocol

from grader.protocol import FromJob


class Ended(Protocol):
    """How a job ended, as a driver reads it (:class:`grader.runner.outcome.JobOutcome`)."""

    #: ``done``, ``timeout``, ``crashed``, ...
    end: str
    #: what its probe recorded, by key
    records: dict[str, Any]

    def attempted(self, functions: Iterable[str] | None = None) -> bool:
        """Whether a call of the student's (of ``functions`` only, if given) got past ``NotImplementedError``."""
        ...


class TimedJob(Protocol):
    """A job a driver starts and times (:class:`grader.runner.job_sessions.JobSession`)."""

    #: the job's name (``ex06_speedup-student``): what is kept apart from the core the rounds run on
    name: str

    @property
    def outcome(self) -> Ended:
        """How it is going, then how it ended."""
        ...

    def start(self) -> bool: ...

    def send_inputs(self, inputs: dict, /) -> bool: ...

    def send(self, message: dict) -> bool: ...

    def expect(self, ops: set[FromJob], *, deadline: float | None = None) -> dict | None: ...

    def run_to_end(self) -> None: ...

    def abandon(self) -> None: ...

    def finish(self) -> Ended: ...


class Exercise(Protocol):
    """The exercise a driver times, as it reads it (:class:`grader.exercise_folder.ExerciseSpec`)."""

    id: str
    timeout_s: float
    #: the functions it grades
    functions: tuple[str, ...]
    #: the share of the reference's gain a student's speed-up must reach
    speedup_fraction: float


class Sides(Protocol):
    """What a timing driver may use: new jobs of its exercise, on the student's side or the reference's
    (:class:`grader.sides.Sides`)."""

    #: the exercise timed
    exercise: Exercise
    #: the device admits one process at a time (a TPU): the sides' jobs run one after the other
    in_turn: bool
    #: a preview's recorded reference outcome (then there is no reference process), else ``None``
    recorded: Ended | None

    def student(self, timeout_s: float) -> TimedJob: ...

    def reference(self, timeout_s: float) -> TimedJob: ...

    def alone(self, sessions: list[TimedJob]) -> AbstractContextManager: ...


class Probe(Protocol):
    """What a timed probe's serving loop uses of its context (:class:`grader.child.probe.ProbeContext`)."""

    def request(self) -> dict: ...

    def reply(self, answer: dict) -> None: ...

    def record(self, key: str, value: Any) -> None: ...

    def timing_begins(self) -> None: ...
