"""The README's test command (scripts/test.sh) as a newcomer meets it (issue "the student's terminal"):
on a loaded machine its first line was "note: could not install chromium; browser tests will be
skipped" with apt-get's own output hidden, so nothing said why (an ``apt-get update`` was needed).
What apt-get said is shown now. Run with a stand-in ``apt-get`` on PATH (nothing is installed)."""
from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _apt_install(tmp_path: Path, apt_get: str, package: str = "chromium") -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "apt-get"
    fake.write_text("#!/bin/sh\n" + apt_get, encoding="utf-8")
    fake.chmod(0o755)
    script = f'. scripts/apt_install.sh && apt_install {package} "the browser tests" && echo "status $?"'
    return subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=30,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin"})


def test_a_package_that_cannot_be_installed_is_named_with_what_apt_get_said(tmp_path):
    done = _apt_install(tmp_path, 'echo "apt-get $*" >> "$(dirname "$0")/calls"\n'
                                  'echo "E: Unable to locate package $4"\nexit 100\n')
    lines = done.stdout.splitlines()
    assert lines[0].startswith("note: could not install chromium; the browser tests will be skipped. apt-get said")
    assert "  | E: Unable to locate package chromium" in lines  # apt-get's own reason, shown
    assert lines[-1] == "status 0"  # the tests still run (those that need it are skipped, saying why)
    calls = (tmp_path / "bin" / "calls").read_text(encoding="utf-8").splitlines()
    assert calls == ["apt-get install -y -q chromium", "apt-get update -q"]  # updates once, then gives up


def test_the_package_lists_are_updated_when_the_first_install_fails(tmp_path):
    """The loaded machine's case: the first install fails (stale lists); after an update it works, silently."""
    done = _apt_install(tmp_path, 'echo "$1" >> "$(dirname "$0")/calls"\n'
                                  '[ "$1" = install ] && [ ! -e "$(dirname "$0")/updated" ] && exit 100\n'
                                  '[ "$1" = update ] && touch "$(dirname "$0")/updated"\nexit 0\n')
    assert done.stdout.splitlines() == ["status 0"], done.stdout
    assert (tmp_path / "bin" / "calls").read_text(encoding="utf-8").split() == ["install", "update", "install"]


def test_the_fast_tier_selects_the_tests_not_marked_slow():
    """``bash scripts/test.sh --fast`` is the everyday tier: pytest's ``-m "not slow"``, nothing else changed."""
    text = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert 'fast=(-m "not slow")' in text and '"${fast[@]}" "$@"' in text
