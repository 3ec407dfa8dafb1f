"""The signing key under every sandbox (issue 27): a student's code never reads it.

Before issue 27 the docs' recipe made the key with mode 0644, the grader never looked at the
mode, and under the process sandbox a student's code read the key, signed a full-marks report
of its own, and ``grade verify`` accepted it. Here a student's ex01 tries exactly that: at import
it opens the key's path and raises what it found (``READ:<the key>`` or ``DENIED:<why>``), which
the report then shows as the exercise's error.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import SOLUTIONS

from grader.cli import main
from grader.runner import sandbox as sandboxes

KEY = b"k3y-" + b"0123456789abcdef" * 2
PROBE = '''
try:
    with open({key!r}, "rb") as _handle:
        _found = "READ:" + _handle.read().strip().hex()
except OSError as _error:
    _found = "DENIED:" + type(_error).__name__
raise RuntimeError(_found)
'''


@pytest.fixture(autouse=True)
def english(monkeypatch):
    for var in ("LC_ALL", "LC_MESSAGES", "LANGUAGE", "GRADE_SIGN_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "en_US.UTF-8")


@pytest.fixture
def place():
    """A folder every uid may enter (as a home folder often is): only the key's own mode guards it."""
    folder = Path(tempfile.mkdtemp(prefix="grade-key-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _key(folder: Path, mode: int) -> Path:
    path = folder / f"grading-{mode:o}.key"
    path.write_bytes(KEY)
    path.chmod(mode)
    return path


def _submission(folder: Path, key: Path) -> Path:
    """The reference's ex01, its module trying to read the key first."""
    sub = folder / "ch4"
    sub.mkdir()
    shutil.copy(SOLUTIONS / "ex01_jit_forms.py", sub)
    source = (SOLUTIONS / "ex01_jit_forms.py").read_text(encoding="utf-8")
    (sub / "ex01_jit_forms.py").write_text(PROBE.format(key=str(key)) + source, encoding="utf-8")
    return sub


def _found(sub: Path) -> str:
    report = json.loads((sub / ".grade" / "report.partial.json").read_text(encoding="utf-8"))
    ex01, = report["exercises"]
    return json.dumps(ex01, ensure_ascii=False)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_key_others_may_read_is_refused_in_one_line(place, capsys, mode):
    key = _key(place, mode)
    sub = _submission(place, key)
    assert main([str(sub), "-k", "1", "--sign-key", str(key)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"chmod 600 {key}" in err and f"mode {mode:04o}" in err
    assert not (sub / ".grade").exists()  # nothing of the student's ran
    assert main(["verify", str(sub), "--key", str(key)]) == 2
    assert main(["batch", str(place), "--chapter", "ch4", "--out", str(place / "out"), "--sign-key", str(key),
                 "--allow-weak-sandbox"]) == 2
    assert "chmod 600" in capsys.readouterr().err and not (place / "out").exists()


@pytest.mark.slow
def test_under_the_process_sandbox_a_students_code_never_reads_the_key(place, capsys):
    """Where the process sandbox runs each job under a uid of its own (the grader runs as root and the
    Python installation is readable by every uid), the private key is out of the job's reach; where the
    job runs under the grader's own uid (not root, or here: Python under /root), it could read any file
    the grader can, so the grader refuses to sign there."""
    key = _key(place, 0o600)
    sub = _submission(place, key)
    plan = sandboxes.plan("process")
    code = main([str(sub), "-k", "1", "--sandbox", "process", "--allow-weak-sandbox", "--sign-key", str(key),
                 "--seed", "3"])
    err = capsys.readouterr().err
    if plan.uid_isolation:
        assert code == 0 and "DENIED:PermissionError" in _found(sub)
        assert main(["verify", str(sub / ".grade" / "report.partial.json"), "--key", str(key)]) == 0
    else:
        assert code == 2 and "not signing with" in err and "runs as you" in err
        assert not (sub / ".grade").exists()  # the student's code never ran
    assert KEY.hex() not in "".join(str(p.read_bytes().hex()) for p in sub.rglob("*") if p.is_file())


@pytest.mark.slow
@pytest.mark.skipif(sandboxes.bwrap_works() is None, reason="bubblewrap cannot create namespaces on this machine")
def test_under_bubblewrap_a_students_code_never_reads_the_key(place, capsys):
    key = _key(place, 0o600)
    sub = _submission(place, key)
    assert main([str(sub), "-k", "1", "--sandbox", "bwrap", "--sign-key", str(key), "--seed", "3"]) == 0
    found = _found(sub)
    assert "DENIED:" in found and KEY.hex() not in found
    assert main(["verify", str(sub / ".grade" / "report.partial.json"), "--key", str(key)]) == 0


def test_which_sandbox_shows_a_key_to_a_students_code(place, tmp_path):
    """``exposed_to_jobs``: under per-job uids only what others may read; under the grader's own uid,
    every file for the process sandbox, and for bubblewrap the folders its view binds."""
    private, shared = _key(place, 0o600), _key(place, 0o644)
    uids = sandboxes.SandboxPlan("process", True)
    assert not sandboxes.exposed_to_jobs(uids, private) and sandboxes.exposed_to_jobs(uids, shared)
    assert not sandboxes.exposed_to_jobs(sandboxes.SandboxPlan("bwrap", True), private)
    assert sandboxes.exposed_to_jobs(sandboxes.SandboxPlan("process", False), private)
    bwrap = sandboxes.SandboxPlan("bwrap", False)
    assert not sandboxes.exposed_to_jobs(bwrap, private)
    inside = Path(sandboxes.python_roots()[0])
    assert sandboxes.exposed_to_jobs(bwrap, inside / "some.key")
    os.symlink(inside / "some.key", tmp_path / "link.key")  # where it really lies counts
    assert sandboxes.exposed_to_jobs(bwrap, tmp_path / "link.key")
