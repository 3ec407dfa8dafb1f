"""A compilation cache is kept under its limit, least recently used programs first (:func:`grader.store.prune`),
with one ``stat`` a file: the cache is pruned after every grading and holds thousands of programs."""
from __future__ import annotations

import os
import time

from grader import store


def _program(folder, name: str, size: int, used: float) -> None:
    path = folder / name
    path.write_bytes(b"x" * size)
    os.utime(path, (used, used))


def test_the_least_recently_used_programs_go_first_until_the_cache_fits(tmp_path):
    now = time.time()
    for i, used in enumerate([now - 50, now - 10, now - 40, now - 20, now - 30]):
        _program(tmp_path, f"p{i}-cache", 100, used)
    store.prune(tmp_path, limit=300)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p1-cache", "p3-cache", "p4-cache"]
    store.prune(tmp_path, limit=300)  # under the limit: nothing more goes
    assert len(list(tmp_path.glob("*-cache"))) == 3


def test_a_stale_mark_goes_and_a_fresh_one_stays(tmp_path):
    old = time.time() - store.COMPILING_FRESH_S - 5
    _program(tmp_path, f"k1{store.COMPILING}", 0, old)
    (tmp_path / f"k2{store.COMPILING}").write_bytes(b"")
    _program(tmp_path, "k1-cache", 10, time.time())
    store.prune(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k1-cache", f"k2{store.COMPILING}"]


def test_a_missing_folder_is_nothing_to_prune(tmp_path):
    store.prune(tmp_path / "absent")  # no error


def test_a_tree_a_job_left_is_pruned_with_the_rest_and_its_empty_folders_go(tmp_path):
    """A student's job may leave folders in its cache (one kept 96 MiB across gradings): their files count
    and go oldest first like the cache's own, and the folders left empty go too."""
    now = time.time()
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    _program(deep, "old-blob", 1000, now - 100)
    _program(tmp_path / "a", "newer-blob", 100, now - 5)
    _program(tmp_path, "p-cache", 100, now - 1)
    (tmp_path / "empty").mkdir()
    store.prune(tmp_path, limit=250)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["a", "a/newer-blob", "p-cache"]


def test_blocks_reserved_beyond_a_files_end_count(tmp_path):
    """``fallocate`` with ``FALLOC_FL_KEEP_SIZE`` holds blocks that a file's size does not show."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    path = tmp_path / "reserved"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        if libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(8 << 20)) != 0:  # 1: FALLOC_FL_KEEP_SIZE
            import pytest

            pytest.skip("this file system reserves no blocks beyond a file's end")
    finally:
        os.close(fd)
    assert path.stat().st_size == 0
    _program(tmp_path, "p-cache", 100, time.time())
    store.prune(tmp_path, limit=1 << 20)
    assert not path.exists() and (tmp_path / "p-cache").exists()
