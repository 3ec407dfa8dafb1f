"""Renderers: plain functions from one :class:`~grader.results.Report` to text.

They know nothing of how the results were obtained; each takes the report, the
catalog that puts its messages into words, and the language. ``terminal`` prints
the table, ``markdown`` writes ``report.md``, ``render`` writes ``report.json`` and
chooses the files' names.
"""
from grader.report.render import render_html, render_json, render_markdown, render_terminal, report_paths, write_reports

__all__ = ["render_html", "render_json", "render_markdown", "render_terminal", "report_paths", "write_reports"]
