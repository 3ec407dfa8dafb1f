"""A program the reference's job is compiling is waited for by the student's job, not compiled twice.

For a fresh seed both sides lower programs no grading compiled before (ex08's ``flops_of``
functions, whose shapes are drawn per seed), side by side. The reference's job marks each
program it is compiling (``<key>-compiling`` in its cache folder) until it has written it; the
student's job that finds such a mark, and no program, waits for the program and loads it
(:class:`grader.child.jax_setup.TieredCache`).
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT

from grader import store
from grader.child.jax_setup import FOLLOW_S, POLL_S, WAIT_S, TieredCache

# Real JAX, two processes: the reference's holds its compile (after marking it, as its cache was
# asked for the program) until the test opens the gate; meanwhile the student's lowers the same
# program from a function of another name. JAX calls the cache's get() before compiling and put()
# after (jax/_src/compiler.py, compile_or_get_cached -> _cache_read / _cache_write).
_SIDE = """
    import os, sys, time, numpy as np, jax, jax.numpy as jnp
    from grader.child import jax_setup
    side, reference, own, gate, marking = sys.argv[1:6]
    if side == "reference":
        jax_setup.use_compile_caches(reference, [], mark_compiles=marking == "mark")
        from jax._src import compiler
        compile_ = compiler.backend_compile_and_load
        def held(*args, **kwargs):
            while not os.path.exists(gate):
                time.sleep(0.01)
            return compile_(*args, **kwargs)
        compiler.backend_compile_and_load = held
    else:
        jax_setup.use_compile_caches(own, [reference])
    jax_setup.name_free_cache_keys()
    jax_setup.portable_cache_keys()
    hits = []
    jax.monitoring.register_event_listener(
        lambda name, **kw: hits.append(name) if name.endswith("cache_hits") else None)
    def flops_like(x, w):
        return jnp.tanh(x @ w) @ w.T
    def other_name(x, w):
        return jnp.tanh(x @ w) @ w.T
    x = np.linspace(-1.0, 1.0, 48 * 40, dtype=np.float32).reshape(48, 40)
    w = np.linspace(0.5, -0.5, 40 * 24, dtype=np.float32).reshape(40, 24)
    started = time.monotonic()
    if side == "student":
        open(gate + "-arrived", "w").close()
    value = np.asarray(jax.jit(flops_like if side == "reference" else other_name)(x, w))
    jax_setup.unmark_compiles()
    print(float(value.sum()), len(hits), round(time.monotonic() - started, 3))
