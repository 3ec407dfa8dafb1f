"""Renderers: plain functions from one :class:`~grader.results.Report` to text.

They know nothing of how the results were obtained; each takes the report, the
catalog that puts its messages into words, and the language.
"""
from grader.report.render import render_json, render_markdown, render_terminal, write_reports

__all__ = ["render_json", "render_markdown", "render_terminal", "write_reports"]
