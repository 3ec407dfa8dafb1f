"""The HTML and SVG pieces: self-contained pages (no link to anything outside them) that a
real browser renders, with charts whose numbers can be read as text."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from browser import needs_browser, render

from grader.report import html_parts as html, svg


def _page() -> str:
    chart = svg.paired_bars(["fast_heavy", "layer_norm"], [("yours", [6.2, 1.4]), ("reference", [6.8, None])],
                            title="speed-ups", unit="×")
    body = (f"<h1>{html.escape('Report <1>')}</h1>"
            + html.table(["check", "points"], [[html.status("passed", "passed"), "1.5"]], numeric=[1])
            + html.details("ex02 — 把 Python 的 if 换成 jnp.where", "<p>hint</p>") + chart
            + svg.histogram([10, 55, 60, 80, 80], lowest=0, highest=80, bins=8, title="scores"))
    return html.page("Report", body, lang="zh")


def test_a_page_is_self_contained_and_well_formed():
    text = _page()
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", text) and "<script" not in text
    assert '<html lang="zh-CN">' in text and "&lt;1&gt;" in text
    for chart in re.findall(r"<svg.*?</svg>", text, re.S):
        ET.fromstring(chart)  # valid XML, so every browser draws it


def test_charts_label_every_bar():
    chart = svg.bars([("a", 1.0), ("b", 2.5)], title="t", unit=" s")
    assert "2.5 s" in chart and "1 s" in chart and chart.count("<rect") == 2
    assert "–" in svg.paired_bars(["x"], [("yours", [None])], title="t")  # no number: said, not drawn


@needs_browser
def test_chromium_renders_the_page(tmp_path):
    page = tmp_path / "page.html"
    page.write_text(_page(), encoding="utf-8")
    text = render(page, tmp_path / "page.png")
    assert "Report <1>" in text and "把 Python 的 if 换成 jnp.where" in text
    assert "6.2×" in text and "6.8×" in text  # the chart's numbers, as the browser shows them
