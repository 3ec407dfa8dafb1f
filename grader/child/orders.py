"""A host's (or a template's) loop: the grader's orders taken on its control socket (:func:`take_orders`),
each child that ends reaped and told (``SIGCHLD`` wakes the loop at once), a signal sent to a child by name
(:func:`signal_named`), and at the end every child and leftover ended."""
from __future__ import annotations

import os
import signal
import time
from enum import StrEnum
from typing import Callable

from grader.child.leftovers import end_leftovers
from grader.protocol import OP, ToHost

#: how long the loop waits for the grader's next order before it looks at its children anyway (a child's end
#: wakes it at once, ``SIGCHLD``; where that cannot be set up, this is how late an end is heard)
POLL_S = 0.05


def take_orders(control, max_fds: int, obey: Callable[[dict, list[int]], None], children: dict[int, str],
                exited: Callable[[str, int, int, float], None], *, kill: Callable[[int, int], None] = os.kill,
                stop: StrEnum = ToHost.EXIT) -> None:
    """Obey the grader's orders (``obey(message, fds)``; the fds are closed after it) until it says
    ``stop`` or goes; meanwhile collect each of ``children`` (pid: name) that ends (``exited(name,
    status, peak_kb, cpu_s)``, its peak resident memory in KiB and the CPU seconds it used) and end what
    it left behind. Then end every child still there (``kill(pid, SIGKILL)``) and every leftover. A
    child's end wakes it at once (``SIGCHLD``), so the grader hears of it without delay."""
    wake = _wake_on_child_exit()
    while True:
        try:
            if wake is not None and not control.buffered() and not _readable(control, wake):
                raise TimeoutError  # a child ended (or POLL_S passed): reap
            message, fds = control.recv_with_fds(max_fds, timeout=POLL_S)
        except TimeoutError:
            message, fds = "idle", []
        if message is None or (isinstance(message, dict) and message.get(OP) == stop):
            break
        if isinstance(message, dict):
            obey(message, fds)
        for fd in fds:
            os.close(fd)
        _reap(children, exited)
    for pid in list(children):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 2
    while children and time.monotonic() < deadline:
        _reap(children, exited)
        time.sleep(0.01)
    end_leftovers({})


#: the pipe a host's (or a template's) ``SIGCHLD`` writes to (:func:`_wake_on_child_exit`): its children close it
_WAKE: list[int] = []


def _wake_on_child_exit() -> int | None:
    """A pipe's read end that becomes readable when a child ends (``signal.set_wakeup_fd``); ``None`` where
    that cannot be set up (then the loop polls every 50 ms, as before)."""
    try:
        read, write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except (OSError, ValueError, AttributeError):
        return None
    _WAKE[:] = [read, write]
    return read


def forget_wakeup() -> None:
    """In a forked child: drop its parent's ``SIGCHLD`` wake-up (the handler and the pipe)."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    except (OSError, ValueError):
        pass
    for fd in _WAKE:
        try:
            os.close(fd)
        except OSError:
            pass
    _WAKE.clear()


def _readable(control, wake: int) -> bool:
    """Wait up to :data:`POLL_S` for the grader's next order or a child's end; whether an order came (the pipe
    drained)."""
    import select

    ready, _, _ = select.select([control.sock, wake], [], [], POLL_S)
    if wake in ready:
        try:
            while os.read(wake, 512):
                pass
        except OSError:
            pass
    return control.sock in ready


def signal_named(children: dict[int, str], named: str, send, number: int) -> None:
    """Send signal ``number`` to the child ``named`` (``send`` is ``os.kill``, or ``os.killpg`` for its group)."""
    for pid, name in list(children.items()):
        if name == named:
            try:
                send(pid, number)
            except (ProcessLookupError, PermissionError):
                pass


def _reap(children: dict[int, str], exited: Callable[[str, int, int, float], None]) -> None:
    """Collect the children that ended (``exited(name, status, peak_kb, cpu_s)``: the most memory it held, in
    KiB, and the CPU seconds it used, from the kernel's accounting), ending what each left behind."""
    while children:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        name = children.pop(pid, None)
        if name is None:
            continue  # a leftover that ended
        end_leftovers(children)  # what the child started ends with it
        try:
            exited(name, status, usage.ru_maxrss, usage.ru_utime + usage.ru_stime)
        except OSError:  # the grader is gone
            return


