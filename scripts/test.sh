#!/usr/bin/env bash
# Install what the tests need into .venv and run them (the README's test command).
#
# bubblewrap gives the grader its strongest sandbox; the tests of the sandbox need it.
# As root on Debian/Ubuntu it is installed here; elsewhere install it yourself
# (sudo apt-get install bubblewrap) or those tests are skipped, saying why.
set -euo pipefail
cd "$(dirname "$0")/.."

# --fast: the everyday tier, the tests not marked slow (the grader's units, structure, messages,
# reports, single exercises in child processes; no whole chapter, batch, kernel or browser): 1886
# tests in about four minutes on 2 cores. The whole suite is the default, and what CI runs.
fast=()
if [ "${1:-}" = "--fast" ]; then
  shift
  fast=(-m "not slow")
fi

. scripts/apt_install.sh  # apt_install, can_apt

# bubblewrap gives the grader its strongest sandbox; the tests of the sandbox need it.
# As root on Debian/Ubuntu it is installed here; elsewhere install it yourself
# (sudo apt-get install bubblewrap) or those tests are skipped, saying why.
if ! command -v bwrap >/dev/null 2>&1 && can_apt; then
  apt_install bubblewrap "the sandbox tests"
fi
# A real headless browser for the tests of HTML pages (Debian's chromium); those tests
# are skipped, saying why, where none can be installed.
if ! command -v chromium >/dev/null 2>&1 && can_apt; then
  apt_install chromium "the browser tests"
fi
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# The grader's own dependencies at the versions grader/authoring/gradescope-lock.txt pins (the Gradescope
# bundle installs exactly those, and refuses to build with another JAX): the tests run what ships.
constraints=$(mktemp)
sed -n 's/^\([A-Za-z0-9_.-]*==[^ ]*\) --hash=.*/\1/p' grader/authoring/gradescope-lock.txt | grep -v '^uv==' > "$constraints"
.venv/bin/python -m pip install -q -e '.[test]' -c "$constraints"
rm -f "$constraints"
# In turn, not on pytest-xdist's workers: two workers took 22 to 23 minutes against 29.5 (2026-12-07), but the
# other worker's tests load the machine, and each of three such runs failed 3 or 4 tests the run before had passed
# (grading-truth tests among them: ex05's mean taken for the median, the class's compiler not serving in time).
exec .venv/bin/python -m pytest -q "${fast[@]}" "$@"
