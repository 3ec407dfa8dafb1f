"""Which exercise runs when: :func:`run_all`.

The untimed exercises run side by side, as many at once as there are cores and one more
(an exercise that mostly waits, like a timing harness's, leaves its core to the others),
an exercise that mostly waits first (``waits``: ex05's harness sleeps in its instruments, and
started first it waits while the others compute), then the longest, so that no long one is
left for the end: longest by the wall time it took when last graded (``expected``, kept by
:func:`grader.store.durations`), else by its limit. Meanwhile each timed exercise's jobs are started
(``prepare``): they prepare and wait. Then each timed exercise runs alone (ex06 times the
student's and the reference's processes in turn, and nothing else of the grading may run
meanwhile), but for an exercise that mostly waits (``waits``: ex05's harness sleeps in its
instruments) where the grading has two cores or more: the timed one does not wait for it,
its processes taking turns on one core while the sleeper wakes now and then on the other
(a grading of a batch, on one core, waits for it). A single grading on two cores or more times
its timed exercise beside the others (``beside``): graded at once in a thread of its own, its
jobs prepare with the rest and its rounds have the last core to themselves, everything else of
the grading moved to the other cores meanwhile (:meth:`Schedule.alone`). On
Ctrl-C, ``cancel`` stops every process at once and the interrupt goes on.

A :class:`Schedule` is these decisions for one grading run, made once (how many untimed
exercises at once, whether the timed one goes beside them, the order they start in) and
what the run's timed exercise needs of them (:meth:`Schedule.alone`); what each exercise
does, and whose outcomes it compares, is :class:`grader.sides.BothSides`'s.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Callable, Iterator, Protocol, Sequence

from grader import affinity as cores
from grader import interrupts

if TYPE_CHECKING:
    from grader.chapter import ExerciseSpec
    from grader.results import ExerciseResult

#: the core left to a timed exercise's rounds is taken to be busy with others' work when, once the
#: grading's processes left it, it was busier than this over 50 ms (:func:`grader.affinity.busy`)
BUSY_ELSEWHERE = 0.3

#: after Ctrl-C, how long the grading's threads are waited for (their processes stopped, they end at once)
AFTER_CTRL_C_S = 3.0


class Work(Protocol):
    """What a schedule runs: one exercise graded whatever happens, and a timed one's jobs started early
    (:class:`grader.sides.BothSides`)."""

    def grade(self, ex: ExerciseSpec) -> ExerciseResult: ...

    def prestart(self, ex: ExerciseSpec) -> None: ...


class Movable(Protocol):
    """A process of the grading's that can leave a core to a timed exercise's rounds
    (:meth:`grader.runner.host_handles.HostProcess.set_cores`)."""

    def set_cores(self, cores: list[int], apart: list[str], /) -> bool: ...


class Schedule:
    """When each exercise of one grading run runs, and on which cores (see the module)."""

    def __init__(self, *, at_once: int | None = None, beside: bool = False,
                 expected: dict[str, float] | None = None):
        #: untimed exercises graded at once; ``None``: the cores, and one more
        self.at_once = at_once
        #: a timed exercise is timed while the untimed ones run, on a core of its own (:meth:`alone`)
        self.beside = beside
        #: the wall seconds each exercise took when last graded: the longest starts first
        self.expected = expected or {}
        #: set once every untimed exercise of the run has its result
        self.untimed_done = threading.Event()
        #: by timed exercise: whether its rounds had their core while the untimed ones ran
        self.timed_beside: dict[str, bool] = {}

    def run(self, exercises: list[ExerciseSpec], work: Work, done: Callable[[ExerciseSpec, ExerciseResult], None],
            cancel: Callable[[], None]) -> None:
        """Grade ``exercises`` in this schedule's order (:func:`run_all`)."""
        self.untimed_done.clear()
        run_all(exercises, work.grade, done, at_once=self.at_once, cancel=cancel, prepare=work.prestart,
                expected=self.expected, beside=self.beside, untimed_over=self.untimed_done.set)

    @contextlib.contextmanager
    def alone(self, exercise_id: str, processes: Sequence[Movable], apart: list[str], *,
              wait_until: float | None) -> Iterator[None]:
        """A timed exercise's rounds (``apart``: its jobs' names, each pinned to the last CPU once ready:
        :func:`grader.primitives.timing.pin_to_one_cpu`), alone on that core. Where the run times it
        beside the untimed exercises, everything else of the grading leaves that core for the rounds:
        ``processes`` (the hosts, and their other jobs: a job forked meanwhile starts there too) and this
        process's threads but the one driving the rounds; then it comes back. Where a process could not
        be moved, or the core is busy with work not the grading's (a loaded machine: its other cores, the
        grading's, leave it nowhere else), the rounds wait for the untimed exercises to end, until
        ``wait_until`` (a ``time.monotonic()``; ``None``: they never wait, as on a device of one process at
        a time, where an untimed exercise of the device may wait for this one's turn to end)."""
        if not self.beside or self.untimed_done.is_set():
            yield
            return
        cpus = cores.available()
        moved = [process.set_cores(cpus[:-1], apart) for process in processes]
        moved.append(cores.pin(os.getpid(), cpus[:-1]))
        cores.pin_thread(threading.get_native_id(), cpus[-1:])
        # the core left to the rounds is idle now but for someone else's work (a busy machine's): then
        # they would share it with that, and not the whole machine as after the untimed exercises
        moved.append(all(moved) and cores.busy(cpus[-1]) < BUSY_ELSEWHERE)
        self.timed_beside[exercise_id] = all(moved)
        try:
            if not all(moved):  # back, and alone after the untimed exercises
                self._spread(processes, apart, cpus)
                if wait_until is not None:
                    self.untimed_done.wait(max(0.0, wait_until - time.monotonic()))
            yield
        finally:
            self._spread(processes, apart, cpus)

    @staticmethod
    def _spread(processes: Sequence[Movable], apart: list[str], cpus: list[int]) -> None:
        for process in processes:
            process.set_cores(cpus, apart)  # the timed jobs keep the core they pinned themselves to
        cores.pin(os.getpid(), cpus)


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
    rest of the grading off their core: :meth:`Schedule.alone`); ``untimed_over()`` is
    called once every untimed exercise has its result."""
    pool = ThreadPoolExecutor(max_workers=at_once or at_once_default(),
                              thread_name_prefix=f"{interrupts.GRADING_THREADS}untimed")
    aside = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{interrupts.GRADING_THREADS}timed")
    interrupted = False
    try:
        plain = longest_first([ex for ex in exercises if not ex.timed], expected or {})
        timed = [ex for ex in exercises if ex.timed]
        running = {pool.submit(grade, ex): ex for ex in plain}
        untimed = set(running)
        if prepare is not None:
            for ex in timed:
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
        interrupted = True
        interrupts.release_import_locks()  # an import it cut short holds no grading thread back
        cancel()
        if untimed_over is not None:  # a timed exercise waiting for the untimed ones to end waits no more
            untimed_over()
        raise
    finally:
        pool.shutdown(wait=not interrupted, cancel_futures=True)
        aside.shutdown(wait=not interrupted, cancel_futures=True)
        if interrupted:  # their processes are gone: they end at once, unless stuck (interrupts.interrupted_exit)
            interrupts.join_within(interrupts.grading_threads(), AFTER_CTRL_C_S)


def at_once_default() -> int:
    """How many untimed exercises run side by side: the cores, and one more (see the module)."""
    return (os.cpu_count() or 1) + 1


def longest_first(exercises: list[ExerciseSpec], expected: dict[str, float]) -> list[ExerciseSpec]:
    """``exercises`` in the order they start: those that mostly wait first (``waits``: ex05's harness sleeps
    in its instruments, and started first it sleeps while the others compute; started after them, as the
    wall seconds of a crowded last grading could place it, its sleeping was the grading's last 0.9 s), then
    the longest by the wall seconds they took when last graded (``expected``), else by their limit."""
    return sorted(exercises, key=lambda ex: (not ex.waits, -expected.get(ex.id, 0.0), -ex.timeout_s))
