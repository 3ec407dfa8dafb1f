"""The warm service (issue 47, "fast on the slower machine too"): a student's next ``grade`` forks its two hosts
from a service of the user's own that keeps JAX imported (:mod:`grader.runner.service`,
:mod:`grader.runner.service_daemon`), instead of importing JAX twice. The first grading of a folder starts its own
hosts and, as it ends, the service.

What must hold, each with a grading as a student runs it (``python -m grader``, real bubblewrap, real processes):
the same verdicts as a grading that starts its own hosts (a correct submission and a wrong one); nothing a grading
started outlives it (its hosts and their jobs), whether it ends, is interrupted with Ctrl-C or is killed; a grading
stopped with Ctrl-C starts no service; a second grading while one is served starts hosts of its own; another folder
takes the service's place; an idle service ends, leaving no folder; ``grade dev service`` shows and stops it. The
conftest turns the service off for every other test (``GRADER_WARM_S=0``).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, SOLUTIONS, sigint_as_at_a_terminal
from grader.runner import sandbox as sandboxes
from grader.runner.service import alive

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sandboxes.bwrap_works() is None,
                                 reason="the service serves gradings whose hosts run in bubblewrap: none works here")]
VARIANTS = Path(__file__).resolve().parent / "variants" / "ch4"


@pytest.fixture
def env(tmp_path):
    """A student's environment with a cache of its own (so a service of its own), the service on."""
    cache = tmp_path / "cache"
    environment = dict(os.environ, GRADER_CACHE_DIR=str(cache), GRADER_WARM_S="60")
    yield environment
    _stop(cache)


def _stop(cache: Path) -> None:
    """End the service of ``cache``'s slot (a test's own), as ``grade dev service --stop`` ends all."""
    for found in _services(cache):
        pid = found["pid"]
        os.kill(pid, signal.SIGTERM)
        _wait(lambda pid=pid: not alive(pid), 15)


def _services(cache: Path) -> list[dict]:
    from grader.runner import service

    code = "import json; from grader.runner import service; print(json.dumps(service.running()))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env=dict(os.environ, GRADER_CACHE_DIR=str(cache)))
    slot = service.slot_of(Path(cache) / service.store.root().name)
    return [s for s in json.loads(done.stdout) if Path(s["socket"]).stem == slot]


