"""``report.json`` and the files a run writes.

A run of every exercise writes ``report.json``, ``report.md`` and ``report.html``; a
partial run (``-k``) writes ``report.partial.json``, ``.md`` and ``.html`` beside them
and never touches the full report.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

from grader.i18n import Catalog
from grader.report.page import render_html
from grader.report.markdown import render_markdown
from grader.report.terminal import render_terminal
from grader.results import Report, report_to_dict

__all__ = ["render_html", "render_json", "render_markdown", "render_terminal", "report_paths", "write_reports"]


def _strict(value):
    """JSON has no NaN or infinity: such numbers become strings ("inf", "nan")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def render_json(report: Report, catalog: Catalog, lang: str, *, key: bytes | None = None) -> str:
    """The ``grade-report/1`` JSON; signed (HMAC) when an instructor's key is given."""
    data = _strict(report_to_dict(report, catalog, lang))
    data = json.loads(json.dumps(data, default=str))  # exactly what is written is what is signed
    if key is not None:
        from grader.signing import sign

        data = sign(data, key)
    return json.dumps(data, ensure_ascii=False, indent=2, allow_nan=False) + "\n"


def report_paths(report: Report, directory: Path) -> tuple[Path, Path]:
    """Where the JSON and Markdown reports of ``report`` go in ``directory``."""
    stem = "report.partial" if report.partial else "report"
    return directory / f"{stem}.json", directory / f"{stem}.md"


def write_reports(report: Report, catalog: Catalog, lang: str, directory: Path, *, key: bytes | None = None) -> Path:
    """Write the JSON and Markdown reports atomically (see :func:`report_paths`); returns the JSON file's path."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path, md_path = report_paths(report, directory)
    for path, text in ((json_path, render_json(report, catalog, lang, key=key)),
                       (md_path, render_markdown(report, catalog, lang)),
                       (md_path.with_suffix(".html"), render_html(report, catalog, lang))):
        tmp = directory / f".{path.name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return json_path
