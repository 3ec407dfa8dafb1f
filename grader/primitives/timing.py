"""Timing: measuring speed-ups fairly (a timing harness is judged with
:mod:`grader.primitives.instrument`).

Speed-ups (child side): :func:`time_batches` times the baseline and the candidate in
alternation, each call waited on, batch after batch. Grader side:
:func:`alternate` drives the student's and the reference's processes in turn on the
same inputs, then :func:`speedup_stats` and :func:`expect_speedup` compare medians,
the bar being a fraction of the reference's gain measured in the same run.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Any, Callable, Mapping

from grader.checks import Fail, GraderError
from grader.i18n import T, Text
from grader.trusted import TRUSTED
from grader.protocol import FromJob, ToJob, message, word_of

from grader.primitives.driving import Probe, TimedJob


# =================================================================== child side
def clocked_calls(fn: Callable, args: tuple, n: int, *, warm: int = 0,
                  each: list[tuple] | None = None) -> list[float]:
    """Seconds of each of ``warm + n`` calls of ``fn(*args)``, each waited on, by the trusted clock.

    ``each``: the arguments of each call in turn, made beforehand, instead of ``args`` (for a
    function that donates its inputs: what it was given is deleted after the call)."""
    import jax

    wait = jax.block_until_ready
    clock = TRUSTED.perf_counter
    durations = []
    for i in range(warm + n):
        call_args = args if each is None else each[i]
        start = clock()
        wait(fn(*call_args))
        durations.append(clock() - start)
    return durations


def time_batches(baseline: Callable, candidate: Callable, args: tuple, *, reps: int, batch_baseline: int,
                 batch_candidate: int, fresh: Callable[[], tuple] | None = None) -> dict:
    """Alternate a batch of baseline calls and a batch of candidate calls, ``reps`` times.

    Every call is waited on and clocked on its own; a rep's figure is the median call
    of its batch, so a call that the operating system preempted is one outlier, not
    a slow batch. The batch totals travel too, for the grader's own clock to check.

    ``fresh``: makes the candidate's inputs anew (a candidate that donates them); each of its
    calls gets its own, all made before the batch's first call, so the calls follow one another
    as the baseline's do. The time that takes travels too (``candidate_setup``): not a sample,
    but time the grader's clock saw pass.
    """
    def batch(fn: Callable, n: int, warm: int = 0, fresh: Callable[[], tuple] | None = None) -> tuple:
        setup_start = TRUSTED.perf_counter()
        each = None if fresh is None else [fresh() for _ in range(warm + n)]
        setup = TRUSTED.perf_counter() - setup_start if fresh is not None else 0.0
        durations = clocked_calls(fn, args, n, warm=warm, each=each)
        # the warm calls (caches and threads back in shape after the other side's batch)
        # are not samples, but they count in the total the grader checks against its clock
        return statistics.median(durations[warm:]), sum(durations), setup

    out: dict[str, list[float]] = {"baseline": [], "candidate": [], "baseline_total": [], "candidate_total": [],
                                   "candidate_setup": []}
    for _ in range(reps):
        base, base_total, _ = batch(baseline, batch_baseline)
        cand, cand_total, setup = batch(candidate, batch_candidate, warm=2, fresh=fresh)
        out["baseline"].append(base)
        out["candidate"].append(cand)
        out["baseline_total"].append(base_total)
        out["candidate_total"].append(cand_total)
        out["candidate_setup"].append(setup)
    return out


def pin_to_one_cpu() -> int | None:
    """Put every thread of this process on one CPU, the same one for every timed process.

    Dispatch-bound calls hand work from Python's thread to the runtime's threads; on
    two CPUs the hand-off may cross cores in one process and not in another, which
    shows as a steady 2x difference between identical code. On one shared CPU both
    processes are timed in the same conditions (they take turns, never overlap).
    """
    from grader import affinity

    cpus = affinity.available()
    if not cpus:
        return None
    affinity.pin(os.getpid(), cpus[-1:])
    return cpus[-1]


#: the record a timing probe makes once it is ready to serve requests (its cases, its CPU)
READY = "timing/ready"
#: in what a timed exercise's jobs are sent: the only cases (``function/size``) its probe prepares, the
#: ones chosen when every candidate was last timed on this machine (absent: every candidate;
#: :func:`grader.store.timing_cases`)
PREPARE = "timing/prepare"


def prepares(inputs: Mapping[str, Any], case: str) -> bool:
    """Whether a probe prepares ``case`` (:data:`PREPARE`)."""
    wanted = inputs.get(PREPARE)
    return not isinstance(wanted, list) or case in wanted


#: a timed case: (baseline, candidate, args) or (baseline, candidate, args, fresh)
TimedCase = tuple[Callable, Callable, tuple] | tuple[Callable, Callable, tuple, Callable | None]


def serve_timing(ctx: Probe, cases: dict[str, TimedCase]) -> None:
    """Answer the grader's timing requests until it says stop (the child's timing loop).

    ``cases`` maps a case name to (baseline, candidate, args) or (baseline, candidate, args,
    fresh), all placed and warmed up; ``fresh`` makes the candidate's inputs anew for each call
    (a candidate that donates its inputs), or is ``None``. What is timed is compiled the default way
    (``ctx.timing_begins()`` before the warm-up below, where the probe did not call it already:
    :mod:`grader.child.quick_compile`).
    """
    import jax

    ctx.timing_begins()

    full: dict[str, tuple[Callable, Callable, tuple, Callable | None]] = {
        name: (case[0], case[1], case[2], case[3] if len(case) > 3 else None)  # type: ignore[misc]
        for name, case in cases.items()}
    cpu = pin_to_one_cpu() if jax.default_backend() == "cpu" else None
    for baseline, candidate, args, fresh in full.values():  # warm up again on the new CPU
        time_batches(baseline, candidate, args, reps=1, batch_baseline=1, batch_candidate=3, fresh=fresh)
    ctx.record(READY, {"cases": sorted(full), "cpu": cpu})
    while True:
        request = ctx.request()
        word = word_of(request, ToJob)
        if word == ToJob.STOP:
            return
        if word == ToJob.PING:
            ctx.reply(message(FromJob.PONG))
            continue
        if word != ToJob.TIME or request.get("case") not in full:
            ctx.reply(message(FromJob.TIMED, error="bad request"))
            continue
        baseline, candidate, args, fresh = full[request["case"]]
        try:
            result = time_batches(baseline, candidate, args, reps=int(request["reps"]),
                                  batch_baseline=int(request["batch_baseline"]),
                                  batch_candidate=int(request["batch_candidate"]), fresh=fresh)
        except BaseException as exc:  # noqa: BLE001 - the student's function failed while timed
            ctx.reply(message(FromJob.TIMED, error=f"{type(exc).__name__}: {str(exc)[:200]}"))
            continue
        ctx.reply(message(FromJob.TIMED, **result))


# =================================================================== grader side
def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def speedup_stats(samples: dict) -> dict:
    """Median speed-up (baseline over candidate, per rep) with its spread."""
    ratios = [b / c for b, c in zip(samples.get("baseline", []), samples.get("candidate", [])) if c > 0]
    if not ratios:
        return {"speedup": None, "reps": 0}
    return {
        "speedup": statistics.median(ratios),
        "q25": quantile(ratios, 0.25),
        "q75": quantile(ratios, 0.75),
        "baseline_s": statistics.median(samples["baseline"]),
        "candidate_s": statistics.median(samples["candidate"]),
        "reps": len(ratios),
    }


#: the grader's own reasons why a function could not be timed (``error`` in its figures), said in
#: the student's language; any other reason is the student's exception, quoted as it was raised
UNTIMED = {"implausible timings": "speedup.why.implausible", "calibration failed": "speedup.why.calibration",
           "the process is gone": "speedup.why.gone", "bad request": "speedup.why.gone",
           "host_lost": "speedup.why.gone", "import_error": "speedup.why.import", "done": "speedup.why.gone",
           "timeout": "speedup.why.timeout", "not_started": "speedup.why.gone", None: "speedup.why.gone",
           "cancelled": "speedup.why.gone", "protocol_error": "speedup.why.gone", "crashed": "speedup.why.gone",
           "probe_error": "speedup.why.gone", "disk_limit": "speedup.why.gone", "abandoned": "speedup.why.gone"}


def untimed_reason(figures: dict) -> "Text | str":
    """Why a function could not be timed, from its figures' ``error``: the grader's own reasons as
    sentences in both languages, a student's exception as it was raised."""
    error = figures.get("error")
    key = UNTIMED.get(error) if error is None or isinstance(error, str) else None
    return T(key) if key is not None else str(error)


