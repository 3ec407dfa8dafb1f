"""Exercise 6's timing driver, in the grader: the student's and the reference's jobs timed in turn.

:func:`drive` is the exercise's ``drive(sides, inputs, budget)`` (:class:`grader.exercise_package.TimedPackage`):
it hands the jobs to :func:`grader.primitives.comparison.timed_comparison` with how one function is timed
(:func:`_time_function`: the size where the reference's gain is clearest, then rounds alternating between
the two processes) and, on a device of one process at a time, how each side is timed alone and the two
combined (:func:`_time_alone`, :func:`_combine`). The probe's side of it, and the checks that read the
figures, are the package's (``__init__.py``).
"""
from __future__ import annotations

import time

from grader.primitives import comparison, timing
from grader.primitives.driving import Ended, Sides

#: candidate sizes for the speed-up checks (``fast_heavy``: n, d, h; ``layer_norm``: n, d); the grader times the
#: one where the reference's gain is clearest on the grading device (small, dispatch-bound ones on a CPU)
HEAVY_SIZES = {"8x32x64": (8, 32, 64), "32x64x128": (32, 64, 128), "128x256x256": (128, 256, 256)}
LN_SIZES = {"16x64": (16, 64)}  # the row loop's cost makes the gain clear at any size
ROUNDS, REPS = 12, 2


def drive(sides: Sides, inputs: dict, budget: float) -> tuple[Ended, Ended | None]:
    """Run the student's and the reference's jobs side by side and time them in turn
    (:func:`grader.primitives.comparison.timed_comparison` drives the jobs).

    Both probes record their values, then serve timing requests. For each function the
    grader first times every candidate size on the reference, keeps the one where the
    reference's gain is clearest on this device, sizes the batches from it, then
    alternates rounds between the two processes (:func:`_time_function`). The results are
    computed here, in the grader, and stored under ``grader/timing``.

    In a preview (``sides.recorded``: the reference's records, no reference process)
    only the student's job runs: the size is the one where the student's own gain is
    clearest, and the records stand for the reference's outcome.
    """
    fraction = sides.exercise.speedup_fraction
    functions = {name: [f"{name}/{size}" for size in sizes]
                 for name, sizes in (("fast_heavy", HEAVY_SIZES), ("layer_norm", LN_SIZES))}
    return comparison.timed_comparison(
        sides, inputs, budget, functions,
        lambda student, reference, cases, deadline: _time_function(student, reference, cases, deadline, fraction),
        in_turn=(_time_alone, _combine))


#: passes over the candidate sizes to calibrate on, while every request of a pass is implausible
CALIBRATION_PASSES = 4
#: the time a pass needs at least (seconds before the deadline)
CALIBRATION_SPARE_S = 5.0


def _time_function(student, reference, cases: list[str], deadline: float, fraction: float) -> dict:
    """Pick the size where the gain is clearest (the reference's; in a preview, the
    student's own), then time it in alternating rounds (one side only in a preview;
    final grading stops early once the verdict against ``fraction`` of the reference's
    gain is clear)."""
    calibrated_on = reference if reference is not None else student
    calibration: dict = {}
    # the grader's own measurement: on a loaded machine every request of a pass can be implausible (the
    # time around it outweighs the work), never a reason to take points; passes again while time is left
    for _ in range(CALIBRATION_PASSES):
        gone = False
        for case in cases:  # one side alone, a few reps per candidate size
            probe_run = timing.request_times(calibrated_on, case, reps=3, batches=(1, 1), deadline=deadline)
            if "error" in probe_run:
                gone = gone or not probe_run.get("implausible")
                continue
            batches = timing.batch_sizes(probe_run)
            measured = timing.request_times(calibrated_on, case, reps=5, batches=batches, deadline=deadline)
            if "error" in measured:
                gone = gone or not measured.get("implausible")
                continue
            stats = timing.speedup_stats(measured)
            calibration[case] = {"speedup": stats["speedup"], "q25": stats["q25"], "batches": list(batches)}
        if calibration or gone or deadline - time.monotonic() < CALIBRATION_SPARE_S:
            break
        time.sleep(0.2)  # let what loads the machine move on
    if not calibration:
        failed = {"speedup": None, "error": "calibration failed"}
        return {"case": cases[0], "student": {"speedup": None} if reference is not None else failed,
                "reference": failed if reference is not None else None}
    case = max(calibration, key=lambda c: calibration[c]["q25"])
    batches = tuple(calibration[case]["batches"])
    s_samples, r_samples = timing.alternate(student, reference, case, rounds=ROUNDS, reps=REPS, batches=batches,
                                            deadline=deadline,
                                            decided=timing.clear_verdict(fraction) if reference is not None else None)
    out = {"case": case.split("/", 1)[1], "calibration": calibration, "batches": list(batches),
           "rounds": len(s_samples.get("wall", [])), "reps_per_round": REPS, "reference": None}
    for side, samples in (("student", s_samples), ("reference", r_samples)):
        if samples is not None:
            out[side] = _stats(samples)
    return out


