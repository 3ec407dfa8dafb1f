"""Where a host process runs: the strongest isolation this machine offers.

* ``bwrap``: bubblewrap, with new PID, network, IPC and UTS namespaces and a
  file-system view that holds only the system, the Python installation, the grader's
  package and the job's scratch folders (no other submissions, no reference
  solutions, no network);
* ``process``: a plain child process.

On top of either, when the grader runs as root, every job runs as an unprivileged uid
of its own (:class:`UidPool`): ``RLIMIT_NPROC`` then stops a fork storm (root ignores
it), the job cannot signal the host or the grader, and everything the job started
can be found and killed by uid. Limits (time, memory, processes, file size, open
files) apply in every case.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import stat
import sys
from dataclasses import dataclass, field

from grader.i18n import T, Text
from grader.runner.bwrap_probe import bwrap_works
from pathlib import Path

TMPFS_BYTES = 64 << 20
#: the unprivileged uids jobs run as (``GRADER_UID_BASE``/``GRADER_UID_COUNT`` give a grader a
#: block of its own, e.g. to tell its processes from those of graders running beside it)
UID_BASE = int(os.environ.get("GRADER_UID_BASE", 61000))
UID_COUNT = int(os.environ.get("GRADER_UID_COUNT", 256))
LOCK_DIR = Path(os.environ.get("GRADER_LOCK_DIR", "/tmp/grader-uid-locks"))


@dataclass
class SandboxPlan:
    #: ``bwrap`` (bubblewrap: namespaces and a file-system view of its own) or ``process``
    kind: str
    #: whether every job runs as an unprivileged uid of its own (the grader runs as root)
    uid_isolation: bool
    #: why a stronger sandbox could not be had (shown to the user)
    notes: list[Text] = field(default_factory=list)

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "uid_isolation": self.uid_isolation,
            "network": self.kind != "bwrap",
            "notes": self.notes,
        }


# ------------------------------------------------------------------ capabilities
def reachable_by_others(path: Path) -> bool:
    """Whether an unprivileged uid can traverse to ``path`` and read it."""
    path = path.resolve()
    for part in [path, *path.parents]:
        try:
            mode = part.stat().st_mode
        except OSError:
            return False
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
    try:
        return bool(path.stat().st_mode & stat.S_IROTH)
    except OSError:
        return False


def exposed_to_jobs(plan_: SandboxPlan, path: Path) -> bool:
    """Whether a job's code could read the file at ``path`` under ``plan_``: with per-job uids, when
    others may read it; under the grader's own uid, when the job sees it (the process sandbox: every
    file; bubblewrap: the folders its view binds, :func:`host_command`)."""
    path = Path(path).resolve()
    if plan_.uid_isolation:
        return reachable_by_others(path)
    if plan_.kind != "bwrap":
        return True
    from grader import store

    seen = [Path(p) for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")]
    seen += [*python_roots(), Path(__file__).resolve().parent.parent, store.root()]
    return any(path == root.resolve() or root.resolve() in path.parents for root in seen if root.exists())


def python_roots() -> list[Path]:
    """Folders the host's interpreter needs: its prefixes, standard library and site-packages.

    Deliberately not ``sys.path``: it may hold the course repository itself (and with it
    the reference solutions), which must stay out of the sandbox.
    """
    import site
    import sysconfig

    roots = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path(sys.base_exec_prefix)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(Path(path))
    for path in site.getsitepackages():
        roots.add(Path(path))
    executable = Path(sys.executable)
    roots.add(executable.parent)
    try:
        roots.add(executable.resolve().parent.parent)
    except OSError:
        pass
    return sorted(p for p in roots if p.exists())


#: JAX and what it imports (its requirements and jaxlib's: NumPy, ml_dtypes, opt_einsum, SciPy), the TPU's
#: and the GPUs' libraries: the packages, their ``.libs`` and their ``.dist-info`` (JAX finds its plugins by
#: their entry points), by the start of their names
JAX_STACK = ("jax", "numpy", "ml_dtypes", "opt_einsum", "scipy", "libtpu", "nvidia")


def jax_stack(path: list[str] | None = None) -> list[tuple[str, Path]]:
    """JAX's packages where this Python finds them outside its own folders (:func:`python_roots`): a
    ``PYTHONPATH`` (a TPU VM's, an HPC ``module load``), a ``.pth`` naming a folder, the user's site
    folder. A host gets them linked into its own ``PYTHONPATH`` folder (bound there, under bubblewrap)
    and nothing else of those folders: the user's ``PYTHONPATH`` may hold a course's solutions.
    Each name once, from the first folder that has it (the one this Python imports); ``(name, path)``."""
    import sys

    roots = [root.resolve() for root in python_roots()]
    found: dict[str, Path] = {}
    for entry in sys.path if path is None else path:
        if not entry:
            continue
        folder = Path(entry)
        try:
            resolved = folder.resolve()
            if not resolved.is_dir() or any(resolved == r or r in resolved.parents for r in roots):
                continue
            names = sorted(os.listdir(resolved))
        except OSError:
            continue
        for name in names:
            plain = name.lower().replace("-", "_")
            if plain.startswith(JAX_STACK) and not plain.endswith((".pth", ".pyc")) and name not in found \
                    and name != "__pycache__":
                found[name] = resolved / name
    return sorted(found.items())


def unreadable_python_root() -> Path | None:
    """The first folder of this Python's (:func:`python_roots`) that other users cannot reach, if any."""
    for root in python_roots():
        if root.exists() and not reachable_by_others(root):
            blocked = next((p for p in [root, *root.parents] if p.is_dir() and not p.stat().st_mode & stat.S_IXOTH),
                           root)
            return blocked
    return None


def refuse_root(plan_: SandboxPlan, allowed: bool) -> Text | None:
    """Why a grading as root must not run a student's code under ``plan_`` (no bubblewrap and no uid of the
    job's own: the code would run as root), else ``None``; ``allowed``: ``--allow-weak-sandbox`` (or
    ``GRADER_ALLOW_WEAK_SANDBOX=1``), which turns the refusal into a note on the plan."""
    if os.geteuid() != 0 or plan_.uid_isolation:
        return None
    if allowed or os.environ.get("GRADER_ALLOW_WEAK_SANDBOX") == "1":
        note = T("sandbox.root_weak")
        if note not in plan_.notes:
            plan_.notes.append(note)
        return None
    return T("sandbox.root_refused", folder=str(unreadable_python_root() or sys.prefix))


def plan(requested: str = "auto") -> SandboxPlan:
    """Choose the sandbox: ``auto`` takes the strongest that works here."""
    notes: list[str] = []
    root = os.geteuid() == 0
    if requested not in ("auto", "bwrap", "process"):
        raise ValueError(f"unknown sandbox {requested!r}")
    use_bwrap = False
    if requested in ("auto", "bwrap"):
        if bwrap_works():
            use_bwrap = True
        else:
            notes.append(T("sandbox.no_bwrap"))
            if requested == "bwrap":
                raise RuntimeError("bubblewrap (bwrap) is not installed or cannot create namespaces here")
    uid_isolation = False
    if root:
        if use_bwrap:
            uid_isolation = True  # the sandbox binds the interpreter where any uid can read it
        elif all(reachable_by_others(p) for p in python_roots() if p.exists()):
            uid_isolation = True
        else:
            notes.append(T("sandbox.python_unreadable"))
    else:
        notes.append(T("sandbox.not_root"))
    return SandboxPlan("bwrap" if use_bwrap else "process", uid_isolation, notes)


def host_command(plan_: SandboxPlan, *, python_argv: list[str], binds_ro: list[tuple[Path, Path]],
                 binds_rw: list[Path], keep_fds: list[int], caps: tuple[str, ...] = (),
                 devices: tuple[str, ...] = (), user_caps: tuple[str, ...] = ()) -> list[str]:
    """The command line that starts a host under ``plan_``; ``caps``: capabilities it keeps besides
    changing uids and moving its jobs (of other uids) between CPUs (``CAP_SYS_NICE``,
    :mod:`grader.affinity`): a template's ``CAP_SYS_ADMIN``, to give each host it forks namespaces of
    its own. A job drops them all when it takes its own uid. ``user_caps``: those an ordinary user's
    process keeps (bubblewrap gives them in the sandbox's user namespace, never as a setuid program): a
    template's, whose hosts drop them as they start (they change no uid). ``devices``: the accelerator's device files
    (:attr:`grader.runner.devices.Accelerator.nodes`), shown inside bubblewrap's ``/dev`` with the
    system's ``/sys`` (read-only: JAX and libtpu find the chips on its PCI bus)."""
    if plan_.kind != "bwrap":
        return python_argv
    argv = [bwrap_works() or "bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
            "--unshare-ipc", "--unshare-uts", "--hostname", "grader", "--proc", "/proc", "--dev", "/dev",
            "--size", str(TMPFS_BYTES), "--perms", "1777", "--tmpfs", "/tmp"]  # memory-backed: keep it small
    for system in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"):
        if os.path.exists(system):
            argv += ["--ro-bind", system, system] if not os.path.islink(system) else \
                ["--symlink", os.readlink(system), system]
    for node in devices:
        if os.path.exists(node):
            argv += ["--dev-bind", node, node]
    if devices and os.path.isdir("/sys"):
        argv += ["--ro-bind", "/sys", "/sys"]
    made: set[str] = {"/"}

    def parents(target: Path) -> list[str]:
        """Create the folders above a mount point readable by everyone (bwrap's own are 0700)."""
        out: list[str] = []
        for parent in reversed(Path(target).parents):
            text = str(parent)
            if text not in made:
                made.add(text)
                out += ["--perms", "0755", "--dir", text]
        return out

    seen: set[str] = set()
    for root in python_roots():
        text = str(root)
        if text in seen or any(text.startswith(s + "/") for s in seen) or text.startswith(("/usr", "/lib")):
            continue
        seen.add(text)
        argv += parents(root) + ["--ro-bind", text, text]
    for source, target in binds_ro:
        argv += parents(target) + ["--ro-bind", str(source), str(target)]
    for path in binds_rw:
        argv += parents(path) + ["--bind", str(path), str(path)]
    if os.geteuid() == 0:
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SYS_NICE", *caps):
            argv += ["--cap-add", cap]
    elif user_caps and not _setuid(argv[0]):
        for cap in user_caps:
            argv += ["--cap-add", cap]
    return argv + python_argv


def _setuid(program: str) -> bool:
    """Whether ``program`` (bubblewrap) is installed set-uid (it then refuses capabilities to an ordinary user)."""
    found = program if os.path.isabs(program) else shutil.which(program)
    try:
        return bool(found and os.stat(found).st_mode & stat.S_ISUID)
    except OSError:
        return True


# ------------------------------------------------------------------ uids
class UidPool:
    """Unprivileged uids, one per running job, shared safely by concurrent graders."""

    def __init__(self, base: int | None = None, count: int | None = None):
        base = UID_BASE if base is None else base
        count = UID_COUNT if count is None else count
        self.base, self.count = base, count
        self._held: dict[int, int] = {}

    def acquire(self) -> int:
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(LOCK_DIR, 0o700)
        except OSError:
            pass
        start = (os.getpid() * 7) % self.count
        for i in range(self.count):
            uid = self.base + (start + i) % self.count
            fd = os.open(LOCK_DIR / f"{uid}.lock", os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            kill_uid(uid)  # a previous grader that died may have left processes behind
            self._held[uid] = fd
            return uid
        raise RuntimeError("no free sandbox uid")

    def release(self, uid: int) -> None:
        kill_uid(uid)
        fd = self._held.pop(uid, None)
        if fd is not None:
            os.close(fd)


def processes_in_range(low: int, high: int) -> list[int]:
    """Processes whose real uid lies in [low, high), in one pass over /proc.

    Each process's ``status`` is read as bytes, its head only (the ``Uid:`` line comes ninth,
    after a name the kernel escapes, newlines included): a job's start and end each scan every
    process of the machine, and a text file per process cost twice as much."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            uid = _real_uid(f"/proc/{entry}/status")
        except (OSError, ValueError, IndexError):
            continue
        if low <= uid < high:
            pids.append(int(entry))
    return pids


def _real_uid(status: str) -> int:
    """The real uid in a process's /proc status: read until its ``Uid:`` line is whole."""
    fd = os.open(status, os.O_RDONLY)
    try:
        head = b""
        while True:
            chunk = os.read(fd, 4096)
            head += chunk
            at = head.find(b"\nUid:")
            if not chunk or (at >= 0 and head.find(b"\n", at + 5) >= 0):
                break
    finally:
        os.close(fd)
    return int(head[at + 5:head.index(b"\n", at + 5)].split()[0])


def processes_of(uid: int) -> list[int]:
    return processes_in_range(uid, uid + 1)


def kill_uid(uid: int, *, rounds: int = 50) -> int:
    """SIGKILL every process of ``uid`` until none is left; returns how many were killed."""
    from grader.child.leftovers import kill_until_gone

    return kill_until_gone(lambda: processes_of(uid), rounds=rounds)


# ------------------------------------------------------------------ a capped scratch folder
#: what a host's ``jobs`` folder holds at most beyond one job's disk budget (the other jobs' XLA dumps
#: and stacks while one fills its budget, before the grader stops it)
SCRATCH_MARGIN_BYTES = 32 << 20


def mounts_under(folder: Path) -> list[str]:
    """The mount points at or below ``folder`` (``/proc/self/mountinfo``), deepest first."""
    base = os.path.realpath(folder)
    found = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                fields = line.split()
                if len(fields) > 4:
                    point = fields[4].encode().decode("unicode_escape")  # \040 for a space
                    if point == base or point.startswith(base + "/"):
                        found.append(point)
    except OSError:
        return []
    return sorted(set(found), key=len, reverse=True)


def cap_folder(folder: Path, size_bytes: int, *, mode: int = 0o711) -> bool:
    """Make ``folder`` a tmpfs of at most ``size_bytes`` (and 262144 files): what is written there, with
    ``write`` or anyhow, stops at that size (``ENOSPC``). Root alone may mount; ``False`` where it cannot
    (an ordinary user's grading: the grader's watch and the jobs' seccomp filter hold there). Undone by
    :func:`release_folder`."""
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return False
    folder = Path(folder)
    if mounts_under(folder)[-1:] == [os.path.realpath(folder)]:
        return True
    options = f"size={int(size_bytes)},nr_inodes=262144,mode={mode:o}".encode()
    from grader.child.confine import MS_NODEV, MS_NOSUID, libc

    return libc().mount(b"tmpfs", str(folder).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) == 0


def release_folder(folder: Path) -> None:
    """Unmount every file system mounted at or below ``folder`` (lazily: one still open goes once closed)."""
    from grader.child.confine import MNT_DETACH, libc

    c = libc()
    for point in mounts_under(folder):
        c.umount2(point.encode(), MNT_DETACH)


def sweep_stale_scratch(parent: Path, prefix: str = "grade-") -> int:
    """Unmount and remove the scratch folders under ``parent`` whose grading is gone (killed before it
    could clean up: its ``owner`` file names a process that no longer runs); how many."""
    swept = 0
    base = os.path.realpath(parent)
    tops = {point[len(base) + 1:].split("/", 1)[0] for point in mounts_under(Path(base)) if point != base}
    for name in sorted(t for t in tops if t.startswith(prefix)):
        top = Path(base) / name
        try:
            pid = int((top / "owner").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if Path(f"/proc/{pid}").exists():
            continue
        release_folder(top)
        shutil.rmtree(top, ignore_errors=True)
        swept += 1
    return swept
