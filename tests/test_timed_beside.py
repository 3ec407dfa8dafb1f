"""A timed exercise timed beside the untimed ones (grader.sides.BothSides.alone): where the grading has two
cores, ex06's rounds have the last core to themselves and everything else of the grading moves to the other
cores meanwhile (grader.affinity, ``ToHost.CORES``); where a process cannot be moved, the rounds wait for
the untimed exercises, as before."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import make_submission

CPUS = sorted(os.sched_getaffinity(0))
TWO_CORES = pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs: with one, a timed exercise is timed alone")


@TWO_CORES
def test_a_process_and_all_its_threads_move_but_the_jobs_kept_apart():
    """Run in a process of its own: it moves itself."""
    code = textwrap.dedent(f"""
        import os, subprocess, sys, threading, time
        from grader.affinity import set_cores
        threads = [threading.Thread(target=time.sleep, args=(3,)) for _ in range(3)]
        [t.start() for t in threads]
        def child():
            return subprocess.Popen([sys.executable, "-c", "import threading, time; "
                                     "[threading.Thread(target=time.sleep, args=(3,)).start() for _ in range(2)]; "
                                     "time.sleep(3)"])
        moved, kept = child(), child()
        end = time.monotonic() + 20  # each has started its two threads (0.5 s was too short under load)
        while time.monotonic() < end and any(len(os.listdir(f"/proc/{{p.pid}}/task")) < 3 for p in (moved, kept)):
            time.sleep(0.02)
        def masks(pid):
            return {{tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir(f"/proc/{{pid}}/task")}}
        ok = set_cores({{moved.pid: "moved", kept.pid: "timed"}}, [{CPUS[0]}], ["timed"])
        print(repr((ok, masks(os.getpid()), masks(moved.pid), masks(kept.pid),
                    len(os.listdir(f"/proc/{{moved.pid}}/task")))))
        moved.kill(); kept.kill()
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    ok, own, moved, kept, threads = eval(done.stdout)  # noqa: S307 - our own printout
    assert ok is True and threads == 3
    assert own == moved == {(CPUS[0],)}  # every thread of both
    assert kept == {tuple(CPUS)}  # the timed job's own pin is its own business


#: a softmax_raw whose first call watches, for 4 s, which CPUs its job may run on, and prints each change
WATCHER = textwrap.dedent("""
    import os
    import time

    import jax
    import jax.numpy as jnp

    WATCHED = []
    WATCH_S, UNTIL_BACK = 4.0, False


    def softmax_raw(x):
        seen, until = [], time.monotonic() + (0.0 if WATCHED else WATCH_S)
        WATCHED.append(1)
        while time.monotonic() < until and not (UNTIL_BACK and len(seen) > 2 and seen[-1] == seen[0]):
            mask = sorted(os.sched_getaffinity(0))
            if not seen or seen[-1] != mask:
                seen.append(mask)
                print("cpus", mask, flush=True)
        e = jnp.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


    softmax = jax.jit(softmax_raw)
    log_softmax = jax.jit(lambda x: jnp.log(softmax_raw(x)))
""")


def _grade(path, **options):
    from grader.grading import GradeOptions, grade

    return grade(path, GradeOptions(chapter="ch4", exercises=("ex01_jit_forms", "ex06_speedup"), seed=11,
                                    exercise_timeout_s=120, **options))


@TWO_CORES
@pytest.mark.slow
def test_the_rounds_have_the_last_core_and_the_other_exercises_leave_it(tmp_path, monkeypatch):
    """The core is taken as idle (grader.affinity.busy): on a loaded machine (the CI run of 2026-12-06) it is
    busy with others' work, and the rounds rightly wait instead (the test below); this one is of the moving."""
    from grader import affinity as cores

    monkeypatch.setattr(cores, "busy", lambda cpu, seconds=0.05: 0.0)
    # ex01 watches until its job has left the core and come back (at most 90 s): under 4 busy loops ex06's rounds
    # began after a 4 s watch had ended, and ex01 saw no move; a move is asserted, whenever the rounds come
    watcher = WATCHER.replace("WATCH_S, UNTIL_BACK = 4.0, False", "WATCH_S, UNTIL_BACK = 90.0, True")
    report = _grade(make_submission(tmp_path, {"ex01_jit_forms": watcher}))
    assert report.timings["timed_beside"] == {"ex06_speedup": True}
    ex06 = next(ex for ex in report.exercises if ex.id == "ex06_speedup")
    assert ex06.score == ex06.max_score
    ex01 = next(ex for ex in report.exercises if ex.id == "ex01_jit_forms")
    masks = [line.split(" ", 1)[1] for line in ex01.output.splitlines() if line.startswith("cpus ")]
    # ex01's job ran on every core, left the last one while ex06's rounds ran, and came back
    assert masks[0] == str(CPUS) and str(CPUS[:-1]) in masks, ex01.output[:2000]
    assert masks.index(str(CPUS[:-1])) < len(masks) - 1 and masks[-1] == str(CPUS), masks


