"""Where the grader keeps what it can reuse between runs: compiled programs, and the
reference's outcomes.

Most of a job's time is XLA compiling small programs (each jitted function and eager
operation, once per input shape). With JAX's persistent compilation cache, a program
compiled in an earlier run is loaded instead; JAX still reports it as a backend
compile, so compile counts stay exact. Two kinds of cache, never written by anyone
else's code: the reference's (trusted, written only by the grader's own processes) and
one per submission folder (written by that student's jobs, read by nobody else's), so
no student's code can plant a program another process will run.

A student's jobs may also *load* from the reference's cache, by key only: its folder
is not listable by their uids (mode 0711) and is mounted read-only in their sandbox.
A program's key is a digest of the program itself (with the compiler's options and
versions), so what a student's job can load from it is a program it lowered
identically itself: JAX's own operations on the same inputs, and any function the
student wrote exactly as the reference did. It gives nobody anything they did not
write; it saves every first grading (and every student of a batch) the compiles.

The reference's outcomes for one seed (:class:`ReferenceCache`) are kept in memory for
a run or a batch, and on disk keyed by everything they depend on: the reference's and
the grader's code (their contents), the exercise, the seed, jaxlib's version and the
machine's accelerators; a replay (``--seed``) or another process of a batch reuses them.

The root is ``$GRADER_CACHE_DIR``, else ``$XDG_CACHE_HOME/jit-grader``, else
``~/.cache/jit-grader``; a folder per JAX version.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import platform
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("grader")


def root() -> Path:
    """The cache's root for this JAX version."""
    base = os.environ.get("GRADER_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "jit-grader")
    return Path(base) / f"jaxlib-{_jaxlib_version()}"


@functools.lru_cache(maxsize=1)
def _jaxlib_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return "unknown"


def reference_dir() -> Path | None:
    """The reference's compilation cache (only the grader's own processes write it; students' jobs
    may open a program in it whose key they know, never list it)."""
    return _make(root() / "xla" / "reference", mode=0o711)


def student_dir(submission: Path) -> Path | None:
    """The compilation cache of the submission at ``submission`` (its jobs, under any uid, write it)."""
    key = hashlib.sha256(str(Path(submission).resolve()).encode()).hexdigest()[:16]
    return _make(root() / "xla" / "students" / key, mode=0o777)


def _make(folder: Path, *, mode: int) -> Path | None:
    """The folder, made with ``mode``; ``None`` when it cannot be (a read-only home: no cache, no harm)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, mode)
        for parent in folder.parents:  # every job uid must reach a student's folder and the reference's
            if parent == Path(root()).parent:
                break
            if mode & 0o001:
                os.chmod(parent, os.stat(parent).st_mode | 0o711)
        return folder
    except OSError:
        return None


#: the most a compilation cache keeps; the oldest programs go first
MAX_CACHE_BYTES = 256 << 20


def prune(folder: Path, limit: int = MAX_CACHE_BYTES) -> None:
    """Remove the least recently used files of ``folder`` until it holds at most ``limit`` bytes."""
    try:
        files = [(entry.stat().st_atime, entry.stat().st_size, entry) for entry in folder.iterdir() if entry.is_file()]
    except OSError:
        return
    total = sum(size for _, size, _ in files)
    for _, size, entry in sorted(files, key=lambda item: item[0]):
        if total <= limit:
            return
        try:
            entry.unlink()
            total -= size
        except OSError:
            continue


def tidy(caches: list[Path | None]) -> None:
    """After a grading: each compilation cache it used pruned (:func:`prune`), and the grader's
    bytecode written for the next grading's processes (:func:`keep_bytecode`)."""
    for folder in caches:
        if folder is not None:
            prune(folder)
    keep_bytecode()


def outcomes_dir() -> Path | None:
    """Where the reference's outcomes are kept (only the grader's own processes write it)."""
    return _make(root() / "reference-outcomes", mode=0o700)


class ReferenceCache:
    """Reference outcomes by everything they depend on: one reference run per seed and exercise.

    The reference is trusted and deterministic for a given seed, so every submission
    graded with the same seed shares one run per exercise: in memory for a run or a
    batch, on disk (``folder``) across processes and runs. Timed exercises never come
    from here: their timings must be measured in the same run.
    """

    def __init__(self, folder: Path | None = None, size: int = 512):
        self.folder = folder
        self.size = size
        self._data: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(chapter: Any, ex: Any, seed: int, reference_dir: Path) -> tuple:
        return (chapter.id, ex.id, seed, content_digest(reference_dir), content_digest(chapter.folder),
                grader_digest(), machine())

    def get(self, key: tuple) -> Any:
        with self._lock:
            found = self._data.get(key)
        if found is None and self.folder is not None:
            found = self._load(key)
            if found is not None:
                self._remember(key, found)
        return found

    def put(self, key: tuple, outcome: Any) -> None:
        self._remember(key, outcome)
        if self.folder is not None:
            self._store(key, outcome)

    def _remember(self, key: tuple, outcome: Any) -> None:
        with self._lock:
            if len(self._data) >= self.size:
                self._data.pop(next(iter(self._data)))
            self._data[key] = outcome

    def _path(self, key: tuple) -> Path:
        return self.folder / (hashlib.sha256(repr(key).encode()).hexdigest() + ".json")

    def _load(self, key: tuple) -> Any:
        from grader import wire
        from grader.runner.jobs import JobOutcome

        try:
            data = wire.decode(json.loads(self._path(key).read_text(encoding="utf-8")))
            return JobOutcome(**data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, wire.ProtocolError) as exc:  # damaged: run it again
            log.warning("reference outcome %s unreadable (%s); running the reference", self._path(key).name, exc)
            return None

    def _store(self, key: tuple, outcome: Any) -> None:
        from grader import wire

        path = self._path(key)
        try:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(wire.encode(dataclasses.asdict(outcome))), encoding="utf-8")
            os.replace(tmp, path)
        except (OSError, TypeError, ValueError) as exc:  # a full disk, an odd value: no cache, no harm
            log.warning("could not keep the reference outcome: %s", exc)