def expect_speedup(student: dict, reference: dict, *, fraction: float, what: str) -> dict:
    """The student's gain (speed-up − 1) must reach ``fraction`` of the reference's."""
    measured = {
        "student": student,
        "reference": reference,
        "fraction": fraction,
    }
    s, r = student.get("speedup"), reference.get("speedup")
    if s is None:
        raise Fail(T("speedup.no_measure", what=what, error=untimed_reason(student)), measured)
    if r is None or r <= 1.0:
        raise GraderError(f"the reference shows no speed-up for {what} on this device ({r})")
    bar = 1.0 + fraction * (r - 1.0)
    measured["bar"] = bar
    if s < bar:
        raise Fail(T("speedup.below", what=what, student=s, reference=r, bar=bar, fraction=fraction,
                     student_ms=student["candidate_s"] * 1e3, reference_ms=reference["candidate_s"] * 1e3,
                     baseline_ms=student["baseline_s"] * 1e3), measured)
    return measured


def expect_speedup_over(student: dict, *, bar: float, what: str) -> dict:
    """The student's speed-up over the provided eager code must reach ``bar``.

    A release's preview has no reference to measure: the bar is the one its chapter
    sets (``release_speedup_bar``), and final grading decides with the reference's gain.
    """
    measured = {"student": student, "bar": bar, "bar_from": "release_speedup_bar"}
    s = student.get("speedup")
    if s is None:
        raise Fail(T("speedup.no_measure", what=what, error=untimed_reason(student)), measured)
    if s < bar:
        raise Fail(T("release.speedup_below", what=what, student=s, bar=bar, student_ms=student["candidate_s"] * 1e3,
                     baseline_ms=student["baseline_s"] * 1e3), measured)
    return measured


