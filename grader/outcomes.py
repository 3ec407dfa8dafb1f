"""The reference's outcomes, kept by everything they depend on: :class:`ReferenceCache`.

The reference is trusted and deterministic for a seed, so every submission graded with
the same seed shares one reference run per exercise: in memory for a run or a batch,
on disk (:func:`grader.store.outcomes_dir`) across processes and runs, keyed by the
reference's and the chapter's code (:func:`folder_digest`), the grader's
(:func:`grader_digest`), the exercise, the seed and the machine's accelerators
(:func:`machine`). A replay (``--seed``) or another worker of a batch reuses them.
Timed exercises never come from here: their timings must be measured in the same run.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import platform
import threading
from stat import S_ISREG
from pathlib import Path
from typing import TYPE_CHECKING

from grader import wire
from grader.runner.job_sessions import JobOutcome

if TYPE_CHECKING:
    from grader.chapter import Chapter, ExerciseSpec

log = logging.getLogger("grader")


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
        self._data: dict[tuple, JobOutcome] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(chapter: Chapter, ex: ExerciseSpec, seed: int, reference_dir: Path,
            platform: str | None | bool = False) -> tuple:
        """``platform``: the ``jax_platforms`` its job runs with (``cpu`` beside a TPU, ``None``: JAX's choice);
        ``False``: a plan made without a grading's (:func:`grader.runner.devices.default_plan`: a batch's)."""
        if platform is False:
            from grader.runner.devices import default_plan

            platform = default_plan().platform_for(ex.device)
        return (chapter.id, ex.id, seed, folder_digest(reference_dir), folder_digest(chapter.folder),
                grader_digest(), machine(), platform)

    @staticmethod
    def for_seed(key: tuple, seed: int) -> tuple:
        """The key of the same exercise's outcome for another seed (:meth:`key`'s third item)."""
        return (*key[:2], seed, *key[3:])

    def has(self, key: tuple) -> bool:
        """Whether an outcome is kept under ``key`` (without reading it)."""
        with self._lock:
            if key in self._data:
                return True
        return self.folder is not None and self._path(key).exists()

    def get(self, key: tuple) -> JobOutcome | None:
        with self._lock:
            found = self._data.get(key)
        if found is None and self.folder is not None:
            found = self._load(key)
            if found is not None:
                self._remember(key, found)
        return found

    def put(self, key: tuple, outcome: JobOutcome) -> None:
        self._remember(key, outcome)
        if self.folder is not None:
            self._store(key, outcome)

    def _remember(self, key: tuple, outcome: JobOutcome) -> None:
        with self._lock:
            if len(self._data) >= self.size:
                self._data.pop(next(iter(self._data)))
            self._data[key] = outcome

    def _path(self, key: tuple) -> Path:
        return self.folder / (hashlib.sha256(repr(key).encode()).hexdigest() + ".json")

    def _load(self, key: tuple) -> JobOutcome | None:
        try:
            data = wire.decode(json.loads(self._path(key).read_text(encoding="utf-8")))
            return JobOutcome(**data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, wire.ProtocolError) as exc:  # damaged: run it again
            log.warning("reference outcome %s unreadable (%s); running the reference", self._path(key).name, exc)
            return None

    def _store(self, key: tuple, outcome: JobOutcome) -> None:
        path = self._path(key)
        try:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(wire.encode(outcome.fields())), encoding="utf-8")
            os.replace(tmp, path)
        except (OSError, TypeError, ValueError) as exc:  # a full disk, an odd value: no cache, no harm
            log.warning("could not keep the reference outcome: %s", exc)


_digests: dict[tuple, str] = {}


def folder_digest(folder: Path) -> str:
    """A fingerprint of the contents of a folder's Python and TOML files, its subfolders' too (a
    chapter's exercises are folders of their own), hidden folders and ``__pycache__`` left out.

    Read again only when a file's size or time of change differs from the last reading.
    """
    folder = Path(folder)
    files = []
    for top, folders, names in os.walk(folder):  # a grading asks for each exercise: walked, not globbed
        folders[:] = [name for name in folders if not name.startswith(".") and name != "__pycache__"]
        for name in names:
            if name.endswith((".py", ".toml")):
                try:
                    stat = os.stat(os.path.join(top, name), follow_symlinks=True)
                except OSError:
                    continue
                if S_ISREG(stat.st_mode):
                    files.append((Path(top, name), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns))
    files.sort()
    seen = (str(folder), *((str(f), *rest) for f, *rest in files))
    if seen in _digests:
        return _digests[seen]
    digest = hashlib.sha256()
    for file, *_ in files:
        name = file.relative_to(folder).as_posix()
        digest.update(name.encode() + b"\0" + hashlib.sha256(file.read_bytes()).digest())
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
