"""The instrument a timing harness is judged with: a function whose every call costs
what the grader decided, and whose every call the grader holds to its own clock.

Child side: an :class:`Instrument` is handed to the student's harness. Each of its
calls sleeps for the cost the grader scheduled for that call (its :class:`Schedule`,
drawn with the hidden inputs: fast calls, slow calls, a spread), or returns at once
with a :class:`Pending` result whose work finishes only when waited on, like JAX's
asynchronous dispatch. A run starts with a mark the grader stamps on its own clock
when it answers (the instrument's clock starts only then). Each call sends its record
(when its work began and ended, counted from that start) before it returns: no
harness ever holds a record of the calls, and the instrument cannot be changed (its
attributes are read-only).

Grader side: :func:`observed_calls` gives each call with the moment the grader read
its record (on the grader's clock, from the run's start), :func:`expect_trustworthy`
holds every record to that clock and to the grader's schedule (a call cannot end
after the grader read its record, calls cannot overlap, and none is shorter than the
sleep the grader asked for), and :func:`truth` gives what a harness should have
returned. A call's work is measured where the harness measures it, so the two agree
on a loaded machine; what the records may say is bounded, call by call, by what the
grader stamped and scheduled.
"""
from __future__ import annotations

import math
import numbers
import statistics
from dataclasses import dataclass
from typing import Any, Callable

from grader.checks import ARRIVALS, Fail, Key, Records
from grader.trusted import TRUSTED
from grader.i18n import T

#: how far a call's record may stand outside its bounds (the clocks' reading granularity)
CLOCK_SLACK_S = 1e-4


# =================================================================== child side
class Pending:
    """A result whose work finishes only when waited on (``block_until_ready``); ``tell(woke)`` hears,
    once, when the first wait returned."""

    __slots__ = ("_ready_at", "_tell")

    def __init__(self, ready_at: float, tell: Callable[[float], None] | None = None):
        self._ready_at = ready_at
        self._tell = tell

    def block_until_ready(self) -> "Pending":
        remaining = self._ready_at - TRUSTED.perf_counter()
        if remaining > 0:
            TRUSTED.sleep(remaining)
        tell, self._tell = self._tell, None
        if tell is not None:
            tell(TRUSTED.perf_counter())
        return self


class Ready:
    """The result of a synchronous call: already finished, like a computed array."""

    __slots__ = ()

    def block_until_ready(self) -> "Ready":
        return self


@dataclass(frozen=True)
class Schedule:
    """What an instrument's calls cost, and how the harness is asked to time it."""

    #: seconds of work of every call after ``costs``
    default: float
    #: the harness's ``warmup``
    warmup: int
    #: the harness's ``iters``
    iters: int
    #: seconds of work of the first calls, in order
    costs: tuple[float, ...] = ()
    #: calls return at once with a :class:`Pending` whose work runs in the background, one call
    #: after the other, like a device's queue
    asynchronous: bool = False

    def cost(self, index: int) -> float:
        return self.costs[index] if index < len(self.costs) else self.default

    def timed(self) -> list[float]:
        """The work of each call the harness should time."""
        return [self.cost(i) for i in range(self.warmup, self.warmup + self.iters)]


