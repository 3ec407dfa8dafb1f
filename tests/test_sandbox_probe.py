"""The sandbox probe (``grader.runner.sandbox.bwrap_works``) and a Ctrl-C that lands while it runs.

The grader asks bubblewrap once whether it can create namespaces here (``bwrap ... --unshare-pid true``).
bubblewrap forks: the outer process waits, the inner one is PID 1 of a new PID namespace, deaf to the terminal's
SIGINT (the kernel delivers to a namespace's init only the signals it handles). A Ctrl-C at the terminal, sent to
the whole foreground process group, killed the outer one as the probe started (or ``subprocess.run`` killed it as
the interrupt reached Python), and the inner one stayed for good (bubblewrap.c ``handle_die_with_parent`` sets
``PR_SET_PDEATHSIG`` without looking whether the parent is still there): seen as ``nobody``, a ``bwrap`` left
sleeping in ``do_wait`` after ``grade batch`` had said it was interrupted; measured below, 12 in 100 interrupts.

So the probe runs in a session of its own, out of the terminal's reach, is waited for (it takes milliseconds)
before the interrupt goes on, and has no ``--die-with-parent`` (an interrupt inside ``subprocess.Popen`` leaves it
unwaited-for: it ends on its own). A stand-in ``bwrap`` on ``PATH`` makes the moment exact: it takes a second,
so the Ctrl-C surely lands while it runs.
"""
from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import ROOT

from grader.runner import bwrap_probe, sandbox

#: a stand-in for bubblewrap: says it started (its pid and session), takes a second, says it ended
FAKE_BWRAP = """#!/bin/sh
echo "$$ $(cut -d' ' -f6 /proc/$$/stat)" > "$PROBE_DIR/started"
sleep 1
echo done > "$PROBE_DIR/ended"
"""


def _fake_bwrap(tmp_path: Path, body: str = FAKE_BWRAP) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "bwrap"
    exe.write_text(body)
    exe.chmod(0o755)
    return bin_dir


def _wait_for(path: Path, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def test_a_ctrl_c_during_the_probe_lets_the_probe_end_then_interrupts(tmp_path):
    bin_dir = _fake_bwrap(tmp_path)
    script = textwrap.dedent("""
        import os, sys, time
        from grader.runner import sandbox
        try:
            sandbox.bwrap_works()
        except KeyboardInterrupt:
            print("interrupted", time.monotonic(), os.path.exists(os.path.join(os.environ["PROBE_DIR"], "ended")))
            sys.exit(130)
        print("not interrupted")
    """)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PROBE_DIR": str(tmp_path),
           "PYTHONPATH": str(ROOT)}
    # its own process group, as a terminal's foreground job: the Ctrl-C goes to the whole group
    child = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        _wait_for(tmp_path / "started")
        os.killpg(child.pid, signal.SIGINT)
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    probe_pid, probe_session = (int(v) for v in (tmp_path / "started").read_text().split())
    assert child.returncode == 130, out
    assert out.split()[0] == "interrupted" and out.split()[2] == "True", \
        f"the interrupt went on before the probe had ended: {out!r}"
    assert (tmp_path / "ended").exists(), "the terminal's SIGINT reached the probe: it did not run to its end"
    assert probe_session == probe_pid != child.pid, "the probe does not lead a session of its own"


def test_a_probe_that_hangs_is_killed_with_everything_it_started(tmp_path):
    """Past its time the probe's whole session goes (bubblewrap's inner process with the outer one), not
    only the process the grader started."""
    body = """#!/bin/sh
sleep 60 &
echo $! > "$PROBE_DIR/started"
sleep 60
"""
    bin_dir = _fake_bwrap(tmp_path, body)
    os.environ["PROBE_DIR"] = str(tmp_path)
    try:
        status = bwrap_probe._to_its_end([str(bin_dir / "bwrap")], timeout=1.0)
    finally:
        del os.environ["PROBE_DIR"]
    assert status is None
    grandchild = int((tmp_path / "started").read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{grandchild}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # killed, not yet reaped by init
    state = Path(f"/proc/{grandchild}/stat").read_text().split()[2] if Path(f"/proc/{grandchild}").exists() else "gone"
    assert state in ("gone", "Z"), "what the probe started outlived it"


def test_the_probe_says_what_bubblewrap_does_here():
    """On this machine, the real probe agrees with running bubblewrap by hand."""
    import shutil

    exe = shutil.which("bwrap")
    found = sandbox.bwrap_works()
    if exe is None:
        assert found is None
        return
    by_hand = subprocess.run(bwrap_probe.probe_argv(exe), capture_output=True, timeout=30)
    assert (found == exe) == (by_hand.returncode == 0)


def _probes_alive() -> list[int]:
    """Live processes running a probe's command line, ``bwrap ... true`` (zombies, left for init to reap, aside)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if argv[0].endswith(b"bwrap") and argv[-2:] == [b"true", b""] and state != "Z":
            alive.append(int(entry.name))
    return alive


@pytest.mark.slow
@pytest.mark.skipif(sandbox.bwrap_works() is None, reason="bubblewrap cannot create namespaces on this machine")
def test_ctrl_c_at_random_moments_of_the_real_probe_leaves_no_bubblewrap(tmp_path):
    """The real bubblewrap, interrupted 100 times at a moment drawn in its first 10 ms: the grader ends each time,
    and no probe is left. Before the probe had a session of its own, 12 of 100 such interrupts (2 of 60 in another
    run) left an inner ``bwrap`` alive for good (it ignores SIGTERM; only SIGKILL ends it); waited for with
    ``Popen.wait``, an interrupt could leave its lock held and the grader hung (2 runs in 3)."""
    before = set(_probes_alive())
    script = "from grader.runner import sandbox; print('go', flush=True); sandbox.bwrap_works()"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rng = random.Random(4)
    left: list[int] = []
    try:
        for _ in range(100):
            child = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
            child.stdout.readline()
            time.sleep(rng.uniform(0, 0.01))
            os.killpg(child.pid, signal.SIGINT)
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                pytest.fail("the grader still waited 30 s after a Ctrl-C during the probe")
            finally:
                child.stdout.close()
        time.sleep(0.5)
        left = sorted(set(_probes_alive()) - before)
        assert not left, f"{len(left)} probe(s) outlived the interrupted grader"
    finally:
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.skipif(sandbox.bwrap_works() is None, reason="bubblewrap cannot create namespaces on this machine")
def test_a_probe_whose_grader_is_gone_as_it_starts_ends_on_its_own():
    """The interrupt may also come while ``subprocess.Popen`` is still starting the probe (after its fork, before
    the probe leads its own session): it leaves ``Popen`` with the probe unwaited-for, and the grader exits. The
    probe has no ``--die-with-parent``: nothing kills it halfway, and it ends on its own. A grader that exits within
    5 ms of starting the probe, 60 times: no probe is left."""
    import shutil

    argv = bwrap_probe.probe_argv(shutil.which("bwrap"))
    script = ("import os, subprocess, sys, time; subprocess.Popen({argv!r}, start_new_session=True); "
              "time.sleep(float(sys.argv[1])); os._exit(0)").format(argv=argv)
    rng = random.Random(5)
    before = set(_probes_alive())
    for _ in range(60):
        subprocess.run([sys.executable, "-c", script, str(rng.uniform(0, 0.005))], timeout=30)
    time.sleep(0.5)
    left = sorted(set(_probes_alive()) - before)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"{len(left)} probe(s) outlived the grader that started them"