_digests: dict[tuple, str] = {}


def content_digest(folder: Path) -> str:
    """A fingerprint of the contents of a folder's Python and TOML files.

    Read again only when a file's size or time of change differs from the last reading.
    """
    files = []
    for file in sorted(Path(folder).glob("*")):
        try:
            if file.is_file() and file.suffix in (".py", ".toml"):
                stat = file.stat()
                files.append((file, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns))
        except OSError:
            continue
    seen = (str(folder), *((str(f), *rest) for f, *rest in files))
    if seen in _digests:
        return _digests[seen]
    digest = hashlib.sha256()
    for file, *_ in files:
        digest.update(file.name.encode() + b"\0" + hashlib.sha256(file.read_bytes()).digest())
    if len(_digests) > 64:
        _digests.clear()
    _digests[seen] = digest.hexdigest()
    return _digests[seen]


@functools.lru_cache(maxsize=None)
def grader_digest() -> str:
    """A fingerprint of the grader's own code (what the probes record depends on it)."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for file in sorted(package.rglob("*.py")):
        digest.update(str(file.relative_to(package)).encode() + hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


_machine_lock = threading.Lock()


def machine() -> str:
    """The device a reference outcome was computed on, as far as it can be told without starting JAX:
    the accelerator plugins installed (JAX's CUDA, ROCm and TPU packages), told from the names of
    their folders of metadata (reading every package's metadata would take longer than a job)."""
    with _machine_lock:  # exercises are graded in threads: one reading
        return _machine()


@functools.lru_cache(maxsize=None)
def _machine() -> str:
    import re
    import sys

    plugins = set()
    for folder in sys.path:
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                project = re.split(r"-\d", name.rsplit(".", 1)[0], maxsplit=1)[0].lower().replace("_", "-")
                if project.startswith(("jax-cuda", "libtpu", "jax-rocm")):
                    plugins.add(project)
    return "|".join([platform.machine(), os.environ.get("JAX_PLATFORMS", ""),
                     os.environ.get("CUDA_VISIBLE_DEVICES", ""), *sorted(plugins)])


def keep_bytecode(package: Path | None = None) -> int:
    """Write the bytecode of the grader's own modules beside them, where it is missing or stale.

    Every grading process (the command, and each host in its sandbox) imports these
    modules, and Python compiles a module that has no valid bytecode on every import.
    The hosts never write bytecode (nothing in a sandbox may), and neither does any
    process where ``PYTHONDONTWRITEBYTECODE`` is set, as in many containers: without
    this, every grading compiles them all three times. Written as ``pip install`` would
    (timestamped ``__pycache__`` files), by the grader's own process only; a package it
    may not write to is left as it is. Returns how many modules were compiled.
    """
    import importlib.util
    import py_compile
    import sys

    package = Path(package or Path(__file__).resolve().parent)
    tag = sys.implementation.cache_tag
    if tag is None:
        return 0
    compiled = 0
    for source in package.rglob("*.py"):
        target = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        try:
            stat = source.stat()
            with open(target, "rb") as pyc:
                head = pyc.read(16)
            if head[:4] == importlib.util.MAGIC_NUMBER and int.from_bytes(head[4:8], "little") == 0 and \
                    int.from_bytes(head[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF and \
                    int.from_bytes(head[12:16], "little") == stat.st_size & 0xFFFFFFFF:
                continue
        except OSError:
            pass
        try:
            py_compile.compile(str(source), cfile=str(target), doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
            compiled += 1
        except py_compile.PyCompileError:
            continue  # a module that does not compile: its import will say so
        except OSError:
            break  # a package it may not write to: no use compiling the rest
    return compiled


_tables: dict[tuple, dict] = {}


def read_toml(path: Path) -> dict:
    """A TOML file's table, parsed once per content of the file.

    The chapter's and the grader's TOML files (messages and hints in two languages) are
    parsed by every command, and parsing them takes longer than anything else it does
    before the grading starts. Each file's table is kept in this process and, as JSON, in
    the cache folder, under a digest of the file's bytes. Raises what ``tomllib`` raises
    for a malformed file.
    """
    import tomllib

    data = Path(path).read_bytes()
    seen = hashlib.sha256(data).hexdigest()
    if seen in _tables:
        return _tables[seen]
    name = seen[:40] + ".json"
    folder = _make(root() / "toml", mode=0o700)
    table = None
    if folder is not None:
        try:
            table = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            table = None
    if not isinstance(table, dict):
        table = tomllib.loads(data.decode("utf-8"))
        if folder is not None:
            try:
                tmp = folder / f".{name}.{os.getpid()}.tmp"
                tmp.write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
                os.replace(tmp, folder / name)
            except (OSError, TypeError, ValueError):  # a date in the file, a full disk: parsed each time
                pass
    _tables[seen] = table
    return table