def request_times(session: TimedJob, case: str, *, reps: int, batches: tuple[int, int], deadline: float,
                  attempts: int = 3) -> dict:
    """One timing request to one child, checked against the grader's own clock.

    Timings that do not fit the grader's clock are asked for again, up to ``attempts``
    times: on a loaded machine the time around a short request (messages, waiting for a
    CPU) can outweigh the timed work once, but not every time; a child that misreports
    its times is implausible on every attempt.
    """
    for _ in range(attempts):
        got = _request_times_once(session, case, reps=reps, batches=batches, deadline=deadline)
        if not got.get("implausible") or time.monotonic() >= deadline:
            break
    return got


def _request_times_once(session: TimedJob, case: str, *, reps: int, batches: tuple[int, int],
                        deadline: float) -> dict:
    start = time.monotonic()
    if not session.send(message(ToJob.TIME, case=case, reps=reps, batch_baseline=batches[0],
                                batch_candidate=batches[1])):
        return {"error": "the process is gone"}
    reply = session.expect({FromJob.TIMED}, deadline=deadline)
    wall = time.monotonic() - start
    if reply is None:
        return {"error": session.outcome.end}
    if "error" in reply:
        return {"error": reply["error"]}
    base, cand = reply.get("baseline"), reply.get("candidate")
    totals = (reply.get("baseline_total"), reply.get("candidate_total"))
    if not _plausible(base, cand, totals, reps, batches, wall, reply.get("candidate_setup") or [0.0] * reps):
        return {"error": "implausible timings", "implausible": True}
    return {"baseline": base, "candidate": cand, "wall": wall}