def _wait(condition, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def _children(pid: int) -> set[int]:
    """The living processes whose parent is ``pid``."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.add(int(entry))
    return found


def _templates(service_pid: int) -> list[int]:
    """The service's two templates (the student's inside bubblewrap, the reference's its own child)."""
    found = []
    todo = [service_pid]
    while todo:
        for child in _children(todo.pop()):
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"grader.child.template" in argv and not argv.split(b"\0")[0].endswith(b"bwrap"):
                found.append(child)
            else:
                todo.append(child)
    return found


def _hosts_left(service_pid: int) -> set[int]:
    """Hosts (and what they run) still under the service's templates: a grading's, if any is left."""
    return {pid for template in _templates(service_pid) for pid in _children(template)}


def _scratch_of(pid: int) -> list[Path]:
    """The service's scratch folder (its ``owner`` file names it)."""
    return [p.parent for p in Path("/tmp").glob("grade-service-*/owner") if p.read_text().split()[:1] == [str(pid)]]


def _service_up(cache: Path, submission: Path) -> dict:
    """The service a grading of ``submission`` started as it ended (it takes a moment to listen)."""
    found: list[dict] = []

    def up() -> bool:
        found[:] = [s for s in _services(cache) if s["settings"].get("submission") == str(submission)]
        return bool(found) and len(_templates(found[0]["pid"])) == 2

    assert _wait(up, 60), f"no service for {submission}: {_services(cache)}"
    return found[0]


def _grade(env: dict, folder: Path, *args: str, report: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "grader", str(folder), "--lang", "en", "--report-dir", str(report),
                           *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    name = "report.partial.json" if "-k" in args else "report.json"
    return json.loads((report / name).read_text())


def _verdicts(report: dict) -> dict:
    return {e["id"]: (e["score"], [(c["id"], c["status"]) for c in e["checks"]]) for e in report["exercises"]}


def _wrong(tmp_path: Path) -> Path:
    """The solutions with two mistakes: an impure ex01 (it prints) and an ex03 variant."""
    folder = tmp_path / "wrong" / "ch4"
    shutil.copytree(SOLUTIONS, folder)
    shutil.copy(VARIANTS / "ex01_jit_forms" / "impure_print.py", folder / "ex01_jit_forms.py")
    wrong_ex03 = sorted(p for p in (VARIANTS / "ex03_static_args").glob("*.py") if not p.name.startswith("alt"))[0]
    shutil.copy(wrong_ex03, folder / "ex03_static_args.py")
    return folder


def test_gradings_fork_their_hosts_from_one_service_and_are_judged_alike(env, tmp_path):
    cache = Path(env["GRADER_CACHE_DIR"])
    picked = ("-k", "ex01", "-k", "ex03", "-k", "ex07", "--seed", "11")
    first = _grade(env, SOLUTIONS, *picked, report=tmp_path / "r1")
    assert "hosts_from" not in first["timings"]  # its own hosts; the service starts as it ends
    service = _service_up(cache, SOLUTIONS)
    second = _grade(env, SOLUTIONS, *picked, report=tmp_path / "r2")
    third = _grade(env, SOLUTIONS, *picked, report=tmp_path / "r3")
    assert second["timings"].get("hosts_from") == third["timings"].get("hosts_from") == "warm service"
    assert [s["pid"] for s in _services(cache)] == [service["pid"]]  # the same one
    assert not _hosts_left(service["pid"]), "a host outlived its grading"
    assert _verdicts(first) == _verdicts(second) == _verdicts(third) and first["score"] == first["max_score"]
    [scratch] = _scratch_of(service["pid"])
    assert not list((scratch / "stage").iterdir()), "a grading's folder was left in the stage"
    # a wrong submission (another folder: a service of its own in the first one's place) judged alike
    wrong = _wrong(tmp_path)
    alone = _grade(env, wrong, *picked, report=tmp_path / "r4")
    replaced = _service_up(cache, wrong)
    assert _wait(lambda: not alive(service["pid"]), 10), "the service replaced did not end"
    served = _grade(env, wrong, *picked, report=tmp_path / "r5")
    assert served["timings"].get("hosts_from") == "warm service" and "hosts_from" not in alone["timings"]
    assert _verdicts(served) == _verdicts(alone)
    assert served["score"] < served["max_score"]
    assert not _hosts_left(replaced["pid"])


def test_a_grading_interrupted_or_killed_leaves_nothing_of_its_own(env, tmp_path):
    cache = Path(env["GRADER_CACHE_DIR"])
    folder = tmp_path / "slow" / "ch4"
    shutil.copytree(SOLUTIONS, folder)
    slow = folder / "ex08_aot_debug.py"  # every moment below is inside the grading
    slow.write_text("import time\ntime.sleep(12)\n" + slow.read_text(encoding="utf-8"), encoding="utf-8")

    def interrupted(how: signal.Signals, service: dict | None) -> None:
        process = subprocess.Popen([sys.executable, "-m", "grader", str(folder), "--lang", "en"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env, text=True,
                                   preexec_fn=lambda: (sigint_as_at_a_terminal(), os.setpgrp()))
        if service is not None:
            assert _wait(lambda: _hosts_left(service["pid"]), 30), "the grading forked no host from the service"
        time.sleep(1.5)
        os.killpg(process.pid, how)
        _out, err = process.communicate(timeout=15)
        assert process.returncode == (130 if how == signal.SIGINT else -signal.SIGKILL), err[-2000:]

    interrupted(signal.SIGINT, None)  # stopped with Ctrl-C: no service started as it ends
    time.sleep(1.0)
    assert not _services(cache)
    _grade(env, folder, "-k", "ex02", report=tmp_path / "r0")  # this one starts it
    service = _service_up(cache, folder)
    for how in (signal.SIGINT, signal.SIGKILL):
        interrupted(how, service)
        assert _wait(lambda: not _hosts_left(service["pid"]), 10), f"after {how.name}: a host or job left"
        assert alive(service["pid"]) and len(_templates(service["pid"])) == 2
    after = _grade(env, folder, "-k", "ex02", report=tmp_path / "r1")
    assert after["timings"].get("hosts_from") == "warm service" and after["score"] == after["max_score"]


def test_a_second_grading_at_once_starts_its_own_hosts_and_another_folder_takes_the_service(env, tmp_path):
    cache = Path(env["GRADER_CACHE_DIR"])
    folder = tmp_path / "slow" / "ch4"
    shutil.copytree(SOLUTIONS, folder)
    slow = folder / "ex02_where.py"
    slow.write_text("import time\ntime.sleep(6)\n" + slow.read_text(encoding="utf-8"), encoding="utf-8")
    _grade(env, folder, "-k", "ex01", report=tmp_path / "r0")
    service = _service_up(cache, folder)
    holding = subprocess.Popen([sys.executable, "-m", "grader", str(folder), "-k", "ex02", "--report-dir",
                                str(tmp_path / "r1")], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    assert _wait(lambda: _hosts_left(service["pid"]), 30)
    beside = _grade(env, folder, "-k", "ex01", report=tmp_path / "r2")
    assert "hosts_from" not in beside["timings"] and beside["score"] == beside["max_score"]
    assert holding.wait(timeout=120) == 0
    assert json.loads((tmp_path / "r1" / "report.partial.json").read_text())["timings"]["hosts_from"] == "warm service"
    assert [s["pid"] for s in _services(cache)] == [service["pid"]]  # the grading beside it started none
    other = _grade(env, SOLUTIONS, "-k", "ex01", report=tmp_path / "r3")  # another folder: its own hosts...
    assert "hosts_from" not in other["timings"]
    _service_up(cache, SOLUTIONS)  # ... and a service of its own as it ends, in the first one's place
    assert _wait(lambda: not alive(service["pid"]), 10), "the service replaced did not end"
    assert _grade(env, SOLUTIONS, "-k", "ex01", report=tmp_path / "r4")["timings"].get("hosts_from") == "warm service"


def test_an_idle_service_ends_and_leaves_no_folder(env, tmp_path):
    env = {**env, "GRADER_WARM_S": "2"}
    _grade(env, SOLUTIONS, "-k", "ex01", report=tmp_path / "r0")
    service = _service_up(Path(env["GRADER_CACHE_DIR"]), SOLUTIONS)
    templates = _templates(service["pid"])
    scratch = _scratch_of(service["pid"])
    assert len(templates) == 2 and len(scratch) == 1
    assert _wait(lambda: not alive(service["pid"]) and not any(map(alive, templates)), 20)
    assert not scratch[0].exists() and not Path(service["socket"]).exists()


def test_grade_dev_service_shows_and_stops_it_in_both_languages(env, tmp_path):
    _grade(env, SOLUTIONS, "-k", "ex01", report=tmp_path / "r0")
    service = _service_up(Path(env["GRADER_CACHE_DIR"]), SOLUTIONS)

    def dev(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "grader", "dev", "service", *args], capture_output=True,
                              text=True, cwd=ROOT, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert f"pid {service['pid']}" in dev("--lang", "en") and str(SOLUTIONS) in dev("--lang", "en")
    assert "预热服务" in dev("--lang", "zh")
    assert "Stopped" in dev("--stop", "--lang", "en")
    assert not alive(service["pid"]) and not _services(Path(env["GRADER_CACHE_DIR"]))
    assert "No warm service" in dev("--lang", "en") or str(SOLUTIONS) not in dev("--lang", "en")