class Instrument:
    """A function whose calls cost what ``schedule`` says (see the module).

    ``start()``: the run's mark (it returns once the grader has stamped it), made when
    the instrument is made; ``done(i, record)``: sends call ``i``'s record; ``waited(i,
    record)``: for an asynchronous call, when its work was ready and when the harness's
    first wait on it returned (the machine's load can make that later).
    ``expected_args``: the arguments every call must receive (checked by identity).
    """

    __slots__ = ("_schedule", "_expected", "_done", "_waited", "_origin", "_state")
    _schedule: Schedule
    _expected: tuple
    _done: Callable[[int, dict], None]
    _waited: Callable[[int, dict], None] | None
    _origin: float
    _state: list  # calls made so far; when the queue of asynchronous work empties

    def __init__(self, schedule: Schedule, *, start: Callable[[], None], done: Callable[[int, dict], None],
                 waited: Callable[[int, dict], None] | None = None, expected_args: tuple = ()):
        start()
        values = {"_schedule": schedule, "_done": done, "_waited": waited, "_expected": tuple(expected_args),
                  "_origin": TRUSTED.perf_counter(),  # after the grader's stamp of the run's start
                  "_state": [0, 0.0]}  # calls made so far; when the queue of asynchronous work empties
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"the grader's instrument cannot be changed ({name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"the grader's instrument cannot be changed ({name!r})")

    def since_start(self) -> float:
        """Seconds since the run's start, by the clock of its records (the probe's own view of a run)."""
        return TRUSTED.perf_counter() - self._origin

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        state = self._state
        index = state[0]
        state[0] = index + 1
        expected = self._expected
        record: dict[str, Any] = {"args_ok": len(args) == len(expected) and all(a is b for a, b in zip(args, expected))
                  and not kwargs}
        cost = self._schedule.cost(index)
        if self._schedule.asynchronous:  # queued like a device's work: each call's after the previous one's
            self._done(index, record)
            ready = max(TRUSTED.perf_counter(), state[1]) + cost
            state[1] = ready
            waited, origin = self._waited, self._origin
            if waited is None:
                return Pending(ready, None)

            def tell(woke: float, waited: Callable[[int, dict], None] = waited) -> None:
                waited(index, {"ready_s": ready - origin, "woke_s": woke - origin})

            return Pending(ready, tell)
        clock = TRUSTED.perf_counter
        began = clock()
        TRUSTED.sleep(cost)
        record["began_s"], record["ended_s"] = began - self._origin, clock() - self._origin
        self._done(index, record)  # sent before the harness has the result: it never holds a record
        return Ready()


# =================================================================== grader side
@dataclass(frozen=True)
class Call:
    """One call of an instrument: its record, and when the grader read it."""

    #: whether it received the arguments given to the harness
    args_ok: bool
    #: when its work began, seconds from the run's start by the instrument's clock; for an
    #: asynchronous call, when its queued work was ready
    began: float | None = None
    #: when its work ended, by the same clock; for an asynchronous call, when the harness's wait
    #: on it returned (``None`` when it was not waited on)
    ended: float | None = None
    #: when the grader read its record (of an asynchronous call: of its wait), seconds from the
    #: run's start by the grader's clock
    read: float | None = None

    @property
    def work(self) -> float | None:
        return self.ended - self.began if self.began is not None and self.ended is not None else None


def observed_calls(s: Records, start: Key, done: Key, run: str, schedule: Schedule,
                   waited: Key | None = None) -> list[Call]:
    """Every call of the instrument of ``run``, in order (counted by the grader: one record each);
    ``waited``: the key of an asynchronous call's wait."""
    arrivals = s.value(ARRIVALS)
    origin = arrivals.get(start(run=run)) if s.has(start(run=run)) else None
    calls: list[Call] = []
    while done(run=run, i=len(calls)) in s.data:
        key = done(run=run, i=len(calls))
        record = s.value(key)
        record = record if isinstance(record, dict) else {}
        args_ok = record.get("args_ok") is True
        if schedule.asynchronous:  # its wait, if the harness waited on it
            wait_key = waited(run=run, i=len(calls)) if waited is not None else None
            if wait_key is None or wait_key not in s.data:
                calls.append(Call(args_ok))
                continue
            key = wait_key
            record = s.value(key)
            record = record if isinstance(record, dict) else {}
            names = ("ready_s", "woke_s")
        else:
            names = ("began_s", "ended_s")
        began, ended = (_seconds(record.get(k)) for k in names)
        read = arrivals[key] - origin if origin is not None and key in arrivals else None
        calls.append(Call(args_ok, began, ended, read))
    return calls


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def expect_trustworthy(calls: list[Call], schedule: Schedule, *, what: str) -> None:
    """Every record of a run fits the grader's clock and the grader's schedule.

    The instrument's clock starts after the grader stamped the run's start, and a call's
    record is sent after its work: a call that ended later than the grader read its record,
    began before the previous call ended, or worked less than the sleep the grader asked
    for means the records were not made by the instrument as the grader made it, and the
    run's timings cannot be trusted. Of an asynchronous run, each wait must have returned
    after its work was ready, and before the grader read of it.
    """
    previous_end = 0.0
    for i, call in enumerate(calls):
        cost = schedule.cost(i)
        if schedule.asynchronous:
            if call.began is None and call.ended is None and call.read is None:
                continue  # not waited on
            if call.began is None or call.ended is None or call.read is None or call.began < -CLOCK_SLACK_S \
                    or call.ended - call.began < -CLOCK_SLACK_S or call.ended > call.read + CLOCK_SLACK_S:
                raise Fail(T("harness.untrusted_call", what=what, call=i + 1, began=call.began or 0.0,
                             ended=call.ended or 0.0, read=call.read or 0.0, cost=cost),
                           {"call": i + 1, "ready_s": call.began, "woke_s": call.ended, "read_s": call.read})
            continue
        if call.began is None or call.ended is None or call.read is None or call.began < previous_end - CLOCK_SLACK_S \
                or call.ended - call.began < cost - CLOCK_SLACK_S or call.ended > call.read + CLOCK_SLACK_S:
            raise Fail(T("harness.untrusted_call", what=what, call=i + 1, began=call.began or 0.0,
                         ended=call.ended or 0.0, read=call.read or 0.0, cost=cost),
                       {"call": i + 1, "began_s": call.began, "ended_s": call.ended, "read_s": call.read,
                        "cost_s": cost})
        previous_end = call.ended