@TWO_CORES
def test_a_core_busy_with_someone_else_s_work_shows_busy():
    """What tells a loaded machine: a process not the grading's on the core left to the rounds."""
    from grader.affinity import busy

    burner = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{CPUS[-1]}}})\n"
                               "while True: pass"])
    try:
        import time

        time.sleep(0.3)
        assert busy(CPUS[-1], 0.2) > 0.8
    finally:
        burner.kill()
    assert 0.0 <= busy(CPUS[0], 0.05) <= 1.0 and busy(10_000) == 0.0  # no such CPU: nothing to tell


@TWO_CORES
@pytest.mark.slow
@pytest.mark.parametrize("why", ["cannot move", "core busy"])
def test_where_a_process_cannot_be_moved_or_the_core_is_busy_the_rounds_wait_for_the_others(tmp_path, monkeypatch,
                                                                                             why):
    from grader import affinity as cores
    from grader.runner.host_handles import HostProcess

    if why == "cannot move":
        monkeypatch.setattr(HostProcess, "set_cores", lambda self, cores, apart: False)
    else:  # a loaded machine: another process on the core left to the rounds
        monkeypatch.setattr(cores, "busy", lambda cpu, seconds=0.05: 1.0)
    report = _grade(make_submission(tmp_path, {"ex01_jit_forms": WATCHER}))
    assert report.timings["timed_beside"] == {"ex06_speedup": False}
    ex06 = next(ex for ex in report.exercises if ex.id == "ex06_speedup")
    assert ex06.score == ex06.max_score
    ex01 = next(ex for ex in report.exercises if ex.id == "ex01_jit_forms")
    masks = [line for line in ex01.output.splitlines() if line.startswith("cpus ")]
    # not moved, or moved back at once (the core was found busy)
    assert masks == [f"cpus {CPUS}"] if why == "cannot move" else masks[-1] == f"cpus {CPUS}", masks
    # its rounds began once ex01 had its result (beside it, they end while ex01's call still watches)
    t = report.timings
    assert t["ex06_speedup"]["ended_s"] > t["ex01_jit_forms"]["ended_s"]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="per-job uids need root")
def test_a_job_keeps_none_of_the_host_s_capabilities(tmp_path):
    """The host keeps CAP_SYS_NICE to move its jobs (besides changing uids); a job under its own uid has none."""
    probe = textwrap.dedent("""
        import jax
        import jax.numpy as jnp


        def softmax_raw(x):
            with open("/proc/self/status") as status:
                print("".join(line for line in status if line.startswith(("CapEff", "CapPrm", "Uid"))), flush=True)
            return jnp.exp(x) / jnp.exp(x).sum(axis=-1, keepdims=True)


        softmax = jax.jit(softmax_raw)
        log_softmax = jax.jit(lambda x: jnp.log(softmax_raw(x)))
    """)
    from grader.grading import GradeOptions, grade

    report = grade(make_submission(tmp_path, {"ex01_jit_forms": probe}),
                   GradeOptions(chapter="ch4", exercises=("ex01_jit_forms",), seed=3))
    assert report.sandbox["uid_isolation"] is True
    lines = report.exercises[0].output.splitlines()
    assert any(line.startswith("Uid:") and not line.split()[1] == "0" for line in lines), lines[:5]
    assert {line.split()[1] for line in lines if line.startswith(("CapEff", "CapPrm"))} == {"0000000000000000"}
