"""benchmarks/where_time_goes.py's split of a run's CPU seconds by process: each process the grader starts
is told by what it runs and where it sits (a host or template exec'd by the grader, or a fork of one), so
that what no report says (the hosts' imports of JAX, the workers, the command) is measured too."""
from __future__ import annotations

import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import where_time_goes as wtg  # noqa: E402

PY = "/venv/bin/python"
CHAPTER = '{"modules": ["grader.chapters.ch4.ex01_jit_forms"], "chapter_folders": []}'
TEMPLATE = [PY, "-s", "-m", "grader.child.template", "6", CHAPTER]
STUDENT_HOST = [PY, "-s", "-m", "grader.child.host", "5", CHAPTER]
REFERENCE_HOST = [PY, "-s", "-m", "grader.child.host", "9", CHAPTER]
COMPILER_HOST = [PY, "-s", "-m", "grader.child.host", "7", '{"modules": [], "chapter_folders": []}']
BWRAP = ["/usr/bin/bwrap", "--die-with-parent", "--unshare-pid", "--", "python"]


def _process(parent: int, argv: list[str], cpu: float) -> dict:
    return {"parent": parent, "argv": argv, "cpu": cpu}


def test_a_batchs_processes_are_told_apart_by_what_they_run_and_where_they_fork():
    seen = {
        1: _process(0, [PY, "-m", "grader", "batch", "class", "-j", "2"], 0.5),
        2: _process(1, [PY, "-m", "grader.batch.worker"], 1.0),
        3: _process(2, BWRAP, 0.0),
        4: _process(3, TEMPLATE, 0.8),  # imports JAX once
        5: _process(4, TEMPLATE, 0.07),  # a student's host, forked from it
        6: _process(5, TEMPLATE, 0.3),  # that student's job, forked from the host
        7: _process(5, TEMPLATE, 0.2),
        8: _process(2, REFERENCE_HOST, 0.8),  # the reference's host: no sandbox of bubblewrap's
        9: _process(8, REFERENCE_HOST, 0.4),
        10: _process(2, BWRAP, 0.0),
        11: _process(10, COMPILER_HOST, 0.75),
        12: _process(11, COMPILER_HOST, 0.6),
    }
    split = wtg.by_process(seen)
    assert split == pytest.approx({
        "the command (grade, grade batch)": 0.5,
        "a batch's workers": 1.0,
        "other: bwrap": 0.0,
        "the template of students' hosts (a batch): importing JAX, forking": 0.8,
        "the hosts it forks, one a student": 0.07,
        "the students' jobs": 0.5,
        "the reference's host: importing JAX, forking": 0.8,
        "the reference's host: its jobs": 0.4,
        "the class's compiler's host: importing JAX, forking": 0.75,
        "the class's compiler's host: its jobs": 0.6,
    })
    assert sum(split.values()) == pytest.approx(sum(p["cpu"] for p in seen.values()))  # nothing counted twice


def test_a_single_gradings_student_host_is_the_one_in_bubblewrap():
    seen = {
        1: _process(0, [PY, "-m", "grader", "solutions/ch4"], 0.3),
        2: _process(1, BWRAP, 0.0),
        3: _process(2, STUDENT_HOST, 0.85),
        4: _process(3, STUDENT_HOST, 0.25),
        5: _process(1, REFERENCE_HOST, 0.85),
        6: _process(5, REFERENCE_HOST, 0.45),
        7: _process(1, [], 0.0),  # ended between its start and the first look at it
    }
    split = wtg.by_process(seen)
    assert split["the student's host: importing JAX, forking"] == pytest.approx(0.85)
    assert split["the student's host: its jobs"] == pytest.approx(0.25)
    assert split["the reference's host: its jobs"] == pytest.approx(0.45)
    assert split["other: ended before it was seen"] == 0.0


def test_a_real_process_tree_is_watched_to_its_last_child():
    """A command whose child burns 0.3 s of CPU, then sleeps (so that a look comes after its work, however
    loaded the machine): both are seen, the child's CPU with it (as /proc last showed it)."""
    child = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\ntime.sleep(0.5)"
    status, seen = wtg.watched_run([sys.executable, "-c", f"import subprocess, sys; "
                                    f"subprocess.run([sys.executable, '-c', {child!r}])"], env=None)
    assert status == 0
    parent = next(pid for pid, p in seen.items() if "subprocess" in " ".join(p["argv"]))
    children = [p for p in seen.values() if p["parent"] == parent]
    assert len(children) == 1 and children[0]["cpu"] >= 0.25, seen


def test_a_fork_that_execs_later_is_told_by_what_it_ran_after():
    """A batch's worker is forked from the command and execs its own module afterwards: first seen running the
    command's command line, it is read again until it runs its own (and keeps it once it ended)."""
    forks_then_execs = ("import os, sys, time\n"
                        "pid = os.fork()\n"
                        "if pid == 0:\n"
                        "    time.sleep(0.3)\n"
                        "    os.execv(sys.executable,\n"
                        "             [sys.executable, '-c', 'import time; time.sleep(0.5)', 'exec-ed'])\n"
                        "os.waitpid(pid, 0)\n")
    status, seen = wtg.watched_run([sys.executable, "-c", forks_then_execs], env=None)
    assert status == 0
    (child,) = [p for p in seen.values() if p["parent"] in seen]
    assert child["argv"][-1] == "exec-ed", seen
