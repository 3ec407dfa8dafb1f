"""The type checker is part of the suite (issue "ready for chapter 5": what crosses the wire typed per
word, checked by a type checker on the core layers): mypy, on the modules pyproject.toml's [tool.mypy]
names (the foundations, words, results' vocabulary and instruments), finds nothing."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib

import pytest

from conftest import ROOT


def _mypy(*args: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed: the test extra is not installed: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_mypy_finds_nothing_in_the_core_layers():
    files = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]["files"]
    assert "grader/protocol.py" in files and "grader/primitives" in files
    done = _mypy()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_sees_a_field_a_word_does_not_carry(tmp_path):
    """The checker reads the TypedDicts of grader/protocol.py: a call record whose status is a number fails."""
    wrong = tmp_path / "wrong.py"
    wrong.write_text("from grader.protocol import CallRecord\n\nrecord: CallRecord = {'status': 1, 'function': 'f'}\n",
                     encoding="utf-8")
    done = _mypy("--config-file", str(ROOT / "pyproject.toml"), str(wrong))
    assert done.returncode == 1 and "TypedDict item \"status\" has type \"str\"" in done.stdout, done.stdout
