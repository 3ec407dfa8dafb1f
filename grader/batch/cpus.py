"""Cores of their own for the gradings that run at once, so that timing checks stay fair.

A batch grading N submissions at once on one machine splits its cores into N slots;
each grading holds one slot (a lock per core, shared by every grader on the machine)
and pins itself to it with ``os.sched_setaffinity`` before it starts any process, so
its hosts and jobs inherit the slot. A timed exercise (ex06) runs alone within its
grading, so the student's and the reference's processes it times in turn have their
slot's cores to themselves: no classmate's grading runs there. (XLA's thread flags
were seen to change nothing; the affinity does.) When there are more gradings at once
than cores, no slot is pinned, and the summary says the timings shared cores.
``GRADER_NO_PIN=1`` turns pinning off (for the throughput benchmark's comparison).
"""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from grader import affinity

LOCK_DIR = Path(os.environ.get("GRADER_CPU_LOCK_DIR", "/tmp/grader-cpu-locks"))


def machine_cpus() -> list[int]:
    """The cores this process may run on."""
    return affinity.available()


def slots(count: int, cpus: list[int] | None = None) -> list[list[int]]:
    """``cpus`` split into ``count`` slots of equal size (the last takes what is left); none when too few."""
    cpus = machine_cpus() if cpus is None else cpus
    if count < 1 or count > len(cpus):
        return []
    size = len(cpus) // count
    return [cpus[i * size:(i + 1) * size] if i < count - 1 else cpus[i * size:] for i in range(count)]


class CoreSlot:
    """A slot of cores held by this process (its locks are let go when the process ends)."""

    def __init__(self, cores: list[int], fds: list[int]):
        self.cores = cores
        self._fds = fds

    def pin(self) -> None:
        """Run this process, and every process it starts from now on, on the slot's cores only."""
        os.sched_setaffinity(0, self.cores)

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def acquire(count: int, *, wait_s: float = 600.0) -> CoreSlot | None:
    """A free slot of ``count`` on this machine, waiting for one up to ``wait_s``; ``None``:
    no pinning (more gradings than cores, or no slot came free in time)."""
    candidates = slots(count)
    if not candidates or os.environ.get("GRADER_NO_PIN") == "1":
        return None
    folder = _lock_dir(LOCK_DIR, shared=True)
    deadline = time.monotonic() + wait_s
    start = os.getpid() % len(candidates)
    while True:
        for i in range(len(candidates)):
            cores = candidates[(start + i) % len(candidates)]
            try:
                held = _lock_all(folder, cores)
            except PermissionError:  # another user's folder or lock, not open to all (an older grader made it)
                folder = _lock_dir(LOCK_DIR.with_name(f"{LOCK_DIR.name}-{os.getuid()}"), shared=False)
                held = _lock_all(folder, cores)
            if held is not None:
                return CoreSlot(cores, held)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)


def _lock_dir(folder: Path, *, shared: bool) -> Path:
    """``folder``, made where missing: shared, open to every user as ``/tmp`` is (sticky: none removes another's
    lock), since every grader on the machine takes its cores from the same locks; else this user's own (a
    shared folder another user made closed: this user's batches still take cores apart from one another)."""
    folder.mkdir(parents=True, exist_ok=True)
    if folder.stat().st_uid == os.getuid():
        os.chmod(folder, 0o1777 if shared else 0o700)
    return folder


def _lock_all(folder: Path, cores: list[int]) -> list[int] | None:
    held: list[int] = []
    for core in cores:
        try:  # a lock any user may take (its mode set past the umask); never a link planted in its place
            fd = os.open(folder / f"cpu-{core}.lock", os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o666)
        except PermissionError:
            for other in held:
                os.close(other)
            raise
        if os.fstat(fd).st_uid == os.getuid():
            os.fchmod(fd, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            for other in held:
                os.close(other)
            return None
        held.append(fd)
    return held
