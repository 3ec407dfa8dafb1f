"""Whether bubblewrap can make a host's namespaces here: :func:`bwrap_works`, a probe that nothing leaves behind,
whenever a Ctrl-C lands (:func:`probe_argv`, :func:`_to_its_end`)."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from functools import lru_cache


@lru_cache(maxsize=None)
def bwrap_works() -> str | None:
    """The bwrap executable when it can create the namespaces we need, else ``None``."""
    exe = shutil.which("bwrap")
    if not exe:
        return None
    status = _to_its_end(probe_argv(exe), timeout=10)
    return exe if status == 0 else None


def probe_argv(exe: str) -> list[str]:
    """The probe: the namespaces a host's bubblewrap makes, and ``true``. Killed halfway (by the terminal's Ctrl-C,
    before the probe had a session of its own), bubblewrap left its inner process (PID 1 of its namespace, deaf to
    that SIGINT) orphaned for good: seen as ``nobody``, a ``bwrap`` in ``do_wait`` after ``grade batch`` had ended
    (bubblewrap.c ``handle_die_with_parent`` sets ``PR_SET_PDEATHSIG`` without looking whether the parent is still
    there). So nothing kills it halfway: not the terminal (:func:`_to_its_end`), not the grader's exit (no
    ``--die-with-parent``: an interrupt landing inside ``subprocess.Popen`` leaves it unwaited-for); it ends on its
    own in milliseconds."""
    return [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net", "true"]


def _to_its_end(argv: list[str], timeout: float) -> int | None:
    """The probe's status: run in a session of its own (the terminal's Ctrl-C does not reach it) and waited for,
    an interrupt included (raised after it); ``None`` when it could not start or ran past ``timeout`` (its session
    killed). Waited for with ``os.waitpid``, not ``Popen.wait``: an interrupt between ``Popen._wait``'s
    ``_waitpid_lock.acquire(False)`` and its ``try`` (CPython 3.11 ``Lib/subprocess.py``) leaves the lock held, and
    the next wait then hangs for good (seen: a probe interrupted at a random moment, 2 times in 3 runs of 100)."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None
    deadline, interrupted, status = time.monotonic() + timeout, False, None
    while status is None:
        try:
            pid, waited = os.waitpid(proc.pid, os.WNOHANG)
            if pid:
                status = os.waitstatus_to_exitcode(waited)
            elif time.monotonic() > deadline:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)  # its session: bubblewrap's inner process with it
                deadline = float("inf")
            else:
                time.sleep(0.005)
        except ChildProcessError:  # reaped, its status lost to an interrupt: said as not working (and interrupted)
            status = -1
        except KeyboardInterrupt:  # it takes milliseconds: let it end, then go on with the interrupt
            interrupted = True
    proc.returncode = status  # reaped here: Popen has nothing left to wait for
    if interrupted:
        raise KeyboardInterrupt
    return status if status >= 0 else None
