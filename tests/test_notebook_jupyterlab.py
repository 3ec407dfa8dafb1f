"""The chapter's notebook in JupyterLab, as a student uses it, read in a real browser.

The test starts a JupyterLab server of its own (localhost only, a token of its own, its
settings, runtime and data folders in a temporary folder), opens a copy of
``exercises/ch4.ipynb`` in Debian's Chromium driven by Playwright (``executable_path``; no
browser is downloaded), and works as a student: runs the setup cell, types the answers of
ex02 into its three cells and runs them (JupyterLab sends each cell's id with its run, as
students' front ends do), runs the last cell, ``check()``, and reads what the page shows
under it. Then it changes ``piecewise`` to a wrong formula, runs that cell again and runs
ex02's own check cell.

What the student must read:

* the exercises whose cells were never run are "not attempted", each said once, with
  nothing else: no "is not defined", no hint, no numbers, no "still raises
  NotImplementedError", no process that ended, nothing "printed";
* the replay of the hidden inputs is offered as ``check(..., seed=N)``, not ``--seed``;
* a wrong value names the cell it came from (``piecewise from cell In [N]``, N as
  JupyterLab shows it), and the run of that cell it replaced is said to be dropped.

About a minute. Skipped, saying why, when Playwright, JupyterLab or Chromium is missing.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from conftest import FULL

pytestmark = pytest.mark.slow
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (the test extra: "
                               "pip install -e '.[test]'); the browser itself is Debian's chromium")
pytest.importorskip("jupyterlab", reason="JupyterLab is not installed (the test extra: pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: Chromium run as root, with no screen, no GPU and no network of its own
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]
#: JupyterLab's settings for the test: every cell in the page (no windowing), no news, no update check
SETTINGS = {"@jupyterlab/notebook-extension/tracker.jupyterlab-settings": '{"windowingMode": "none"}',
            "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
                '{"fetchNews": "false", "checkForUpdates": false}'}
WRONG_PIECEWISE = "@jax.jit\ndef piecewise(x):\n    return jnp.where(x > 0, x * x, x)\n"
UNTOUCHED_WORDS = ("is not defined", "Hint", "Measured", "NotImplementedError", "process ended", "printed")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on localhost serving a folder with a copy of the chapter's notebook."""
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine: apt-get install chromium (scripts/test.sh does, as root)")
    base = tmp_path_factory.mktemp("lab")
    work = base / "work"
    work.mkdir()
    shutil.copy(ROOT / "exercises" / "ch4.ipynb", work / "ch4.ipynb")
    for name, text in SETTINGS.items():
        (base / "settings" / name).parent.mkdir(parents=True, exist_ok=True)
        (base / "settings" / name).write_text(text, encoding="utf-8")
    port, token = _free_port(), "grader-test-token"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(base / "config"), JUPYTER_RUNTIME_DIR=str(base / "runtime"),
               JUPYTER_DATA_DIR=str(base / "data"), JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"))
    log = (base / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, \
                    (base / "server.log").read_text(errors="replace")[-3000:]
                time.sleep(0.5)
        yield {"url": f"{url}/lab/tree/ch4.ipynb?token={token}", "work": work}
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


class Notebook:
    """The notebook open in the page, cell by cell (in the order of ``exercises/ch4.ipynb``)."""

    def __init__(self, page, ids: list[str]):
        self.page, self.ids = page, ids

    def cell(self, cell_id: str):
        return self.page.locator(".jp-Notebook .jp-Cell").nth(self.ids.index(cell_id))

    def prompt(self, cell_id: str) -> str:
        return self.cell(cell_id).locator(".jp-InputPrompt").inner_text().strip()

    def type(self, cell_id: str, code: str) -> None:
        """Replace the cell's code as a student does: click into it, select all, type."""
        self.cell(cell_id).locator(".cm-content").click()
        self.page.keyboard.press("Control+a")
        self.page.keyboard.insert_text(code)
        self.page.keyboard.press("Escape")

    def run(self, cell_id: str, timeout_s: float = 300) -> int:
        """Run the cell with Shift+Enter; its execution count once it has run."""
        before = self.prompt(cell_id)
        self.cell(cell_id).locator(".jp-InputPrompt").click()
        self.page.keyboard.press("Shift+Enter")
        deadline = time.monotonic() + timeout_s
        while True:
            shown = self.prompt(cell_id)
            if re.fullmatch(r"\[\d+\]:", shown) and shown != before:
                return int(shown[1:-2])
            assert time.monotonic() < deadline, f"{cell_id} still shows {shown}"
            time.sleep(0.2)

    def output(self, cell_id: str) -> str:
        return " ".join(self.cell(cell_id).locator(".jp-OutputArea").inner_text().split())


@pytest.fixture(scope="module")
def student(lab, tmp_path_factory):
    """What the page shows after the student's session (see the module's docstring)."""
    from grader.authoring.notebook import build
    from grader.chapter import load_chapter

    ids = [cell.id for cell in nbformat.read(str(lab["work"] / "ch4.ipynb"), as_version=4).cells]
    answers = {cell.id: cell.source for cell in build(load_chapter("ch4"), solved=True).cells}
    shown: dict = {}
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(lab["url"])
            page.wait_for_function(f"document.querySelectorAll('.jp-Notebook .jp-Cell').length == {len(ids)}",
                                   timeout=120_000)
            page.wait_for_function("document.body.innerText.includes('| Idle')", timeout=120_000)
            notebook = Notebook(page, ids)
            notebook.run("ch4-setup")
            notebook.run("ex02-imports")
            for name in ("piecewise", "normalize_if_positive", "clip_by_norm"):
                notebook.type(f"ex02-{name}", answers[f"ex02-{name}"])
                shown[f"{name}_run"] = notebook.run(f"ex02-{name}")
            notebook.run("ch4-check")
            shown["everything"] = notebook.output("ch4-check")
            shown["aligned"] = notebook.cell("ch4-check").locator(".jp-OutputArea td").evaluate_all(
                "cells => cells.map(c => getComputedStyle(c).textAlign)")
            shots = tmp_path_factory.mktemp("shots")
            notebook.cell("ch4-check").screenshot(path=str(shots / "check.png"))
            notebook.type("ex02-piecewise", WRONG_PIECEWISE)
            shown["wrong_run"] = notebook.run("ex02-piecewise")
            notebook.run("ex02-check")
            shown["ex02"] = notebook.output("ex02-check")
            shown["ex02_aligned"] = notebook.cell("ex02-check").locator(".jp-OutputArea td").evaluate_all(
                "cells => cells.map(c => (c.className === 'num' ? 'num:' : '') + getComputedStyle(c).textAlign)")
            notebook.cell("ex02-check").screenshot(path=str(shots / "check-ex02.png"))
        finally:
            browser.close()
    return shown


def test_exercises_never_run_are_not_attempted_said_once_and_nothing_else(student):
    text = student["everything"]
    assert f"Chapter 4: JIT basics: 10 / {FULL:g}" in text
    assert re.search(r"ex02_where 10 / 10 passed", text), text
    for ex in ("ex01_jit_forms", "ex03_static_args", "ex04_cache_keys", "ex05_timing", "ex06_speedup",
               "ex07_pitfalls", "ex08_aot_debug"):
        assert len(re.findall(rf"{ex} 0 / 10 not attempted", text)) == 1, (ex, text)
    for words in UNTOUCHED_WORDS:
        assert words not in text, (words, text)


def test_the_replay_is_offered_as_check_with_a_seed_not_a_flag(student):
    text = student["everything"]
    assert re.search(r"check\(\.\.\., seed=\d+\)", text), text
    assert "--seed" not in text


def test_a_wrong_value_names_its_cell_and_the_dropped_run_of_that_cell(student):
    text = student["ex02"]
    first, wrong = student["piecewise_run"], student["wrong_run"]
    assert "piecewise.values" in text and "failed" in text
    assert f"piecewise from cell In [{wrong}]" in text, text
    assert (f"piecewise from cell In [{first}] is dropped: the same cell ran again as cell In [{wrong}], and its "
            f"last run is the one graded") in text, text
    assert "ex02_where.py" not in text


def test_what_was_seen_reads_from_the_left_and_the_points_from_the_right(student):
    """JupyterLab right-aligns the cells of an output's tables; the check table's text reads from
    the left, its points from the right (grader/report/inline.py's style, scoped)."""
    aligned = student["ex02_aligned"]
    assert aligned and set(aligned) == {"left", "num:right"}, aligned
