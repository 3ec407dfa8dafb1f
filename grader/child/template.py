"""A template of hosts: a sandboxed process that imports JAX once and forks a fresh host on order.

Started by the grader (inside bubblewrap, keeping ``CAP_SYS_ADMIN``, ``CAP_DAC_OVERRIDE``
and ``CAP_FOWNER`` besides those a host keeps) as ``python -m grader.child.template CONTROL_FD CONFIG``. It imports what
a host imports (:func:`grader.child.preloading.preload_frozen`) and runs no job itself. On
``spawn`` (with the new host's control socket) it forks a host that first starts clean
(:func:`isolate`: an IPC namespace of its own, and nothing in ``/tmp`` that a job made)
and then serves its grader exactly as a host started on its own does
(:func:`grader.child.host.serve`).

A batch grades one student after another this way without importing JAX again for
each, and without anything one student's code left in ``/tmp`` or in System V shared
memory, queues and semaphores reaching the next. The template reports ``ready``
once, ``spawned`` and ``host_exited`` for each host, and ends whatever a host leaves
behind (it is their subreaper). A host that cannot be isolated says ``failed`` and
never serves.
"""
from __future__ import annotations

import ctypes
import os
import re
import signal
import socket
import sys

from grader.child.host import begin, serve
from grader.child.job_start import flush_output
from grader.child.leftovers import become_subreaper
from grader.child.orders import forget_wakeup, signal_named, take_orders
from grader.protocol import FromHost, FromTemplate, ToHost, ToTemplate, message, word_of

CLONE_NEWIPC = 0x08000000


def mount_points() -> list[str]:
    """Where something is mounted in this process's view (``/proc/self/mountinfo``'s fifth field,
    its octal escapes undone)."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as info:
        for line in info:
            fields = line.split(" ")
            if len(fields) > 4:
                points.append(re.sub(r"\\([0-7]{3})", lambda found: chr(int(found.group(1), 8)), fields[4]))
    return points


def isolate() -> int:
    """Make this process (a host about to be born) start clean: an IPC namespace of its own
    (no System V shared memory, queue or semaphore an earlier host's jobs made), and a
    ``/tmp`` with nothing in it that a job made (the sandbox's own folders stay: root's, and
    every folder that is or holds a mount point, whoever owns it: as an ordinary user, bubblewrap
    makes the folders above the sandbox's mounts the user's).
    Needs ``CAP_SYS_ADMIN``, ``CAP_DAC_OVERRIDE`` and ``CAP_FOWNER`` (the template's, in its
    sandbox); raises :class:`OSError` without them. Returns how many entries of ``/tmp`` it removed."""
    import shutil

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWIPC) != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"unshare(CLONE_NEWIPC): {os.strerror(number)}")
    removed = 0
    mounted = mount_points()
    for name in os.listdir("/tmp"):
        path = os.path.join("/tmp", name)
        if os.lstat(path).st_uid == 0:  # the sandbox's own (the folders above its mounts): no job's
            continue
        if any(point == path or point.startswith(path + "/") for point in mounted):
            continue  # a mount of the sandbox's, or a folder above one: never emptied through it
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
        removed += 1
    return removed


def drop_capabilities() -> None:
    """Give up every capability (an ordinary user's host, forked by a template that kept some in the
    sandbox's user namespace to start it clean: its jobs change no uid, so nothing else would drop them).
    Raises :class:`OSError` when they cannot be dropped."""
    libc = ctypes.CDLL(None, use_errno=True)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: twice (64 capabilities), all none
    if libc.capset(header, data) != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"capset: {os.strerror(number)}")


def _template(control, control_fd: int, versions: dict, clean: bool = True) -> int:
    """Fork isolated hosts on order (``clean``: each starts clean, :func:`isolate`; the trusted
    reference's template, outside any sandbox, forks them as they are); report each one's birth and
    end; end what they leave behind."""
    control.send(message(FromTemplate.READY, versions=versions, pid=os.getpid(), template=True))
    hosts: dict[int, str] = {}

    def obey(order: dict, fds: list[int]) -> None:
        op = word_of(order, ToTemplate)
        if op is ToTemplate.SPAWN and len(fds) == 1:
            pid = os.fork()
            if pid == 0:
                _host_child(fds[0], control_fd, versions, clean)
            hosts[pid] = str(order.get("host"))
            control.send(message(FromTemplate.SPAWNED, host=hosts[pid], pid=pid))
        elif op is ToTemplate.KILL:
            signal_named(hosts, str(order.get("host")), os.kill, signal.SIGKILL)

    take_orders(control, 1, obey, hosts, stop=ToTemplate.EXIT,
                exited=lambda name, status, _peak, _cpu: control.send(message(FromTemplate.HOST_EXITED, host=name)))
    return 0


def _host_child(fd: int, control_fd: int, versions: dict, clean: bool = True) -> None:
    """In a host forked by the template: isolate it (when ``clean``), then serve its grader. Never returns."""
    code = 70
    try:
        os.close(control_fd)
        forget_wakeup()
        from grader.wire import Channel

        channel = Channel(socket.socket(fileno=fd), expects=ToHost)
        try:
            if clean:
                isolate()
                if os.geteuid() != 0:  # no job of an ordinary user's grading keeps what the template kept
                    drop_capabilities()
        except OSError as exc:  # never serve without a /tmp of its own
            channel.send(message(FromHost.FAILED, error=str(exc)))
            code = 71
            return
        become_subreaper()
        channel.send(message(FromHost.READY, versions=versions, pid=os.getpid()))
        code = serve(channel, fd)
    except BaseException:  # noqa: BLE001 - whatever happens, this host ends here
        import traceback

        try:
            sys.stderr.write("grader host failed:\n" + traceback.format_exc())
        except BaseException:  # noqa: BLE001
            pass
    finally:
        flush_output()
        os._exit(code)


def main(argv: list[str]) -> int:
    import json

    return _template(*begin(argv, ToTemplate), clean=json.loads(argv[1]).get("isolate", True) is not False)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    flush_output()
    os._exit(code)