def truth(calls: list[Call], schedule: Schedule) -> float | None:
    """What a harness should return: the median work of the calls it should time.

    For a synchronous run, the median work of those calls by the instrument's clock (held to
    the grader's by :func:`expect_trustworthy`; it holds whatever the machine's load added
    to each sleep, as the harness's own clock does); for an asynchronous one, the median
    of the work the grader queued (a harness that waits measures it, one that does not
    measures the dispatch), and however late the waits returned.
    """
    works = timed_works(calls, schedule)
    return statistics.median(works) if works else None


def timed_works(calls: list[Call], schedule: Schedule) -> list[float]:
    """The work of each call a harness should time: for an asynchronous run, the work the grader
    queued, and however late the harness's wait on it returned."""
    timed = range(schedule.warmup, schedule.warmup + schedule.iters)
    if schedule.asynchronous:
        return [schedule.cost(i) + (max(0.0, calls[i].work or 0.0) if i < len(calls) else 0.0) for i in timed]
    return [c.work for c in calls[schedule.warmup:schedule.warmup + schedule.iters] if c.work is not None]


def timed_spans(calls: list[Call], schedule: Schedule, returned: float | None) -> list[float]:
    """The longest each call a harness should time may have looked on its own clock, in the order
    of :func:`timed_works`: from the end of the call before it (the run's start for the first) to
    the start of the call after it (for the last, ``returned``: when the grader read what the
    harness returned, on the grader's clock, which is a little later than the instrument's).

    A harness that times its calls one after the other starts each timer after the previous call
    returned and stops it before the next begins, so each of its samples lies between the call's
    work and its span, and any statistic of its samples between that statistic of the works and
    of the spans (every statistic of :func:`statistics_of` grows with each sample). What a loaded
    machine adds outside the work (a descheduled process, a record leaving) is within the span,
    and the grader sees it. An asynchronous run's spans are its works (what its waits add is in them).
    """
    if schedule.asynchronous:
        return timed_works(calls, schedule)
    spans = []
    for i in range(schedule.warmup, min(schedule.warmup + schedule.iters, len(calls))):
        work = calls[i].work
        if work is None:
            continue
        before = calls[i - 1].ended if i > 0 else 0.0
        after = calls[i + 1].began if i + 1 < len(calls) else returned
        span = after - before if before is not None and after is not None else work
        spans.append(max(span, work))
    return spans


def statistics_of(values: list[float]) -> dict[str, float]:
    """The statistics a harness may take of its samples: the median first, then the wrong ones
    (``min``, ``max``, ``mean``, and ``trimmedK``, the mean with ``K`` samples cut at each end, for
    every cut below a third of the samples, as ``scipy.stats.trim_mean`` cuts them)."""
    ordered, n = sorted(values), len(values)
    found = {"median": statistics.median(ordered), "min": ordered[0], "max": ordered[-1],
             "mean": statistics.mean(ordered)}
    found.update({f"trimmed{cut}": statistics.mean(ordered[cut:n - cut]) for cut in range(1, n) if 3 * cut < n})
    return found


def median_range(values: list[float], spans: list[float] | None = None) -> tuple[float, float]:
    """Where the median of a harness's samples lies: from the median of ``values`` (the works) with one
    sample more below them all, to the median of ``spans`` (:func:`timed_spans`; ``values`` without
    them) with one sample more above them all.

    Each sample lies between its call's work and its span, and a median grows with each sample, so
    a harness that took the median of exactly the calls asked for is within; so is one that timed one
    call more or fewer, such as a timed warm-up call: which calls it timed is other checks' to judge,
    and the median check's only which statistic it took. (The CI run of 2026-12-06: the median of a
    harness that timed its warm-up call too, 10 samples, came back 2.56x the median work, the machine
    having stretched the sixth span, and was judged a trimmed mean.)"""
    top = spans if spans and len(spans) == len(values) else values
    return (statistics.median([*values, min(values)]), statistics.median([*top, max(top)]))


