"""report.html from the student's side: written beside report.md, self-contained, and what
a real browser shows of it: the exercises, the checks, the hints, and the student's
compile counts and speed-ups beside the reference's."""
from __future__ import annotations

import re
import stat

import pytest

from browser import needs_browser, render
from conftest import VARIANTS, make_submission

from grader.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = make_submission(tmp_path_factory.mktemp("sub"),
                             {"ex03_static_args": VARIANTS / "ex03_static_args" / "alpha_static.py"})
    out = tmp_path_factory.mktemp("out")
    assert main([str(folder), "-k", "3", "-k", "6", "--seed", "8", "--lang", "en", "--report-dir", str(out)]) == 0
    return out / "report.partial.html"


def test_the_page_is_written_and_self_contained(graded):
    text = graded.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<script" not in text
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", text)
    assert text.count("<title>compiles counted") == 2  # ex03's and ex06's compile counts, charted
    assert text.count("<title>speed-up over the eager code") == 1  # ex06's speed-ups


@needs_browser
def test_chromium_shows_checks_hints_and_charts(graded, tmp_path):
    shown = render(graded, tmp_path / "report.png")
    assert "Partial run: 2 of 8 exercises" in shown
    assert "ex03_static_args" in shown and "ex06_speedup" in shown
    assert "activate.compiles" in shown and "compiled again: argument alpha changed" in shown
    assert "Hint: Only mode is static" in shown
    assert "yours" in shown and "reference" in shown
    assert re.search(r"\d+(\.\d+)?×", shown)  # speed-ups drawn with their numbers
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_open_hands_the_page_to_the_browser(tmp_path, monkeypatch, graded):
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n", encoding="utf-8")
    browser.chmod(browser.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("BROWSER", str(browser))
    import webbrowser

    monkeypatch.setattr(webbrowser, "_tryorder", None)  # read BROWSER afresh
    folder = make_submission(tmp_path, {})
    assert main([str(folder), "-k", "4", "--seed", "8", "--open", "--report-dir", str(tmp_path / "r")]) == 0
    assert opened.read_text(encoding="utf-8").strip() == (tmp_path / "r" / "report.partial.html").as_uri()
