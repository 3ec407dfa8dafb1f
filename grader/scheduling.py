"""Which exercise runs when: :func:`run_all`.

The untimed exercises run side by side, as many at once as there are cores and one more
(an exercise that mostly waits, like a timing harness's, leaves its core to the others),
the longest first, so that no long one is left for the end: longest by the wall time it
took when last graded (``expected``, kept by :func:`grader.store.durations`: ex05's
harness mostly sleeps in its instruments, and started first it waits while the others
compute), else by its limit. Meanwhile each timed exercise's jobs are started
(``prepare``): they prepare and wait. Then each timed exercise runs alone (ex06 times the
student's and the reference's processes in turn, and nothing else of the grading may run
meanwhile), but for an exercise that mostly waits (``waits``: ex05's harness sleeps in its
instruments) where the grading has two cores or more: the timed one does not wait for it,
its processes taking turns on one core while the sleeper wakes now and then on the other
(a grading of a batch, on one core, waits for it). A single grading on two cores or more times
its timed exercise beside the others (``beside``): graded at once in a thread of its own, its
jobs prepare with the rest and its rounds have the last core to themselves, everything else of
the grading moved to the other cores meanwhile (:meth:`grader.sides.BothSides.alone`). On
Ctrl-C, ``cancel`` stops every process at once and the interrupt goes on.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Callable

from grader import affinity as cores

if TYPE_CHECKING:
    from grader.chapter import ExerciseSpec
    from grader.results import ExerciseResult


def run_all(exercises: list[ExerciseSpec], grade: Callable[[ExerciseSpec], ExerciseResult],
            done: Callable[[ExerciseSpec, ExerciseResult], None], *, at_once: int | None,
            cancel: Callable[[], None], prepare: Callable[[ExerciseSpec], None] | None = None,
            expected: dict[str, float] | None = None, beside: bool = False,
            untimed_over: Callable[[], None] | None = None) -> None:
    """Grade each of ``exercises`` (``grade(ex)``) and hand each result to ``done(ex, result)`` as soon
    as it comes (an untimed one that hangs holds back no other's: its progress shows, Ctrl-C keeps
    it); ``at_once``: how many untimed ones at once (``None``: the cores, and one more);
    ``prepare(ex)`` starts a timed exercise's jobs early; ``expected``: seconds by exercise id;
    ``beside``: each timed exercise is graded at once too, in a thread of its own (its rounds move the
    rest of the grading off their core: :meth:`grader.sides.BothSides.alone`); ``untimed_over()`` is
    called once every untimed exercise has its result."""
    pool = ThreadPoolExecutor(max_workers=at_once or at_once_default())
    aside = ThreadPoolExecutor(max_workers=1)
    try:
        plain = longest_first([ex for ex in exercises if not ex.timed], expected or {})
        timed = [ex for ex in exercises if ex.timed]
        running = {pool.submit(grade, ex): ex for ex in plain}
        untimed = set(running)
        for ex in timed if prepare is not None else ():
            prepare(ex)
        if beside:
            running.update({aside.submit(grade, ex): ex for ex in timed})
            timed = []
        sleepers = {ex.id for ex in plain if ex.waits} if timed and len(cores.available()) >= 2 else set()
        left = set(running)

        def sleepers_only() -> bool:
            return bool(sleepers) and all(running[f].id in sleepers for f in left)

        if not untimed and untimed_over is not None:
            untimed_over()
        for future in () if sleepers_only() else as_completed(running):  # as each ends: a hanging one
            done(running[future], future.result())  # holds back no other's result
            left.discard(future)
            if future in untimed:
                untimed.discard(future)
                if not untimed and untimed_over is not None:
                    untimed_over()
            if sleepers_only():
                break
        for ex in timed:  # alone on the machine, or beside a sleeper
            done(ex, grade(ex))
        for future in as_completed(left):
            done(running[future], future.result())
    except KeyboardInterrupt:
        cancel()
        if untimed_over is not None:  # a timed exercise waiting for the untimed ones to end waits no more
            untimed_over()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        aside.shutdown(wait=True, cancel_futures=True)


def at_once_default() -> int:
    """How many untimed exercises run side by side: the cores, and one more (see the module)."""
    return (os.cpu_count() or 1) + 1


def longest_first(exercises: list[ExerciseSpec], expected: dict[str, float]) -> list[ExerciseSpec]:
    """``exercises`` in the order they start: the longest by the wall seconds they took when last graded
    (``expected``), else by their limit."""
    return sorted(exercises, key=lambda ex: (-expected.get(ex.id, 0.0), -ex.timeout_s))