"""


def _side(side: str, tmp_path: Path, marking: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(_SIDE), side, str(tmp_path / "reference"),
                             str(tmp_path / "student"), str(tmp_path / "gate"), marking],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def _programs(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith("-cache")] if folder.exists() else []


def _both(tmp_path: Path, marking: str) -> tuple[list[str], list[str]]:
    (tmp_path / "reference").mkdir()
    reference = _side("reference", tmp_path, marking)
    deadline = time.monotonic() + 120
    while not list((tmp_path / "reference").glob("*")) and marking == "mark" and time.monotonic() < deadline:
        time.sleep(0.02)  # the reference's job looked for the program, marked it, and holds its compile
    student = _side("student", tmp_path, marking)
    while not (tmp_path / "gate-arrived").exists() and time.monotonic() < deadline:
        time.sleep(0.02)  # the student's job imported JAX and is about to lower the same program
    time.sleep(0.5)  # waiting for it (or compiling it, unmarked)
    (tmp_path / "gate").touch()
    out = []
    for process in (reference, student):
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-2000:]
        out.append(stdout.split())
    return out


def test_the_students_job_waits_for_the_program_the_references_job_is_compiling(tmp_path):
    reference, student = _both(tmp_path, "mark")
    assert student[0] == reference[0]  # the same values
    assert int(student[1]) == 1, "the student's job loaded the reference's program"
    assert float(student[2]) >= 0.4, "after waiting for it"
    assert _programs(tmp_path / "student") == [], "and compiled nothing of its own"
    assert not list((tmp_path / "reference").glob(f"*{store.COMPILING}")), "the mark is gone once written"


def test_without_the_mark_the_students_job_compiles_the_program_itself(tmp_path):
    reference, student = _both(tmp_path, "no-mark")
    assert student[0] == reference[0]
    assert int(student[1]) == 0 and len(_programs(tmp_path / "student")) == 1


# ------------------------------------------------------------------ the cache's rules, without JAX
class _Clock:
    """The clock a lookup of the cache waits by (``time.monotonic`` and ``time.sleep`` while it runs): each of its
    sleeps moves this clock, so ``slept`` is how long the cache chose to wait, however slowly a loaded machine ran
    it (a lookup held to 50 ms of the machine's time failed whenever the machine was busier than that)."""

    def __init__(self) -> None:
        self.now, self.naps = 1000.0, []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.naps.append(seconds)
        self.now += seconds

    @property
    def slept(self) -> float:
        return sum(self.naps)


@contextlib.contextmanager
def _waits():
    """A :class:`_Clock` in place of the machine's, for the lookups inside the ``with`` (no other thread runs)."""
    clock = _Clock()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(time, "monotonic", clock.monotonic)
        patch.setattr(time, "sleep", clock.sleep)
        yield clock


def test_a_mark_is_waited_for_only_while_fresh_and_only_as_long_as_the_limit(tmp_path):
    """How long each lookup waited is read from :class:`_Clock` (the cache's own sleeps), not from the machine's
    clock: under load the machine's time of a lookup that never sleeps passed 50 ms."""
    reference, own = tmp_path / "reference", tmp_path / "own"
    reference.mkdir()
    student = TieredCache(str(own), [str(reference)])
    with _waits() as clock:
        assert student.get("nothing") is None
    assert clock.naps == []  # no mark: no wait

    marking = TieredCache(str(reference), [], mark_compiles=True)
    assert marking.get("k1") is None and (reference / f"k1{store.COMPILING}").exists()

    def write_later() -> None:
        time.sleep(0.2)
        marking.put("k1", b"program")

    writer = threading.Thread(target=write_later)
    writer.start()
    assert student.get("k1") == b"program"  # waited, then loaded
    writer.join()
    assert not (reference / f"k1{store.COMPILING}").exists()

    stale = reference / f"k2{store.COMPILING}"
    stale.touch()
    os.utime(stale, (time.time() - store.COMPILING_FRESH_S - 1,) * 2)
    with _waits() as clock:
        assert TieredCache(str(own), [str(reference)]).get("k2") is None
    assert clock.naps == []  # a stale mark: no wait
    store.prune(reference)
    assert not stale.exists() and (reference / "k1-cache").exists()  # pruned: the stale mark, not the program

    assert marking.get("k3") is None  # marked, never written: its job's end removes the mark
    with _waits() as clock:
        assert TieredCache(str(own), [str(reference)]).get("k3") is None
    assert WAIT_S <= clock.slept + 1e-9 and clock.slept < WAIT_S + 2 * POLL_S, clock.slept  # the limit, no longer
    marking.unmark()
    assert not (reference / f"k3{store.COMPILING}").exists()


def test_after_a_program_waited_for_the_next_miss_looks_a_little_longer_for_its_mark(tmp_path):
    """The reference's job is a step ahead: it marks the next program a moment after writing the one
    waited for. Looking once more, briefly, finds that mark too (not compiled twice)."""
    reference = tmp_path / "reference"
    marking = TieredCache(str(reference), [], mark_compiles=True)
    student = TieredCache(str(tmp_path / "own"), [str(reference)])

    def reference_job() -> None:
        marking.get("a")
        time.sleep(0.1)
        marking.put("a", b"first")
        time.sleep(FOLLOW_S / 3)  # lowering the next one
        marking.get("b")
        time.sleep(0.1)
        marking.put("b", b"second")

    job = threading.Thread(target=reference_job)
    job.start()
    while not marking.marks:
        time.sleep(0.001)
    assert student.get("a") == b"first"
    assert student.get("b") == b"second"  # its mark came after the student looked
    job.join()
    with _waits() as clock:  # how long each miss looked, by the cache's own sleeps (not the loaded machine's clock)
        assert student.get("c") is None
    assert FOLLOW_S <= clock.slept + 1e-9 and clock.slept < FOLLOW_S + 2 * POLL_S, clock.slept  # looked a little longer
    with _waits() as clock:
        assert student.get("d") is None
    assert clock.naps == []  # once: a miss after a miss does not look longer


_CALLBACK = """
    import os, sys, numpy as np, jax, jax.numpy as jnp
    from grader import store
    from grader.child import jax_setup
    jax_setup.use_compile_caches(sys.argv[1], [], mark_compiles=True)
    jax_setup.name_free_cache_keys()
    def debug_norm(x):
        norm = jnp.linalg.norm(x)
        jax.debug.print("norm={}", norm)
        return x / norm
    def plain(x):
        return x / jnp.linalg.norm(x)
    x = np.linspace(1.0, 2.0, 16, dtype=np.float32)
    for fn in (debug_norm, plain):
        np.asarray(jax.jit(fn)(x))
        marks = [n for n in os.listdir(sys.argv[1]) if n.endswith(store.COMPILING)]
        programs = [n for n in os.listdir(sys.argv[1]) if n.endswith("-cache")]
        print(fn.__name__, len(marks), len(programs))
"""


def test_a_program_jax_never_writes_is_never_marked(tmp_path):
    """JAX looks a program with a host callback up in the cache, compiles it and does not write it
    (jax/_src/compiler.py, _cache_write: "Not writing persistent cache entry ... because it uses host
    callbacks"): marked, it would keep a student's job lowering the same waiting for nothing."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_CALLBACK), str(tmp_path)], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict((line.split()[0], line.split()[1:]) for line in done.stdout.splitlines() if line.split())
    assert lines["debug_norm"] == ["0", "0"]  # neither marked nor written
    assert lines["plain"] == ["0", "1"]  # written, its mark gone
