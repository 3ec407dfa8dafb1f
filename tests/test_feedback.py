"""Feedback a student can trust, from the student's side: what `grade` printed and what the
report holds is true to their run.

* what their code printed is kept (at import, inside functions, without a newline or a
  flush, before a crash or ``os._exit``), in every sandbox;
* an exception that is not the mistake a check looks for is reported as what it is (its
  message, file and line) with a hint about it, not about another mistake;
* the numbers under "Measured" cover every case the sentence talks about, and indexes
  read as the student writes them;
* a hang says where it was; Ctrl-C stops everything in a second or two and keeps what
  was graded.
"""
from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SOLUTIONS, make_submission, sigint_as_at_a_terminal

from grader.cli import main
from grader.runner.sandbox import bwrap_works

pytestmark = pytest.mark.slow

SANDBOXES = ["process"] + (["bwrap"] if bwrap_works() else [])

PRINTS_THEN_RAISES = 'print("hello at import, no flush")\nprint("partial line", end="")\nraise RuntimeError("boom")\n'
PRINTS_THEN_OS_EXIT = (SOLUTIONS / "ex03_static_args.py").read_text(encoding="utf-8").replace(
    "    return coeff * x ** 2 + 1.0", '    print("inside poly, about to leave")\n    import os\n    os._exit(3)')
PRINTS_IN_FAILING_FUNCTION = (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8").replace(
    "    return jnp.where(x > 0, x * x, 0.5 * x)", '    print("tracing piecewise")\n    return x')
NAME_ERROR = (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8").replace(
    "    return jnp.where(x > 0, x * x, 0.5 * x)", "    return jnp.where(x > 0, x * x, 0.5 * y)")
GREATER_EQUAL = (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8").replace(
    "    positive = total > 0", "    positive = total >= 0").replace(
    "    safe_total = jnp.where(positive, total, 1.0)\n    return jnp.where(positive, x / safe_total, x)",
    "    return jnp.where(positive, x / total, x)")


def _grade(folder: Path, out: Path, *args: str) -> dict:
    assert main([str(folder), "--report-dir", str(out), "--lang", "en", "--seed", "11", *args]) == 0
    return json.loads((out / "report.partial.json").read_text(encoding="utf-8"))


# ------------------------------------------------------------------ 1. output kept
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_everything_printed_is_kept_and_shown(sandbox, tmp_path, capsys):
    folder = make_submission(tmp_path, {"ex01_jit_forms": PRINTS_THEN_RAISES, "ex03_static_args": PRINTS_THEN_OS_EXIT,
                                        "ex02_where": PRINTS_IN_FAILING_FUNCTION})
    report = _grade(folder, tmp_path / "out", "-k", "1", "-k", "2", "-k", "3", "--sandbox", sandbox,
                    "--allow-weak-sandbox")
    shown = capsys.readouterr().out
    outputs = {e["id"]: e["output"] for e in report["exercises"]}
    assert "hello at import, no flush" in outputs["ex01_jit_forms"]
    assert "partial line" in outputs["ex01_jit_forms"]
    assert "inside poly, about to leave" in outputs["ex03_static_args"]
    assert "tracing piecewise" in outputs["ex02_where"]  # printed inside a function graded as failed
    for line in ("hello at import, no flush", "inside poly, about to leave", "tracing piecewise"):
        assert line in shown, f"the terminal does not show {line!r}:\n{shown}"


# ------------------------------------------------------------------ 2. hints about the mistake seen
@pytest.fixture(scope="module")
def ex02_reports(tmp_path_factory):
    reports = {}
    for name, source in (("name_error", NAME_ERROR), ("greater_equal", GREATER_EQUAL)):
        folder = make_submission(tmp_path_factory.mktemp(name), {"ex02_where": source})
        out = tmp_path_factory.mktemp(f"{name}-report")
        assert main([str(folder), "--report-dir", str(out), "--lang", "en", "--seed", "5", "-k", "2"]) == 0
        reports[name] = json.loads((out / "report.partial.json").read_text(encoding="utf-8"))["exercises"][0]
    return reports


