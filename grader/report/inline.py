"""A report as a fragment of HTML for a notebook's output: what ``check()`` shows under
its cell, one block per exercise with a table of its checks (points, status, what was
seen, the hint, the numbers), then the environment, the seed and the report's path.

Built from the self-contained pieces of :mod:`grader.report.html_parts`. A notebook's page
is not ours, so the fragment's style is scoped to its own ``<div>``: it changes nothing
else on the page, and nothing is loaded from elsewhere.
"""
from __future__ import annotations

from typing import Sequence

from grader.i18n import Catalog, T
from grader.report import html_parts as html
from grader.report.common import (ICONS, device_notes, environment_text, measured_text, next_step, num, problem_lines,
                                  replay_notes, seed_text)
from grader.results import ExerciseResult, Report, headline

#: the class of the fragment's ``<div>``; every rule of :data:`STYLE` is under it (the table's rules
#: name it twice: JupyterLab right-aligns an output's cells with ``:not(.jp-RenderedMarkdown)
#: .jp-RenderedHTMLCommon td``, two classes deep)
SCOPE = "grade-check"
STYLE = f"""
.{SCOPE} {{ font: 14px/1.45 -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC", "PingFang SC",
  "Microsoft YaHei", sans-serif; color: #1f2328; max-width: 1100px; }}
.{SCOPE} table {{ border-collapse: collapse; width: 100%; margin: 4px 0 8px; }}
.{SCOPE}.{SCOPE} th, .{SCOPE}.{SCOPE} td {{ border-bottom: 1px solid #d0d7de; padding: 4px 6px; text-align: left;
  vertical-align: top; }}
.{SCOPE}.{SCOPE} td.num {{ text-align: right; white-space: nowrap; }}
.{SCOPE} .passed {{ color: #1a7f37; }} .{SCOPE} .failed, .{SCOPE} .error, .{SCOPE} .timeout {{ color: #cf222e; }}
.{SCOPE} .partial {{ color: #9a6700; }} .{SCOPE} .not_attempted, .{SCOPE} .skipped {{ color: #57606a; }}
.{SCOPE} details {{ border: 1px solid #d0d7de; border-radius: 6px; margin: 6px 0; padding: 2px 10px; }}
.{SCOPE} summary {{ cursor: pointer; padding: 3px 0; }}
.{SCOPE} .hint {{ color: #0550ae; font-weight: 600; }} .{SCOPE} .note {{ color: #9a6700; }}
.{SCOPE} .measured, .{SCOPE} .meta {{ color: #57606a; font-size: .85em; word-break: break-all; }}
.{SCOPE} p.meta {{ margin: 2px 0; }} .{SCOPE} p.next {{ margin: 6px 0; font-weight: 600; }}
.{SCOPE} .problem {{ color: #cf222e; font-weight: 600; }}
.{SCOPE} code {{ font: .9em ui-monospace, Menlo, Consolas, monospace; background: #eff1f3; padding: 1px 4px;
  border-radius: 4px; }}
"""


def fragment(body: str) -> str:
    """``body`` (HTML already) in the fragment's scoped ``<div>``, its style inline."""
    return f'<div class="{SCOPE}"><style>{STYLE}</style>{body}</div>'


def render_inline(report: Report, catalog: Catalog, lang: str, *, footer: Sequence[str] = ()) -> str:
    """The report as an HTML fragment, in ``lang``; ``footer`` lines (text) end it (the report's path)."""
    words = lambda text: catalog.render(text, lang)  # noqa: E731
    parts = [f"<p><b>{html.escape(words(headline(report)))}</b></p>"]
    problems = problem_lines(report, words)
    for ex in report.exercises:
        summary = (f"{ICONS.get(ex.status, '')} <b>{html.escape(ex.id)}</b> {num(ex.score)} / {num(ex.max_score)} "
                   f"{html.status(words(T(f'ui.status.{ex.status}')), ex.status)} · {html.rich(words(ex.title))}")
        body = "".join(f'<p class="note"><b>{html.escape(words(T("ui.note")))}:</b> {html.rich(words(note))}</p>'
                       for note in ex.notes)
        if ex.id in problems:  # could not run: one line (what, where, what to do), not its checks
            body += f'<p class="problem">{html.rich(problems[ex.id])}</p>'
        elif ex.status != "not_attempted":  # not attempted: its line says so, once, as in the terminal
            body += _checks(ex, words)
        if ex.output.strip() and ex.status in ("error", "timeout", "failed", "partial"):
            body += html.details(html.escape(words(T("ui.output"))), f"<pre>{html.escape(ex.output.strip())}</pre>")
        parts.append(html.details(summary, body, open_=bool(body) and (ex.status != "passed"
                                                                      or len(report.exercises) == 1)))
    step = next_step(report)
    if step is not None:
        parts.append(f'<p class="next {"passed" if step.key == "ui.all_passed" else ""}">'
                     f'{html.escape(words(step))}</p>')
    meta = [*map(words, replay_notes(report)), words(environment_text(report)), *map(words, device_notes(report)),
            words(seed_text(report)), *footer]
    parts.append("".join(f'<p class="meta">{html.escape(line)}</p>' for line in meta))
    return fragment("".join(parts))


def _checks(ex: ExerciseResult, words) -> str:
    """An exercise's checks as a table: points, status, what was seen, and for one that did
    not pass its hint and the numbers behind it."""
    rows = []
    for c in ex.checks:
        seen = html.rich(words(c.message))
        if c.status in ("failed", "error", "timeout") and c.hint:
            seen += f'<br><span class="hint">{html.escape(words(T("ui.hint")))}: {html.rich(words(c.hint))}</span>'
        if c.status == "failed" and c.measured:
            seen += (f'<br><span class="measured">{html.escape(words(T("ui.measured")))}: '
                     f'{html.escape(measured_text(c.measured, 600))}</span>')
        rows.append([f"{ICONS.get(c.status, '')} <code>{html.escape(c.id)}</code><br>{html.rich(words(c.title))}",
                     f"{num(c.points)} / {num(c.max_points)}",
                     html.status(words(T(f"ui.status.{c.status}")), c.status), seen])
    headers = [words(T(key)) for key in ("ui.check", "ui.score", "ui.status", "ui.seen")]
    return html.table(headers, rows, numeric=(1,))
