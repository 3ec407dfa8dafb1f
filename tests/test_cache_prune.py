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
    (tmp_path / "sub").mkdir()  # not a file: left alone
    store.prune(tmp_path, limit=300)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p1-cache", "p3-cache", "p4-cache", "sub"]
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