def test_an_unrelated_exception_is_reported_as_itself(ex02_reports):
    checks = {c["id"]: c for c in ex02_reports["name_error"]["checks"]}
    traceable = checks["piecewise.traceable"]
    assert traceable["status"] == "failed"
    assert "NameError" in traceable["message"] and "name 'y' is not defined" in traceable["message"]
    assert re.search(r"ex02_where\.py:\d+", traceable["message"])
    assert "has no Python if" not in traceable["message"]
    assert "jnp.where" not in traceable["hint"] and "Python if" not in traceable["hint"]
    assert "NameError" in traceable["hint"] and re.search(r"ex02_where\.py:\d+", traceable["hint"])


def test_the_hint_names_the_mistake_made(ex02_reports):
    check = next(c for c in ex02_reports["greater_equal"]["checks"] if c["id"] == "normalize_if_positive.values")
    assert check["status"] == "failed"
    assert "strictly" in check["hint"] and "0" in check["hint"]
    assert "not chosen" not in check["hint"]  # the false claim: a NaN in the branch not taken leaks


def test_an_unrunnable_exercise_shows_no_check_hints(tmp_path):
    folder = make_submission(tmp_path, {"ex01_jit_forms": "raise RuntimeError('at import')\n"})
    report = _grade(folder, tmp_path / "out", "-k", "1")
    ex = report["exercises"][0]
    assert ex["status"] == "error" and "RuntimeError" in ex["error"]
    assert all(not c["hint"] for c in ex["checks"]), [c["hint"] for c in ex["checks"]]


# ------------------------------------------------------------------ 3. measured agrees with seen
SOFTMAX_TIMES_TWO = (SOLUTIONS / "ex01_jit_forms.py").read_text(encoding="utf-8").replace(
    "    return e / jnp.sum(e, axis=-1, keepdims=True)", "    return 2 * e / jnp.sum(e, axis=-1, keepdims=True)")
PIECEWISE_SWAPPED = (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8").replace(
    "jnp.where(x > 0, x * x, 0.5 * x)", "jnp.where(x > 0, 0.5 * x, x * x)")


def test_measured_covers_every_case_and_indexes_read_naturally(tmp_path):
    folder = make_submission(tmp_path, {"ex01_jit_forms": SOFTMAX_TIMES_TWO, "ex02_where": PIECEWISE_SWAPPED})
    report = _grade(folder, tmp_path / "out", "-k", "1", "-k", "2")
    checks = {c["id"]: c for e in report["exercises"] for c in e["checks"]}
    softmax = checks["softmax.values"]
    seen = [float(v) for v in re.findall(r"max abs error ([0-9.e+-]+)", softmax["message"])]
    assert seen and softmax["measured"]["max_abs_err"] >= max(seen) * 0.999
    # six cases (1-D to 3-D, large of both signs) for softmax_raw and softmax each
    assert softmax["measured"]["cases"] == 12 and softmax["measured"]["failed_cases"] == 12
    assert re.search(r"at \[\d+, \d+\] got", softmax["message"])  # [0, 3], as the student indexes
    assert "; 0 got" not in softmax["message"] and "at index" not in softmax["message"]
    piecewise = checks["piecewise.values"]
    scalar = next(part for part in piecewise["message"].split("; piecewise") if "[scalar]" in part)
    assert "got" in scalar and " at " not in scalar and "index" not in scalar


# ------------------------------------------------------------------ 5. waiting, hangs and Ctrl-C
IMPORT_HANGS = "import time\nx = 0\nwhile True:\n    x += 1\n"
CALL_HANGS = (SOLUTIONS / "ex03_static_args.py").read_text(encoding="utf-8").replace(
    "    return coeff * x ** 2 + 1.0", "    while True:\n        pass")


