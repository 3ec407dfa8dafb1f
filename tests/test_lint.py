"""The linter is part of the suite (issue "ready for chapter 5": a linter configured and run by the
suite): ruff, with the rules and exclusions of pyproject.toml's [tool.ruff], finds nothing."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from conftest import ROOT


def test_ruff_finds_nothing():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed: the test extra is not installed: pip install -e '.[test]'")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