def alternate(student: TimedJob, reference: TimedJob | None, case: str, *, rounds: int, reps: int,
              batches: tuple[int, int], deadline: float, decided: Callable[[dict, dict], bool] | None = None,
              min_rounds: int = 4) -> tuple[dict, dict | None]:
    """Time ``case`` in both processes, alternating rounds (the grader's driver).

    ``student`` and ``reference`` are job sessions whose probes serve timing requests;
    ``reference`` is ``None`` in a release's preview (only the student's process is
    timed, and ``None`` comes back for the reference). Returns each side's samples
    (seconds per call, per rep) and the grader's wall clock for each request; a side
    that fails keeps an ``error``. After ``min_rounds``, ``decided(student_stats,
    reference_stats)`` may end the timing early: when the verdict can no longer change
    (a gain far above the bar, or far below it).
    """
    sides = {name: session for name, session in (("student", student), ("reference", reference))
             if session is not None}
    samples: dict[str, dict] = {name: {"baseline": [], "candidate": [], "wall": []} for name in sides}
    for round_ in range(rounds):
        order = list(sides.items()) if round_ % 2 == 0 else list(reversed(sides.items()))  # no side always first
        for name, session in order:
            if "error" in samples[name]:
                continue
            got = request_times(session, case, reps=reps, batches=batches, deadline=deadline)
            if "error" in got:
                samples[name].update({k: v for k, v in got.items() if k != "wall"})
                continue
            samples[name]["baseline"] += got["baseline"]
            samples[name]["candidate"] += got["candidate"]
            samples[name]["wall"].append(got["wall"])
        if decided is not None and reference is not None and round_ + 1 >= min_rounds \
                and not any("error" in s for s in samples.values()) \
                and decided(speedup_stats(samples["student"]), speedup_stats(samples["reference"])):
            break
    return samples["student"], samples.get("reference")


def clear_verdict(fraction: float, *, margin: float = 1.5) -> Callable[[dict, dict], bool]:
    """``decided`` for :func:`alternate`: the student's gain is ``margin`` times above the bar in three
    reps out of four, or ``margin`` times below it in three out of four (the bar being ``fraction`` of
    the reference's gain), so more rounds cannot change the verdict."""
    def decided(student: dict, reference: dict) -> bool:
        if student.get("speedup") is None or reference.get("speedup") is None:
            return False
        bar_gain = fraction * (reference["speedup"] - 1.0)
        if bar_gain <= 0:
            return False
        return student["q25"] - 1.0 > margin * bar_gain or student["q75"] - 1.0 < bar_gain / margin

    return decided


def batch_sizes(samples: dict, *, target_s: float = 0.002, most: int = 200) -> tuple[int, int]:
    """Batches that make each timed block last about ``target_s``."""
    def size(values: list[float]) -> int:
        per_call = statistics.median(values) if values else target_s
        return max(1, min(most, int(round(target_s / max(per_call, 1e-7)))))

    return size(samples.get("baseline", [])), size(samples.get("candidate", []))


def _plausible(base: Any, cand: Any, totals: tuple, reps: int, batches: tuple[int, int], wall: float,
               setup: Any = None) -> bool:
    """Numbers a child reports must fit the time the grader saw pass around the request.

    The child's clock was captured before the student's code was imported; this
    bound also holds if that code found a way to change it: the reported total can
    be neither longer than the request took, nor much shorter, and no call's median
    can exceed its batch's share. ``setup``: the time spent making a donating
    candidate's inputs, per rep (zeros otherwise), which the grader's clock saw pass too.
    """
    setup = [0.0] * reps if setup is None else setup
    lists = (base, cand, *totals)
    if not all(isinstance(v, list) and len(v) == reps for v in (*lists, setup)):
        return False
    values = [v for lst in lists for v in lst]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values):
        return False
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in setup):
        return False
    for medians, sums, n in ((base, totals[0], batches[0]), (cand, totals[1], batches[1])):
        if any(m > s + 1e-9 for m, s in zip(medians, sums)):  # a median call cannot outlast its batch
            return False

    reported = sum(totals[0]) + sum(totals[1])
    return 0.5 * wall - 0.005 <= reported + sum(setup) and reported + sum(setup) <= 1.05 * wall + 0.002