def statistic_ranges(values: list[float], spans: list[float] | None = None) -> dict[str, tuple[float, float]]:
    """Where each statistic of :func:`statistics_of` of a harness's samples lies, from its value of
    ``values`` (the works) to its value of ``spans`` (:func:`timed_spans`), the median's as
    :func:`median_range` says: each sample lies between its call's work and its span, and every
    statistic grows with each sample."""
    found = statistics_of(values)
    upper = statistics_of(spans) if spans and len(spans) == len(values) else found
    ranges = {name: (found[name], max(found[name], upper[name])) for name in found}
    ranges["median"] = median_range(values, spans)
    return ranges


def nearest_statistic(value: float, values: list[float], spans: list[float] | None = None) -> tuple[str, float]:
    """Which statistic of ``values`` ``value`` is nearest (as a ratio), and its value; the median on a tie.

    ``spans``: the longest each value may have looked to the harness (:func:`timed_spans`); a
    statistic is then the range from its value of ``values`` to its value of ``spans``, and a
    value within the median's range is the median's.

    A machine's load adds to every call, the harness's and the grader's alike, which brings all
    the statistics nearer one another as ratios but keeps their order: the nearest still says
    which one a harness took.
    """
    found = statistics_of(values)
    ranges = statistic_ranges(values, spans)

    def distance(name: str) -> float:
        low, high = ranges[name]
        if value <= 0 or low <= 0:
            return math.inf
        return 0.0 if low <= value <= high else min(abs(math.log(value / low)), abs(math.log(value / high)))

    name = min(found, key=distance)
    return name, found[name]


def told_apart(value: float, values: list[float], spans: list[float] | None = None) -> bool:
    """Whether the records say which statistic ``value`` is: no two statistics' ranges
    (:func:`statistic_ranges`) both hold it.

    A loaded machine stretches the spans (a process descheduled between calls), and with them
    every range, until a trimmed mean of the samples lies within the median's range too: the
    records cannot tell which the harness took, and :func:`nearest_statistic` gives it the
    median. A run so stretched is worth making again (ex05's median run)."""
    if value <= 0:
        return True
    holding = [name for name, (low, high) in statistic_ranges(values, spans).items() if low <= value <= high]
    return len(holding) <= 1


def run_told_apart(schedule: Schedule, returned: Any, when: float, records: list[dict]) -> bool:
    """Whether a run's records, as the probe's process saw them (each call's ``began_s`` and ``ended_s``),
    and when the harness returned (``when``, :meth:`Instrument.since_start`) tell which statistic its figure
    ``returned`` is (:func:`told_apart`); ``True`` where there is nothing to judge (no float returned, a call
    missing). The probe's own view, to decide whether to make the run again only: the check judges each
    run by the grader's clock."""
    if not isinstance(returned, numbers.Real) or isinstance(returned, numbers.Integral):  # a float, NumPy's too
        return True
    calls = [Call(bool(r.get("args_ok")), r.get("began_s"), r.get("ended_s")) for r in records]
    if len(calls) != schedule.warmup + schedule.iters or any(c.work is None for c in calls):
        return True
    return told_apart(float(returned), timed_works(calls, schedule), timed_spans(calls, schedule, when))


def upside_down(ratio: float, top: list[float], bottom: list[float]) -> bool:
    """Whether ``ratio``, a harness's figure of ``top`` over ``bottom``, is nearer a statistic of ``bottom`` over
    ``top`` than any statistic of ``top`` over ``bottom`` (the statistics of :func:`statistics_of`, each taken of
    both sides alike; nearness as the ratio of the two figures, either way): the ratio turned upside down, not a
    statistic of its own, however poor (the slowest over the slowest is under 1 when one ``bottom`` call was
    preempted)."""
    if ratio <= 0 or not top or not bottom:
        return False
    above, below = statistics_of(top), statistics_of(bottom)
    shared = [name for name in above if name in below and above[name] > 0 and below[name] > 0]
    right = min((abs(math.log(ratio * below[name] / above[name])) for name in shared), default=math.inf)
    upside = min((abs(math.log(ratio * above[name] / below[name])) for name in shared), default=math.inf)
    return upside < right