def _on_a_terminal(argv: list[str], *, interrupt_when: str | None = None, env: dict | None = None,
                   limit_s: float = 120) -> tuple[int, str, float | None]:
    """Run ``argv`` on a pseudo-terminal; send Ctrl-C (SIGINT) once ``interrupt_when`` appears."""
    import pty

    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # 160 columns
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                            preexec_fn=sigint_as_at_a_terminal)
    os.close(slave)
    text, sent_at, end = b"", None, time.monotonic() + limit_s
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    chunk = b""
                text += chunk
                if not chunk and proc.poll() is not None:
                    break
            elif proc.poll() is not None:
                break
            if interrupt_when and sent_at is None and interrupt_when.encode() in text:
                proc.send_signal(signal.SIGINT)
                sent_at = time.monotonic()
        code = proc.wait(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return code, text.decode("utf-8", errors="replace"), (time.monotonic() - sent_at) if sent_at else None


def _grade_argv(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from grader.cli import main; sys.exit(main())", *args]


def _leftovers(marker: str) -> list[str]:
    """Processes whose working directory lies under ``marker`` (the grading run's scratch)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd").startswith(marker):
                found.append(pid)
        except OSError:
            continue
    return found


def test_a_hang_says_where_it_was_and_the_terminal_shows_what_is_graded(tmp_path):
    folder = make_submission(tmp_path, {"ex01_jit_forms": IMPORT_HANGS, "ex03_static_args": CALL_HANGS})
    code, shown, _ = _on_a_terminal(_grade_argv(str(folder), "-k", "1", "-k", "3", "--exercise-timeout", "6",
                                                "--lang", "en", "--seed", "3", "--report-dir", str(tmp_path / "out")),
                                    env={**os.environ, "COLUMNS": "90"})
    assert code == 0, shown
    assert "importing ex01_jit_forms.py" in shown  # the live line, while it waits
    assert "calling poly" in shown
    report = json.loads((tmp_path / "out" / "report.partial.json").read_text(encoding="utf-8"))
    errors = {e["id"]: e["error"] for e in report["exercises"]}
    assert "importing ex01_jit_forms.py did not finish" in errors["ex01_jit_forms"]
    assert "stuck at ex01_jit_forms.py:3" in errors["ex01_jit_forms"] or \
        "stuck at ex01_jit_forms.py:4" in errors["ex01_jit_forms"]
    assert "poly did not return" in errors["ex03_static_args"]
    assert re.search(r"stuck at ex03_static_args\.py:\d+", errors["ex03_static_args"])
    # what ran past its limit is said once; the checks it cut short are counted, not each given a hint
    assert "more check(s) have no result" in shown
    hang_import = next(e for e in report["exercises"] if e["id"] == "ex01_jit_forms")
    assert hang_import["status"] == "timeout" and all(not c["hint"] for c in hang_import["checks"])


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_ctrl_c_stops_everything_at_once_and_keeps_what_was_graded(sandbox, tmp_path):
    folder = make_submission(tmp_path, {"ex03_static_args": CALL_HANGS})
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    os.chmod(scratch, 0o755)
    # the hanging ex03 starts first (the longest in recent gradings, grader.scheduling): ex01's result
    # must not wait for it
    env = {**os.environ, "TMPDIR": str(scratch), "GRADER_CACHE_DIR": str(tmp_path / "cache")}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GRADER_CACHE_DIR", env["GRADER_CACHE_DIR"])
        from grader import store

        store.keep_durations("ch4", {"ex03_static_args": 99.0, "ex01_jit_forms": 0.1})
    code, shown, after = _on_a_terminal(
        _grade_argv(str(folder), "-k", "1", "-k", "3", "--lang", "en", "--seed", "3", "--sandbox", sandbox,
                    "--allow-weak-sandbox", "--report-dir", str(tmp_path / "out")), interrupt_when="1/2 done", env=env)
    assert code == 130, shown
    assert after is not None and after < 3.0, f"Ctrl-C took {after} s"
    assert "interrupted" in shown and "Traceback" not in shown
    time.sleep(0.5)
    assert not _leftovers(str(scratch)), "processes outlived the run"
    report = json.loads(next((tmp_path / "out").glob("report*.json")).read_text(encoding="utf-8"))
    assert report["interrupted"] is True
    assert [e["id"] for e in report["exercises"]] == ["ex01_jit_forms"]  # graded before Ctrl-C, kept
    assert report["exercises"][0]["status"] == "passed"
