"""Which exercise runs when: :func:`run_all`.

The untimed exercises run side by side, as many at once as there are cores and one more
(an exercise that mostly waits, like a timing harness's, leaves its core to the others),
the longest first by their limits, so that no long one is left for the end. Then each
timed exercise runs alone (ex06 times the student's and the reference's processes in
turn, and nothing else of the grading may run meanwhile). On Ctrl-C, ``cancel`` stops
every process at once and the interrupt goes on.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from grader.chapter import ExerciseSpec
    from grader.results import ExerciseResult


def run_all(exercises: list[ExerciseSpec], grade: Callable[[ExerciseSpec], ExerciseResult],
            done: Callable[[ExerciseSpec, ExerciseResult], None], *, at_once: int | None,
            cancel: Callable[[], None]) -> None:
    """Grade each of ``exercises`` (``grade(ex)``) and hand each result to ``done(ex, result)`` as it
    comes, in the order above; ``at_once``: how many untimed ones at once (``None``: the cores, and
    one more)."""
    pool = ThreadPoolExecutor(max_workers=at_once or (os.cpu_count() or 1) + 1)
    try:
        plain = sorted((ex for ex in exercises if not ex.timed), key=lambda ex: -ex.timeout_s)
        timed = [ex for ex in exercises if ex.timed]
        for ex, result in zip(plain, pool.map(grade, plain)):
            done(ex, result)
        for ex in timed:  # alone on the machine
            done(ex, grade(ex))
    except KeyboardInterrupt:
        cancel()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