def _stats(samples: dict) -> dict:
    """A side's figures from its samples (:func:`grader.primitives.timing.speedup_stats`), with why it has
    none where it could not be timed, and whether its calls were implausible."""
    stats = timing.speedup_stats(samples)
    if "error" in samples:
        stats["error"] = samples["error"]
        if samples.get("implausible"):
            stats["implausible"] = True
    return stats


def _time_alone(session, cases: list[str], deadline: float, chosen: dict | None) -> dict:
    """Where the sides are timed in turn (a TPU): every case in ``session`` alone, ``ROUNDS`` rounds of
    ``REPS``; the batch sizes calibrated here (``chosen`` is ``None``: the side timed first), else those
    ``chosen`` for each case by the side timed first, so that both sides time the same batches. As
    :func:`_time_function`: a pass whose every case was implausible (the machine's load, never the
    student's) is made again while time is left, up to ``CALIBRATION_PASSES``."""
    out: dict[str, dict] = {}
    for _ in range(CALIBRATION_PASSES):
        out, gone = {}, False
        for case in cases:
            if chosen is None:
                probe_run = timing.request_times(session, case, reps=3, batches=(1, 1), deadline=deadline)
                if "error" in probe_run:
                    out[case] = {"error": probe_run["error"]}
                    gone = gone or not probe_run.get("implausible")
                    continue
                batches = timing.batch_sizes(probe_run)
            elif isinstance(chosen.get(case), dict) and "batches" in chosen[case]:
                batches = tuple(chosen[case]["batches"])
            else:
                continue
            samples, _ = timing.alternate(session, None, case, rounds=ROUNDS, reps=REPS, batches=batches,
                                          deadline=deadline)
            out[case] = {"batches": list(batches), "samples": samples}
            gone = gone or ("error" in samples and not samples.get("implausible"))
        measured = any("error" not in (got.get("samples") or {"error": True}) for got in out.values())
        if measured or not out or gone or deadline - time.monotonic() < CALIBRATION_SPARE_S:
            break
        time.sleep(0.2)  # let what loads the machine move on
    return out


def _combine(student: dict, reference: dict | None) -> dict:
    """One function's figures from each side's timings alone (:func:`_time_alone`), as :func:`_time_function`
    makes them: the case where the reference's gain is clearest (in a preview, the student's own)."""
    judged = reference if reference is not None else student
    calibration = {}
    for case, got in judged.items():
        samples = got.get("samples") or {}
        stats = timing.speedup_stats(samples) if "error" not in samples else {"speedup": None}
        if stats.get("speedup") is not None:
            calibration[case] = {"speedup": stats["speedup"], "q25": stats["q25"], "batches": got["batches"]}
    if not calibration:
        failed = {"speedup": None, "error": "calibration failed"}
        first = next(iter(student), "")
        return {"case": first, "student": {"speedup": None} if reference is not None else failed,
                "reference": failed if reference is not None else None, "in_turn": True}
    case = max(calibration, key=lambda c: calibration[c]["q25"])
    out = {"case": case.split("/", 1)[1], "calibration": calibration, "batches": calibration[case]["batches"],
           "rounds": 0, "reps_per_round": REPS, "reference": None, "in_turn": True}
    for side, by_case in (("student", student), ("reference", reference)):
        if by_case is None:
            continue
        got = by_case.get(case) or {"error": "not timed"}
        samples = got.get("samples") or {"error": got.get("error")}
        out[side] = _stats(samples)
        if side == "student":
            out["rounds"] = len(samples.get("wall", []))
    return out


