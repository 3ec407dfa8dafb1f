"""Self-contained HTML pages: one file, its style inline, no script from elsewhere, no
network. The report of one submission and an instructor's class summary are built
from these pieces (and charts from :mod:`grader.report.svg`)."""
from __future__ import annotations

import re
from typing import Iterable

from grader import safetext

STYLE = """
:root { --ok: #1a7f37; --bad: #cf222e; --part: #9a6700; --dim: #57606a; --line: #d0d7de; --hint: #0550ae; }
* { box-sizing: border-box; }
body { font: 15px/1.5 -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC", "PingFang SC",
       "Microsoft YaHei", sans-serif; margin: 0 auto; max-width: 980px; padding: 24px; color: #1f2328; }
h1 { font-size: 1.6em; margin: 0 0 4px; } h2 { font-size: 1.25em; margin: 28px 0 8px; }
.meta { color: var(--dim); font-size: .9em; }
table { border-collapse: collapse; width: 100%; margin: 8px 0; }
th, td { border-bottom: 1px solid var(--line); padding: 6px 8px; text-align: left; vertical-align: top; }
th { font-weight: 600; } td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.passed { color: var(--ok); } .failed, .error, .timeout { color: var(--bad); } .partial { color: var(--part); }
.not_attempted, .skipped { color: var(--dim); }
details { border: 1px solid var(--line); border-radius: 6px; margin: 8px 0; padding: 4px 12px; }
details > summary { cursor: pointer; font-weight: 600; padding: 4px 0; }
.check { margin: 10px 0 14px; } .check .seen { margin: 2px 0; }
.hint { color: var(--hint); font-weight: 600; } \
.measured { color: var(--dim); font-size: .85em; word-break: break-all; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; font-size: .85em; }
svg text { font: 12px sans-serif; fill: #1f2328; } .chart { margin: 6px 0; }
.banner { background: #fff8c5; border: 1px solid #d4a72c; padding: 8px 12px; border-radius: 6px; }
code { font: .9em ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; background: #eff1f3;
       padding: 1px 4px; border-radius: 4px; }
.hint code { color: #1f2328; font-weight: 400; }
"""


def escape(text: object) -> str:
    """Text as HTML (quotes included), controls shown as text (:func:`grader.safetext.html`)."""
    return safetext.html(text)


#: code in a message or a hint, as its author marked it: `jnp.where(x > 0, a, b)`
_CODE = re.compile(r"`([^`\n]+)`")


def rich(text: object) -> str:
    """Text as HTML, with the code its author put in backticks shown as code (``<code>``). Everything
    is escaped, the code too: a message quoting a student's ``<script>`` shows it as text."""
    parts = _CODE.split("" if text is None else str(text))
    return "".join(f"<code>{escape(part)}</code>" if i % 2 else escape(part) for i, part in enumerate(parts))


def page(title: str, body: str, *, lang: str = "en") -> str:
    """A whole page: ``body`` is HTML already; nothing is loaded from elsewhere."""
    html_lang = "zh-CN" if lang == "zh" else "en"
    return (f'<!DOCTYPE html>\n<html lang="{html_lang}">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n')


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], *, numeric: Iterable[int] = ()) -> str:
    """A table; ``headers`` are text, each cell of ``rows`` HTML already; ``numeric`` columns align right."""
    right = set(numeric)
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(('<td class="num">' if i in right else "<td>") + f"{cell}</td>"
                                    for i, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def details(summary: str, body: str, *, open_: bool = False, css: str = "") -> str:
    """A block that expands on a click; ``summary`` and ``body`` are HTML already."""
    attributes = (" open" if open_ else "") + (f' class="{escape(css)}"' if css else "")
    return f"<details{attributes}><summary>{summary}</summary>{body}</details>"


def status(word: str, status_id: str) -> str:
    """A status word coloured by its status (``passed``, ``failed``, ...)."""
    return f'<span class="{escape(status_id)}">{escape(word)}</span>'
