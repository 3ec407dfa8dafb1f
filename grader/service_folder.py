"""Where a user's warm processes listen: the folder of their sockets (:func:`folder`), and the warm command's
socket (:func:`command_socket`). A foundation, light to import: the ``grade`` command reads it before
anything else (:mod:`grader.cli.relay`), and the warm service (:mod:`grader.runner.service`) beside it.
"""
from __future__ import annotations

import hashlib
import os
import socket
import stat
import struct
import tempfile
import time
from pathlib import Path


def folder() -> Path | None:
    """Where the user's services' sockets lie: a folder only the user enters (``$XDG_RUNTIME_DIR``'s, else
    ``/tmp/grader-service-UID``), or ``None`` where it is not the user's own (someone else made it first)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) / "jit-grader" if runtime and os.path.isdir(runtime) else \
        Path(tempfile.gettempdir()) / f"grader-service-{os.getuid()}"
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        seen = os.lstat(base)
    except OSError:
        return None
    if not stat.S_ISDIR(seen.st_mode) or seen.st_uid != os.getuid() or seen.st_mode & 0o077:
        return None
    return base


def cache_base() -> Path:
    """The user's cache of the grader, every JAX version's (:func:`grader.store.root` is its ``jaxlib-*``
    folder): ``$GRADER_CACHE_DIR``, else ``$XDG_CACHE_HOME/jit-grader``, else ``~/.cache/jit-grader``."""
    return Path(os.environ.get("GRADER_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "jit-grader"))


def command_socket(base: Path | None = None) -> Path | None:
    """The socket of the user's warm command for the cache at ``base`` (:func:`cache_base`), one a user's cache:
    ``None`` where the user has no folder of their own for it."""
    where = folder()
    if where is None:
        return None
    digest = hashlib.sha256(str(cache_base() if base is None else base).encode()).hexdigest()[:16]
    return where / f"command-{digest}.sock"


class Listening:
    """A warm process's socket at ``path``: bound under a name of its own, then given ``path`` at once (a process
    that waits for the name finds it listening; one it replaces sees its name taken and ends)."""

    def __init__(self, path: Path, backlog: int = 8):
        self.path = path
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        fresh = path.with_name(f".{path.name}.{os.getpid()}")
        try:
            fresh.unlink()
        except FileNotFoundError:
            pass
        self.socket.bind(str(fresh))
        os.chmod(fresh, 0o600)
        self.socket.listen(backlog)
        os.replace(fresh, path)
        self.inode = os.stat(path).st_ino

    def still_ours(self) -> bool:
        """Whether ``path`` is still this socket (no other process took the name)."""
        try:
            return os.stat(self.path).st_ino == self.inode
        except OSError:
            return False


def same_user(conn: socket.socket) -> bool:
    """Whether the peer of ``conn`` runs as this process's uid (``SO_PEERCRED``)."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return False
    return struct.unpack("3i", creds)[1] == os.getuid()


#: a slot's files (its start's lock, its log) this old with no service of it alive were left by one killed as it
#: started (before it could remove them): a service listens within seconds of its start
LEFT_AFTER_S = 300.0


def sweep(base: Path, now: float | None = None) -> int:
    """Remove from ``base`` the files of slots no service holds (no ``.pid`` of a living service) and that nothing
    touched for :data:`LEFT_AFTER_S`, and the warm commands' sockets nobody listens on; how many were removed."""
    now = time.time() if now is None else now
    removed = 0
    try:
        entries = list(os.scandir(base))
    except OSError:
        return 0
    for entry in entries:
        path = Path(entry.path)
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > LEFT_AFTER_S
        except OSError:
            continue
        if not old or path.suffix not in (".lock", ".log", ".pid", ".sock"):
            continue
        try:
            pid = int(path.with_suffix(".pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pid = 0
        if pid and alive(pid):
            continue
        if path.suffix == ".sock":  # a warm command's (or a service's) socket: only one nobody answers
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(path))
                continue
            except OSError:
                pass
            finally:
                probe.close()
        try:
            path.unlink()
            removed += 1
        except OSError:
            pass
    return removed


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie of this process's, a service it started and that ended, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
