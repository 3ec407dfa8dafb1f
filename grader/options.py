"""What a user says of how a submission is graded, and the one place it becomes :class:`GradeOptions`.

``grade PATH`` and ``grade batch`` (``--sandbox``, ``--timeout``, ``--exercise-timeout``,
``--memory-limit``), a Gradescope autograder's settings and a notebook's ``check()`` say
the same few things in the user's units (seconds, MiB): a :class:`LimitOptions`. Its
:meth:`~LimitOptions.grade_options` turns them, with the rest of a grading's options,
into the :class:`grader.grading.GradeOptions` the grading reads; nothing else does.

Light on purpose (nothing imported until :meth:`~LimitOptions.grade_options` runs): the
command line builds one before it knows whether it grades at all.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.grading import GradeOptions


@dataclass(frozen=True)
class LimitOptions:
    """How a submission is isolated and limited, in the user's units."""

    #: ``auto`` (the strongest available), ``bwrap`` or ``process`` (:func:`grader.runner.sandbox.plan`)
    sandbox: str = "auto"
    #: the whole submission's time limit, in seconds
    timeout_s: float = 900.0
    #: caps every exercise's own time limit (seconds); ``None``: the chapter's limits
    exercise_timeout_s: float | None = None
    #: memory for each exercise's process, in MiB, on top of JAX's own
    memory_mb: int = 4096
    #: the device measured on: ``auto``, ``cpu`` or ``device`` (:mod:`grader.runner.devices`)
    device: str = "auto"

    def grade_options(self, **fields: Any) -> GradeOptions:
        """The options of a grading under these limits; ``fields``: any other of
        :class:`~grader.grading.GradeOptions`' (``chapter``, ``exercises``, ``seed``, ...)."""
        from grader.grading import GradeOptions
        from grader.runner.job_sessions import Limits

        return GradeOptions(sandbox=self.sandbox, device=self.device, submission_timeout_s=self.timeout_s,
                            exercise_timeout_s=self.exercise_timeout_s,
                            limits=Limits(memory_bytes=self.memory_mb << 20), **fields)

    def to_dict(self) -> dict:
        """As plain data (a batch ships it to its workers): :meth:`from_dict` reads it back."""
        return {"sandbox": self.sandbox, "timeout_s": self.timeout_s, "exercise_timeout_s": self.exercise_timeout_s,
                "memory_mb": self.memory_mb, "device": self.device}

    @classmethod
    def from_dict(cls, data: dict) -> "LimitOptions":
        return cls(sandbox=str(data["sandbox"]), timeout_s=float(data["timeout_s"]),
                   exercise_timeout_s=data.get("exercise_timeout_s"), memory_mb=int(data["memory_mb"]),
                   device=str(data.get("device", "auto")))
