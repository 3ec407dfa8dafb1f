"""A timed comparison: the student's job and the reference's, prepared side by side, then timed in turn.

A timed exercise's driver (``drive(sides, inputs, budget)``, grader side) says what is its
own: the functions it times, each with its candidate cases, and how one function is
timed (``time_function(student, reference, cases, deadline)``, with
:func:`grader.primitives.timing.request_times` and :func:`~grader.primitives.timing.alternate`).
:func:`timed_comparison` does the rest, the same for every timed exercise: it starts
both jobs (or takes the ones started early, or a batch worker's kept reference, which
:class:`grader.sides.Sides` gives), sends the inputs, waits until each probe is ready to
serve timing requests (:data:`~grader.primitives.timing.READY`: the cases it prepared),
stops a reference nobody needs, times each function on the cases both sides prepared (alone on
their core: ``sides.alone``),
stops or abandons the jobs and keeps the figures under ``grader/timing``
(:data:`grader.checks.TIMING`) in the student's outcome.

In a preview (``sides.recorded``: the reference's records, no reference process) only
the student's job runs; the records stand for the reference's outcome.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from grader.checks import TIMING
from grader.primitives.timing import READY
from grader.protocol import FromJob, ToJob, message

if TYPE_CHECKING:
    from grader.runner.job_sessions import JobOutcome, JobSession
    from grader.sides import Sides

#: ``time_function(student, reference, cases, deadline)``: one function's figures (``reference`` is
#: ``None`` in a preview), from the cases both sides prepared
TimeFunction = Callable[["JobSession", "JobSession | None", list[str], float], dict]


def timed_comparison(sides: Sides, inputs: dict, budget: float, functions: dict[str, list[str]],
                     time_function: TimeFunction) -> tuple[JobOutcome, JobOutcome | None]:
    """Both sides' outcomes of a timed exercise, the timings under ``grader/timing`` in the student's
    (see the module). ``functions``: each timed function's candidate cases (``name/size``)."""
    deadline = time.monotonic() + budget
    sessions = {"student": sides.student(timeout_s=budget)}
    if sides.recorded is None:
        sessions["reference"] = sides.reference(timeout_s=max(budget, sides.exercise.timeout_s))
    student, reference = sessions["student"], sessions.get("reference")
    results: dict[str, Any] = {}
    phases: dict[str, float] = {}
    t0 = time.monotonic()
    ready: dict[str, set | None] = {}
    try:
        started = {name: session.start() and session.send_inputs(inputs)  # both prepare at once
                   for name, session in sessions.items()}
        for name, session in sessions.items():
            if name == "reference" and not (ready["student"] or student.outcome.attempted()):
                ready[name] = None  # nothing to time or to compare: stop the reference now
                break
            got = await_record(session, READY, deadline) if started[name] else None
            ready[name] = set(got["cases"]) if got else None
            phases[f"{name}_ready_s"] = round(time.monotonic() - t0, 3)
        if reference is not None and ready["reference"] is None and ready["student"]:
            results["error"] = "reference"  # said in the student's words by the exercise's check
        elif ready["student"] is not None:
            with sides.alone(list(sessions.values())):  # the rounds on a core of their own
                phases["rounds_from_s"] = round(time.monotonic() - t0, 3)
                for function, cases in functions.items():
                    both = [case for case in cases if all(case in ready[n] for n in sessions)]
                    if both:
                        results[function] = time_function(student, reference, both, deadline)
                        phases[f"{function}_timed_s"] = round(time.monotonic() - t0, 3)
        for name, session in sessions.items():
            if ready.get(name) is None:
                session.abandon()  # not needed, or broken: killed at once
            elif session.send(message(ToJob.STOP)):
                session.run_to_end()
    finally:
        outcomes = {name: session.finish() for name, session in sessions.items()}
    phases["finished_s"] = round(time.monotonic() - t0, 3)
    results["phases"] = phases
    student_out = outcomes["student"]
    student_out.records[TIMING] = results
    if sides.recorded is not None:
        return student_out, sides.recorded
    return student_out, (outcomes["reference"] if ready.get("reference") is not None else None)


def await_record(session: JobSession, key: str, deadline: float) -> Any:
    """The value the job records under ``key``, once it has (``None`` if it ended first or ``deadline`` passed)."""
    while key not in session.outcome.records:
        if session.expect({FromJob.RECORD}, deadline=deadline) is None:
            return None
    return session.outcome.records[key]
