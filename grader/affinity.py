"""Which CPUs a process's threads may run on, in one place: the CPUs a process may use
(:func:`available`: a batch's slots, the Gradescope container's quota, whether a grading times beside
its other exercises), every thread of a process moved (:func:`pin`), how busy a CPU is (:func:`busy`).

A timed job pins every thread of its own to the machine's last core when it is ready to be timed
(:func:`grader.primitives.timing.pin_to_one_cpu`); while it is timed beside the grading's other
exercises, a host moves itself and its other jobs off that core (``ToHost.CORES``, :func:`set_cores`)
and everything else of the grading runs on the other cores (:meth:`grader.scheduling.Schedule.alone`).
A thread's mask is its own (``sched_setaffinity`` of a process's id sets its main thread's only), so
each of ``/proc/<pid>/task`` is set; a thread started later takes the mask of the thread that starts it.
"""
from __future__ import annotations

import os


def set_cores(jobs: dict[int, str], cores: list[int], apart: list[str]) -> bool:
    """This process's threads and those of each of its ``jobs`` (pid: name) on ``cores``, but the jobs named
    in ``apart`` (the timed ones, pinned to their own core); ``False`` when one could not be moved."""
    ok = pin(os.getpid(), cores)
    for pid, name in list(jobs.items()):
        if name not in apart:
            ok = pin(pid, cores) and ok
    return ok


def pin(pid: int, cores: list[int]) -> bool:
    """Every thread of process ``pid`` on ``cores``; ``False`` when one could not be moved (a process or
    a thread that has ended is no failure)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    ok = True
    for tid in threads:
        try:
            os.sched_setaffinity(int(tid), cores)
        except (ProcessLookupError, ValueError):
            continue
        except OSError:
            ok = False
    return ok


def pin_thread(tid: int, cores: list[int]) -> None:
    """One thread (its native id) on ``cores``, if it can be."""
    try:
        os.sched_setaffinity(tid, cores)
    except OSError:
        pass


def busy(cpu: int, seconds: float = 0.05) -> float:
    """How busy CPU ``cpu`` was (0 to 1) over the next ``seconds``, from ``/proc/stat`` (whoever ran
    there); 0 when it cannot be read."""
    import time

    before = _ticks(cpu)
    time.sleep(seconds)
    after = _ticks(cpu)
    if before is None or after is None or after[1] <= before[1]:
        return 0.0
    return 1.0 - (after[0] - before[0]) / (after[1] - before[1])


def _ticks(cpu: int) -> tuple[int, int] | None:
    """``(idle, total)`` clock ticks of CPU ``cpu`` since boot."""
    try:
        with open("/proc/stat") as stat:
            for line in stat:
                if line.startswith(f"cpu{cpu} "):
                    fields = [int(v) for v in line.split()[1:9]]
                    return fields[3] + fields[4], sum(fields)
    except (OSError, ValueError):
        pass
    return None


def available() -> list[int]:
    """The CPUs this process may run on (none where the system cannot say: no ``sched_getaffinity``)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []
