"""report.html from the student's side: written beside report.md, self-contained, and what
a real browser shows of it: the exercises, the checks, the hints, and the student's
compile counts and speed-ups beside the reference's."""
from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest

from browser import ARTIFACTS, needs_browser, page_in_browser, render
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


# ------------------------------------------------------------------ as a person reads it (issue 25)
def _speedup_chart(view):
    """The rendered speed-up chart: its bars (as drawn: x, width) and its pass lines."""
    chart = view.locator("svg", has=view.locator("title", has_text="speed-up over the eager code"))
    assert chart.count() == 1
    bars = [b for b in (r.bounding_box() for r in chart.locator("rect").all()) if b and b["height"] > 12]
    return chart, bars


@needs_browser
def test_the_speedup_chart_reads_at_5x_and_at_700x_with_the_bar_to_pass(graded):
    """ex06 graded for real: fast_heavy gains about 5×, layer_norm several hundred × (a Python loop
    against one vectorised call). On a linear scale the 5× bar was two pixels wide beside a 300-pixel one."""
    report = json.loads(graded.with_suffix(".json").read_text(encoding="utf-8"))
    speedups = {c["id"]: c["measured"] for e in report["exercises"] for c in e["checks"] if c["category"] == "speedup"}
    small, large = speedups["fast_heavy.speedup"], speedups["layer_norm.speedup"]
    assert large["student"]["speedup"] > 20 * small["student"]["speedup"]  # the case the chart must show
    shot = ARTIFACTS / "report-speedups.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    with page_in_browser(graded) as view:
        view.locator("summary", has_text="ex06_speedup").first.click()  # a passed exercise: opened by a click
        view.screenshot(path=str(ARTIFACTS / "report-page.png"), full_page=True)
        chart, _ = _speedup_chart(view)
        chart.scroll_into_view_if_needed()
        chart.screenshot(path=str(shot))
        chart, bars = _speedup_chart(view)  # measured where the page now stands (boxes are on the viewport)
        widths = [b["width"] for b in bars]  # yours and the reference's, fast_heavy then layer_norm
        assert len(widths) == 4, bars
        assert min(widths) >= 0.2 * max(widths) and min(widths) >= 40, widths  # each bar readable
        passes = [line.bounding_box() for line in chart.locator("line.pass").all()]
        assert len(passes) == 2, "a bar to pass on each row"
        for row, line in enumerate(passes):  # drawn where the bar is: inside its row, left of a passing bar's end
            yours = bars[2 * row]
            measured = (small, large)[row]
            assert line["y"] <= yours["y"] <= line["y"] + line["height"]
            assert (line["x"] < yours["x"] + yours["width"]) == (measured["student"]["speedup"] >= measured["bar"])
    print(f"\nscreenshot of the speed-up chart: {shot}")
    assert shot.stat().st_size > 5_000


def _report_with_code(tmp_path: Path) -> Path:
    from grader.chapter import load_chapter
    from grader.i18n import T
    from grader.results import CheckResult, ExerciseResult, Report
    from grader.report.render import write_reports

    ch4 = load_chapter("ch4")
    ex = ch4.exercise("ex02_where")
    spec = next(c for c in ex.checks if "`" in c.hint.en)  # "Replace `if x.sum() > 0:` by jnp.where ..."
    check = CheckResult(id=spec.id, title=spec.title, category=spec.category, points=0, max_points=spec.points,
                        status="failed", message=T("check.grader_error", detail="`<script>alert(1)</script>` ran"),
                        hint=spec.hint)
    result = ExerciseResult(id=ex.id, title=ex.title, section=ex.section, checks=[check], status="failed")
    report = Report(chapter="ch4", chapter_title=ch4.title, seed=1, started_at="", duration_s=1,
                    submission={"path": "exercises/ch4", "kind": "folder", "files": ["ex02_where.py"]},
                    environment={}, exercises=[result])
    return write_reports(report, ch4.catalog, "en", tmp_path).with_suffix(".html")


@needs_browser
def test_code_in_hints_and_messages_is_shown_as_code(tmp_path):
    page = _report_with_code(tmp_path)
    with page_in_browser(page) as view:
        hint = view.locator("p.hint").first
        assert "`" not in hint.inner_text()  # the backticks were printed as they are
        assert hint.locator("code").count() >= 1
        seen = view.locator("p.seen").first
        assert seen.locator("code").first.inner_text() == "<script>alert(1)</script>"  # shown, never run
        assert view.locator("script").count() == 0
        family = view.evaluate("e => getComputedStyle(e).fontFamily", hint.locator("code").first.element_handle())
        assert "mono" in family.lower() or "consolas" in family.lower(), family


@needs_browser
def test_a_link_to_an_exercise_opens_its_section_and_the_page_says_what_is_next(graded):
    """A passed exercise's section is closed; its charts show all the same; the exercise table's link to it
    opens it (the anchor lies inside the section: Chromium opens a closed <details> to show what a link names,
    no script needed); the page says what to do next, as the terminal does."""
    with page_in_browser(graded) as view:
        section = view.locator("details", has=view.locator("summary", has_text="ex06_speedup")).first
        assert not section.evaluate("d => d.open")
        assert view.locator("div.charts svg").last.is_visible()  # ex06's speed-ups, its section closed
        assert view.locator("p.next").inner_text().startswith("Next:")
        view.locator('a[href="#ex06_speedup"]').click()
        view.wait_for_function("document.querySelector('#ex06_speedup').closest('details').open")
        assert section.evaluate("d => d.open")
