"""What a student's job may not ask of the kernel: reserving disk blocks without writing them.

The grader watches the bytes in a job's scratch folder (:meth:`grader.runner.job_sessions.JobSession._over_disk`)
and caps each file (``RLIMIT_FSIZE``); neither stops ``fallocate(2)``, which reserves gigabytes in a
fraction of a second (a probe reserved 40 files of 32 MiB, 1.28 GB, in 0.094 s) and, with
``FALLOC_FL_KEEP_SIZE``, without even growing the file. A seccomp filter installed in the job after it
dropped its privileges makes ``fallocate`` fail with ``ENOSPC`` (glibc's ``posix_fallocate`` and
Python's ``os.posix_fallocate`` then raise "No space left on device"; glibc emulates it by writing only
for ``EOPNOTSUPP``), and ``io_uring_setup`` fail with ``ENOSYS`` (an io_uring can ``fallocate`` too;
Python and JAX use none). Everything else is allowed: the filter is no general sandbox, only the rule
the disk limit needs.

The filter is classic BPF (``SECCOMP_MODE_FILTER``), as the kernel documents it in
``Documentation/userspace-api/seccomp_filter.rst``: check the architecture (``seccomp_data.arch``),
then the call's number (``seccomp_data.nr``). Calls of another architecture (x86-64's 32-bit ``int
0x80``) and x32 calls on x86-64 (numbers with bit 30 set) are refused with ``ENOSYS``. On a machine
whose architecture it does not know it installs nothing and says so.
"""
from __future__ import annotations

import ctypes
import errno
import platform
import struct

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000

# BPF instruction classes and fields (linux/bpf_common.h)
BPF_LD, BPF_W, BPF_ABS = 0x00, 0x00, 0x20
BPF_JMP, BPF_JEQ, BPF_JGE, BPF_K = 0x05, 0x10, 0x30, 0x00
BPF_RET = 0x06

#: ``AUDIT_ARCH_*`` (linux/audit.h) and the numbers of the calls refused, by ``platform.machine()``
ARCHES = {
    "x86_64": (0xC000003E, {"fallocate": 285, "io_uring_setup": 425}),
    "aarch64": (0xC00000B7, {"fallocate": 47, "io_uring_setup": 425}),
}
#: what each refused call returns
REFUSED = {"fallocate": errno.ENOSPC, "io_uring_setup": errno.ENOSYS}
X32_SYSCALL_BIT = 0x40000000


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter's instructions for ``machine`` (default: this one), or ``None`` for one it does not know."""
    known = ARCHES.get(machine or platform.machine())
    if known is None:
        return None
    arch, numbers = known
    calls = list(numbers.items())
    out = [_insn(BPF_LD | BPF_W | BPF_ABS, 0, 0, 4)]  # seccomp_data.arch
    # another architecture's calls (x86-64's 32-bit int 0x80, arm64's compat): refused, since their numbers
    # differ (i386's fallocate is 324); Python, NumPy and JAX make none
    out.append(_insn(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, arch))
    out.append(_insn(BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS))
    out.append(_insn(BPF_LD | BPF_W | BPF_ABS, 0, 0, 0))  # seccomp_data.nr
    if (machine or platform.machine()) == "x86_64":
        out.append(_insn(BPF_JMP | BPF_JGE | BPF_K, 0, 1, X32_SYSCALL_BIT))
        out.append(_insn(BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS))
    for name, number in calls:
        out.append(_insn(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, number))
        out.append(_insn(BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | REFUSED[name]))
    out.append(_insn(BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW))
    return b"".join(out)


def libc() -> ctypes.CDLL:
    """The C library, with ``mount``, ``umount2`` and ``syscall`` typed (this module's calls and
    :func:`grader.runner.sandbox.cap_folder`'s)."""
    found = ctypes.CDLL(None, use_errno=True)
    found.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    found.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    found.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    found.syscall.restype = ctypes.c_long
    return found


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def no_disk_reservations() -> str | None:
    """Install the filter in this process (for good, and for every process it starts); ``None`` when it
    holds, else why not (an unknown architecture, a kernel without seccomp)."""
    code = program()
    if code is None:
        return f"no seccomp filter for {platform.machine()}"
    c = libc()
    if c.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"prctl(PR_SET_NO_NEW_PRIVS): {errno.errorcode.get(ctypes.get_errno(), '?')}"
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if c.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.cast(ctypes.pointer(fprog), ctypes.c_void_p).value,
                  0, 0) != 0:
        return f"prctl(PR_SET_SECCOMP): {errno.errorcode.get(ctypes.get_errno(), '?')}"
    return None


