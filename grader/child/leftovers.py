"""What a job leaves behind, ended: a host (or a template) is the child subreaper of everything it
starts (:func:`become_subreaper`), so a process a job left (a grandchild that called ``setsid`` and
outlived its parent) is handed to it, and :func:`end_leftovers` kills each one, round after round,
until none is left."""
from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Callable

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Have orphaned descendants handed to this process (Linux), so none escapes :func:`end_leftovers`."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children(pid: int) -> list[int]:
    """The children of process ``pid``, from /proc."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def kill_until_gone(find: Callable[[], list[int]], *, rounds: int = 50,
                    settle: Callable[[list[int]], None] | None = None) -> int:
    """SIGKILL the processes ``find()`` lists, round after round, until it lists none.

    ``settle(pids)`` waits between rounds (default: 10 ms). Returns how many were killed.
    """
    killed = 0
    for _ in range(rounds):
        pids = find()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        if settle is None:
            time.sleep(0.01)
        else:
            settle(pids)
    return killed


def end_leftovers(jobs: dict[int, str], rounds: int = 100) -> int:
    """SIGKILL every child of the host that is not a running job, until none is left.

    As the subreaper the host inherits what a killed leftover had started, so killing
    its children round after round ends the whole tree. Returns how many were killed.
    """
    me = os.getpid()

    def settle(strays: list[int]) -> None:
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline and any(p in _children(me) for p in strays):
            _reap_strays(jobs)
            time.sleep(0.005)

    return kill_until_gone(lambda: [pid for pid in _children(me) if pid not in jobs], rounds=rounds, settle=settle)


def _reap_strays(jobs: dict[int, str]) -> None:
    """Collect the exit of leftovers (not jobs: their exits are reported by :func:`grader.child.orders.take_orders`)."""
    for pid in _children(os.getpid()):
        if pid in jobs:
            continue
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass

