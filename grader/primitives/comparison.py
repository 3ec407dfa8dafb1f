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
from typing import Any, Callable

from grader.checks import TIMING
from grader.primitives.driving import Ended, Sides, TimedJob
from grader.primitives.timing import READY
from grader.protocol import FromJob, ToJob, message


#: ``time_function(student, reference, cases, deadline)``: one function's figures (``reference`` is
#: ``None`` in a preview), from the cases both sides prepared
TimeFunction = Callable[["TimedJob", "TimedJob | None", list[str], float], dict]
#: where the sides are timed in turn (a device that admits one process at a time): ``time_alone(session,
#: cases, deadline, chosen)`` times each of ``cases`` in ``session`` alone, ``chosen`` being what the side
#: timed first chose for each case (its batch sizes: the same for both), ``None`` for that side itself;
#: it returns ``{case: figures}``. ``combine(student_by_case, reference_by_case)`` makes one function's
#: figures of them, as ``time_function`` does (``reference_by_case`` is ``None`` in a preview).
TimeAlone = Callable[["TimedJob", list[str], float, "dict | None"], dict]
Combine = Callable[[dict, "dict | None"], dict]


def timed_comparison(sides: Sides, inputs: dict, budget: float, functions: dict[str, list[str]],
                     time_function: TimeFunction, *, in_turn: tuple[TimeAlone, Combine] | None = None
                     ) -> tuple[Ended, Ended | None]:
    """Both sides' outcomes of a timed exercise, the timings under ``grader/timing`` in the student's
    (see the module). ``functions``: each timed function's candidate cases (``name/size``). Where the
    device admits one process at a time (``sides.in_turn``: a TPU), the sides run one after the other,
    each timed alone (``in_turn``: :func:`timed_in_turn`)."""
    if getattr(sides, "in_turn", False) and in_turn is not None:
        return timed_in_turn(sides, inputs, budget, functions, *in_turn)
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
                    both = [case for case in cases if all(case in (ready[n] or ()) for n in sessions)]
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


def await_record(session: TimedJob, key: str, deadline: float) -> Any:
    """The value the job records under ``key``, once it has (``None`` if it ended first or ``deadline`` passed)."""
    while key not in session.outcome.records:
        if session.expect({FromJob.RECORD}, deadline=deadline) is None:
            return None
    return session.outcome.records[key]


def timed_in_turn(sides: Sides, inputs: dict, budget: float, functions: dict[str, list[str]],
                  time_alone: TimeAlone, combine: Combine) -> tuple[Ended, Ended | None]:
    """A timed exercise where only one process at a time may hold the device (a TPU): the student's job
    runs first (its values recorded, then each function timed alone on every case it prepared: the
    batch sizes chosen there), and ends, letting the device go; then, only where the student attempted
    something, the reference's job on the same cases with the same batch sizes, and ends. Each side's
    speed-up is a ratio measured inside its own process (the grader's eager baseline against the jitted
    function, batches interleaved), so the two need not alternate; the case kept is the one where the
    reference's gain is clearest (``combine``). Two processes cannot alternate on such a device, and
    starting one costs seconds: this is how a TPU is timed fairly."""
    deadline = time.monotonic() + budget
    phases: dict[str, float] = {}
    t0 = time.monotonic()
    student = sides.student(timeout_s=budget)
    timed: dict[str, dict] = {}
    student_ready: set | None = None
    try:
        if student.start() and student.send_inputs(inputs):
            got = await_record(student, READY, deadline)
            student_ready = set(got["cases"]) if got else None
        phases["student_ready_s"] = round(time.monotonic() - t0, 3)
        if student_ready is not None:
            with sides.alone([student]):
                for function, cases in functions.items():
                    mine = [case for case in cases if case in student_ready]
                    if mine:
                        timed[function] = time_alone(student, mine, deadline, None)
            phases["student_timed_s"] = round(time.monotonic() - t0, 3)
            if student.send(message(ToJob.STOP)):
                student.run_to_end()
        else:
            student.abandon()
    finally:
        student_out = student.finish()  # its process ended: the device is free
    results: dict[str, Any] = {"in_turn": True}
    reference_out = sides.recorded
    # the reference's turn only where the student attempted an exercise's function (a stub's provided
    # code, which its probe calls too, is no attempt): each turn costs the device's start, seconds
    attempted = student_out.attempted(sides.exercise.functions)
    if sides.recorded is None and attempted and student_out.end != "no_backend":
        reference = sides.reference(timeout_s=max(deadline - time.monotonic(), 1.0))
        reference_ready: set | None = None
        theirs: dict[str, dict] = {}
        try:
            if reference.start() and reference.send_inputs(inputs):
                got = await_record(reference, READY, deadline)
                reference_ready = set(got["cases"]) if got else None
            phases["reference_ready_s"] = round(time.monotonic() - t0, 3)
            if reference_ready is not None and timed:
                with sides.alone([reference]):
                    for function, by_case in timed.items():
                        cases = [case for case in by_case if case in reference_ready]
                        if cases:
                            theirs[function] = time_alone(reference, cases, deadline, by_case)
                phases["reference_timed_s"] = round(time.monotonic() - t0, 3)
            if reference_ready is not None and reference.send(message(ToJob.STOP)):
                reference.run_to_end()
            elif reference_ready is None:
                reference.abandon()
        finally:
            reference_out = reference.finish()
        if reference_ready is None and student_ready is not None:
            results["error"] = "reference"  # said in the student's words by the exercise's check
            reference_out = None if reference_out.end != "no_backend" else reference_out
        else:
            for function, by_case in timed.items():
                if function in theirs:
                    results[function] = combine(by_case, theirs[function])
    elif sides.recorded is not None:
        for function, by_case in timed.items():
            results[function] = combine(by_case, None)
    else:
        reference_out = None
    phases["finished_s"] = round(time.monotonic() - t0, 3)
    results["phases"] = phases
    student_out.records[TIMING] = results
    return student_out, reference_out