# ------------------------------------------------------------------ a /tmp of its own
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE, MNT_DETACH = 0x2, 0x4, 0x4000, 0x40000, 0x2
#: the new mount API (Linux 5.2; the same numbers on x86-64 and arm64)
SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429
AT_FDCWD, OPEN_TREE_CLONE, AT_RECURSIVE, O_CLOEXEC, MOVE_MOUNT_F_EMPTY_PATH = -100, 1, 0x8000, 0o2000000, 0x4
#: the folders any uid may write to, each given a small empty tmpfs of the job's own (``/tmp`` is
#: bubblewrap's tmpfs, or the machine's disk in the process sandbox)
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
#: each one's size: what a job may write there (its scratch folder is elsewhere, watched, and capped)
PRIVATE_TMP_BYTES = 64 << 20


def private_tmp(keep: list[str]) -> str | None:
    """Give this process (a job, still root, before it takes its uid) a mount namespace of its own in
    which each of :data:`SHARED_WRITABLE` is an empty tmpfs of :data:`PRIVATE_TMP_BYTES`, and the folders
    of ``keep`` that lie there (its scratch folder, the student's modules, the host's library folder)
    are put back where they were: it sees no other grading's files, no classmate's, nothing another
    part of the same exercise left, and it fills no shared disk. ``None`` when done, else why not (a
    process without ``CAP_SYS_ADMIN``: an ordinary user's grading; a kernel before 5.2).

    Each kept folder is copied as a detached mount tree (``open_tree(2)`` with ``OPEN_TREE_CLONE``,
    ``AT_RECURSIVE``) before its folder is covered, then attached again on top (``move_mount(2)``): a
    bind mount's source must be in the caller's namespace, which a path opened before ``unshare`` no
    longer is."""
    import os

    c = libc()

    def fail(what: str) -> str:
        return f"{what}: {errno.errorcode.get(ctypes.get_errno(), '?')}"

    covered = [d for d in SHARED_WRITABLE if os.path.isdir(d) and not os.path.islink(d)]
    tops: dict[str, list[str]] = {base: [] for base in covered}
    for path in keep:
        real = os.path.realpath(path) if path else ""
        for base in covered:
            if real.startswith(base + "/"):
                top = base + "/" + real[len(base) + 1:].split("/", 1)[0]
                if top not in tops[base] and os.path.isdir(top):
                    tops[base].append(top)
    if c.unshare(CLONE_NEWNS) != 0:
        return fail("unshare(CLONE_NEWNS)")
    if c.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return fail("mount --make-rprivate /")
    trees: dict[str, int] = {}
    for top in (t for kept in tops.values() for t in kept):
        fd = c.syscall(SYS_OPEN_TREE, AT_FDCWD, top.encode(), OPEN_TREE_CLONE | AT_RECURSIVE | O_CLOEXEC)
        if fd < 0:
            return fail(f"open_tree {top}")
        trees[top] = fd
    for base in covered:
        options = f"size={PRIVATE_TMP_BYTES},nr_inodes=16384,mode=1777".encode()
        if c.mount(b"tmpfs", base.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
            return fail(f"mount tmpfs {base}")
        for top in tops[base]:
            os.mkdir(top, 0o700)
            if c.syscall(SYS_MOVE_MOUNT, trees[top], b"", AT_FDCWD, top.encode(), MOVE_MOUNT_F_EMPTY_PATH) != 0:
                why = fail(f"move_mount {top}")
                c.umount2(base.encode(), MNT_DETACH)  # the folder as it was: the job still runs
                return why
    for fd in trees.values():
        os.close(fd)
    return None
