"""Where the grader keeps what it reuses between runs: one folder per JAX version.

The root is ``$GRADER_CACHE_DIR``, else ``$XDG_CACHE_HOME/jit-grader``, else
``~/.cache/jit-grader``; under it, a folder per jaxlib version (``jaxlib-0.10.2``) holds:

* ``xla/reference``: the reference's compiled programs (JAX's persistent compilation
  cache). Only the grader's own processes write it; a student's jobs may open a program
  in it whose key they know (its mode is 0711: not listable) and never write it. A
  program's key is a digest of the program itself (with the compiler's options and
  versions; not of its function's name: :func:`grader.child.jax_setup.name_free_cache_keys`),
  so what a student's job can load from it is a program it lowered identically itself:
  JAX's own operations on the same inputs, and any function the student wrote to compute
  exactly what the reference's does. It gives nobody anything they did not
  write, and saves every first grading (and every student of a batch) the compiles;
* ``xla/class``: in a batch, the programs students' jobs asked the grader's own compiler for
  (:mod:`grader.child.compiler`): each compiled by the grader from the program whose digest is
  its key, read by key by every student's job of a batch, written by no student's;
* ``xla/students/<digest of the submission's path>``: a submission's own compiled
  programs, written by that student's jobs, read by nobody else's;
* ``reference-outcomes``: the reference's outcomes (:mod:`grader.outcomes`);
* ``seeds-ahead/<chapter>.json``: the seeds a student's next gradings take, drawn ahead and shown to nobody
  (:mod:`grader.ahead`), whose reference outcomes the reference's jobs compute beside their own;
* ``toml``: the chapter's and the grader's TOML files, parsed (:func:`grader.i18n.read_toml`);
* ``durations.json``: how long each exercise took in recent gradings (:func:`durations`), for
  the order they start in;
* ``timing-cases.json``: which candidate input size each timed exercise chose when it last timed
  them all on this machine (:func:`timing_cases`): the only ones its jobs prepare and time since.

JAX still reports a program loaded from a cache as a backend compile, so compile
counts stay exact. Each folder is pruned to :data:`MAX_CACHE_BYTES` after a grading.
"""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from grader.service_folder import cache_base


def root() -> Path:
    """The cache's root for this JAX version."""
    return cache_base() / f"jaxlib-{_jaxlib_version()}"


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
    return make_folder(root() / "xla" / "reference", mode=0o711)


def class_dir() -> Path | None:
    """The class's compilation cache: programs of students' jobs in a batch, compiled by the grader's own
    compiler from the program whose digest is their key (:mod:`grader.child.compiler`). Only that
    compiler writes it (its uid creates files; 1733: nobody lists it or removes another's file);
    students' sandboxes mount it read-only."""
    return make_folder(root() / "xla" / "class", mode=0o1733)


def student_dir(submission: Path, group: int | None = None) -> Path | None:
    """The compilation cache of the submission at ``submission``, written by its jobs: with per-job uids,
    those of the grading's ``group`` (``2770``: no other uid enters it, a classmate's job plants nothing
    there), else the grader's own uid (``0700``). The folder of every student's (``xla/students``) is
    ``0711``: nobody lists it. Pruned as a whole tree (:func:`prune`)."""
    key = hashlib.sha256(str(Path(submission).resolve()).encode()).hexdigest()[:16]
    students = make_folder(root() / "xla" / "students", mode=0o711)
    if students is None:
        return None
    folder = make_folder(students / key, mode=0o2770 if group is not None else 0o700)
    if folder is not None and group is not None:
        try:
            os.chown(folder, os.geteuid(), group)
            os.chmod(folder, 0o2770)  # chown clears the set-group-id bit: the jobs' files take the group
        except OSError:
            return None
    return folder


def make_folder(path: Path, *, mode: int) -> Path | None:
    """The folder ``path``, made with ``mode``; ``None`` when it cannot be (a read-only home: no cache,
    no harm)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, mode)
        for parent in path.parents:  # every job uid must reach a student's folder and the reference's
            if parent == Path(root()).parent:
                break
            if mode & 0o001:
                os.chmod(parent, os.stat(parent).st_mode | 0o711)
        return path
    except OSError:
        return None


def outcomes_dir() -> Path | None:
    """Where the reference's outcomes are kept (only the grader's own processes write it)."""
    return make_folder(root() / "reference-outcomes", mode=0o700)


def durations(chapter: str) -> dict[str, float]:
    """Each exercise's wall seconds in recent gradings of ``chapter`` (:func:`keep_durations`), for the order
    the exercises start in (:func:`grader.scheduling.run_all`); empty when none are kept."""
    found = _kept(DURATIONS).get(chapter, {})
    return {k: float(v) for k, v in found.items() if isinstance(k, str) and isinstance(v, (int, float))} \
        if isinstance(found, dict) else {}


def keep_durations(chapter: str, seconds: dict[str, float]) -> None:
    """Fold this grading's wall seconds by exercise into those kept (half the old figure, half the new)."""
    kept = _kept(DURATIONS)
    mine = {**durations(chapter)}
    for exercise, value in seconds.items():
        mine[exercise] = round(value if exercise not in mine else (mine[exercise] + value) / 2, 3)
    kept[chapter] = mine
    _keep(DURATIONS, kept)


#: the file of :func:`durations`, in the cache's root
DURATIONS = "durations.json"


def timing_cases(chapter: str, exercise: str) -> dict | None:
    """The cases a timed exercise of ``chapter`` chose when it last timed every candidate on this machine
    (:func:`keep_timing_cases`): ``{"cases": [...], "device": {...}}``, or ``None``."""
    found = _kept(TIMING_CASES).get(chapter, {}).get(exercise)
    return found if isinstance(found, dict) and isinstance(found.get("cases"), list) else None


def keep_timing_cases(chapter: str, exercise: str, entry: dict | None) -> None:
    """Keep (``entry``) or forget (``None``) what :func:`timing_cases` gives."""
    kept = _kept(TIMING_CASES)
    found = kept.get(chapter)
    mine: dict = found if isinstance(found, dict) else {}
    if entry is None:
        mine.pop(exercise, None)
    else:
        mine[exercise] = entry
    kept[chapter] = mine
    _keep(TIMING_CASES, kept)


#: the file of :func:`timing_cases`, in the cache's root
TIMING_CASES = "timing-cases.json"


def _kept(name: str) -> dict:
    import json

    try:
        kept = json.loads((root() / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) else {}


def _keep(name: str, data: dict) -> None:
    import json

    path = root() / name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # a read-only cache: nothing kept, no harm
        pass


#: the most a compilation cache keeps; the oldest programs go first
MAX_CACHE_BYTES = 256 << 20
#: beside a program the reference's job is compiling now, ``<key>-compiling`` (empty) says so to a
#: student's job that lowered the same program: it waits for the program rather than compile it too
#: (:class:`grader.child.jax_setup.TieredCache`); one older than :data:`COMPILING_FRESH_S` is stale
COMPILING = "-compiling"
COMPILING_FRESH_S = 60.0


def prune(folder: Path, limit: int = MAX_CACHE_BYTES) -> None:
    """Remove the least recently used files of ``folder``, its folders' included (a student's job may leave
    a tree there), until it holds at most ``limit`` bytes, then the folders left empty; and every stale mark
    of a compile (:data:`COMPILING`: a job ended before it wrote its program)."""
    files = []  # (last use, bytes it takes, last change, path): one stat a file (a cache holds thousands)
    folders, below = [str(folder)], []
    while folders:  # the whole tree: a job may leave folders of its own in a student's cache
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            folders.append(entry.path)
                            below.append(entry.path)
                        else:
                            info = entry.stat(follow_symlinks=False)
                            files.append((info.st_atime, _takes(info), info.st_mtime, entry.path))
                    except OSError:
                        continue
        except OSError:
            continue
    try:
        _prune_files(files, limit)
    finally:
        for path in sorted(below, key=len, reverse=True):  # the folders left empty
            try:
                os.rmdir(path)
            except OSError:
                pass


def _takes(info: os.stat_result) -> int:
    """The bytes a file takes: its size, or the blocks it holds where they are far more (reserved beyond
    its end, ``fallocate`` with ``FALLOC_FL_KEEP_SIZE``), not a small file's rounding up to a block."""
    held = getattr(info, "st_blocks", 0) * 512
    return held if held > info.st_size + (64 << 10) else info.st_size


def _prune_files(files: list[tuple[float, int, float, str]], limit: int) -> None:
    import time

    stale = time.time() - COMPILING_FRESH_S
    for _, _, changed, path in files:
        if path.endswith(COMPILING) and changed < stale:
            try:
                os.unlink(path)
            except OSError:
                continue
    total = sum(size for _, size, _, _ in files)
    for _, size, _, path in sorted(files):
        if total <= limit:
            return
        try:
            os.unlink(path)
            total -= size
        except OSError:
            continue


def tidy(caches: list[Path | None]) -> None:
    """After a grading: each compilation cache it used pruned (:func:`prune`), and the grader's
    bytecode written for the next grading's processes (:func:`grader.bytecode.keep_bytecode`)."""
    from grader.bytecode import keep_bytecode

    for cache in caches:
        if cache is not None:
            prune(cache)
    keep_bytecode()
