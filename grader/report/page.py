"""``report.html``: the report as one self-contained page (no network, no script).

The per-exercise table, each exercise's checks to expand, the student's compile
counts and speed-ups drawn beside what the reference does, and the hints; ``grade
... --open`` opens it in the browser.
"""
from __future__ import annotations

from grader.i18n import Catalog, T
from grader.report import html_parts as html, svg
from grader.report.common import (ICONS, copies_note, device_notes, environment_text, measured_text, next_step, num,
                                   preview_notes,
                                  problem_lines, seed_text)
from grader.results import CheckResult, ExerciseResult, Report, headline


def render_html(report: Report, catalog: Catalog, lang: str) -> str:
    """The report as an HTML page, in ``lang``."""
    words = lambda text: catalog.render(text, lang)  # noqa: E731
    title = words(headline(report))
    body = [f"<h1>{html.escape(title)}</h1>",
            f'<p class="meta">{html.escape(words(environment_text(report)))} · '
            f'{html.escape(words(seed_text(report)))}</p>']
    body += [f'<p class="meta">{html.rich(words(note))}</p>'
             for note in [*device_notes(report), *preview_notes(report)]]
    nxt = next_step(report)  # what the terminal's report ends with, at the top of the page
    if nxt is not None:
        body.append(f'<p class="next">{html.rich(words(nxt))}</p>')
    copies = copies_note(report)
    if copies is not None:
        body.append(f'<p class="banner">{html.rich(words(copies))}</p>')
    rows = [[f'<a href="#{ex.id}">{ICONS.get(ex.status, "")} {html.escape(ex.id)}</a> {html.rich(words(ex.title))}',
             f"{num(ex.score)} / {num(ex.max_score)}", html.status(words(T(f"ui.status.{ex.status}")), ex.status)]
            for ex in report.exercises]
    body.append(html.table([words(T("ui.exercise")), words(T("ui.score")), words(T("ui.status"))], rows, numeric=[1]))
    problems = problem_lines(report, words)
    for ex in report.exercises:
        body.append(_exercise(ex, problems.get(ex.id), words))
    if report.integrity:
        items = "".join(f"<li><code>{html.escape(i['file'])}:{i['line']}</code> {html.rich(words(i['message']))}</li>"
                        for i in report.integrity)
        body.append(f"<h2>{html.escape(words(T('ui.integrity')))}</h2><ul>{items}</ul>")
    return html.page(title, "\n".join(body), lang=lang)


def _exercise(ex: ExerciseResult, problem: str | None, words) -> str:
    head = (f'<span class="{ex.status}">{ICONS.get(ex.status, "")}</span> <b>'
            f'{html.escape(ex.id)}</b> {html.rich(words(ex.title))} — {num(ex.score)} / {num(ex.max_score)}')
    # the anchor inside the section: a browser opens a closed section to show the element a link names
    parts = [f'<span id="{html.escape(ex.id)}"></span>']
    parts += [f'<p class="partial"><b>{html.escape(words(T("ui.note")))}:</b> {html.rich(words(note))}</p>'
              for note in ex.notes]  # how its code was read (a notebook's cells)
    if problem:
        parts.append(f'<p class="error">{html.rich(problem)}</p>')
    else:
        if ex.error:
            parts.append(f'<p class="{ex.status}">{html.rich(words(ex.error))}</p>')
        parts += [_check(c, words) for c in ex.checks]
    if ex.output.strip() and ex.status in ("error", "timeout", "failed", "partial"):
        parts.append(html.details(html.escape(words(T("ui.output"))), f"<pre>{html.escape(ex.output.strip())}</pre>"))
    section = html.details(head, "\n".join(parts), open_=ex.status not in ("passed", "not_attempted"))
    charts = "" if problem else _charts(ex, words)  # shown whether its section is open or not
    return section + (f'<div class="charts">{charts}</div>' if charts else "")


def _check(check: CheckResult, words) -> str:
    head = (f'{html.status(ICONS.get(check.status, ""), check.status)} <code>{html.escape(check.id)}</code> '
            f'{html.rich(words(check.title))} — {num(check.points)} / {num(check.max_points)}')
    if check.checked == "final":  # a course release's preview: final grading decides
        head += f' · <i>{html.escape(words(T("release.checked_final")))}</i>'
    if check.status in ("passed", "not_attempted"):
        return f'<div class="check">{head}</div>'
    lines = [f'<p class="seen">{html.escape(words(T("ui.seen")))}: {html.rich(words(check.message))}</p>']
    if check.hint:
        lines.append(f'<p class="hint">{html.escape(words(T("ui.hint")))}: {html.rich(words(check.hint))}</p>')
    if check.measured:
        lines.append(f'<p class="measured">{html.escape(words(T("ui.measured")))}: '
                     f'{html.escape(measured_text(check.measured, 600))}</p>')
    return html.details(head, "".join(lines), open_=check.status == "failed", css="check")


def _charts(ex: ExerciseResult, words) -> str:
    """Compile counts beside what the reference does; speed-ups beside the reference's."""
    compile_checks = [c for c in ex.checks if c.category == "compile" and isinstance(c.measured, dict)
                      and "compiles" in c.measured and ("expected" in c.measured or "at_most" in c.measured)]
    speedups = [c for c in ex.checks if c.category == "speedup" and isinstance(c.measured, dict)
                and isinstance(c.measured.get("student"), dict)]
    out = []
    if compile_checks:
        labels = [c.id for c in compile_checks]
        yours = [float(c.measured["compiles"]) for c in compile_checks]
        expected = [float(c.measured.get("expected", c.measured.get("at_most", 0))) for c in compile_checks]
        out.append(svg.paired_bars(labels, [(words(T("ui.chart.yours")), yours),
                                            (words(T("ui.chart.reference")), expected)],
                                   title=words(T("ui.chart.compiles"))))
    if speedups:
        labels = [c.id for c in speedups]
        yours = [c.measured["student"].get("speedup") for c in speedups]
        # a preview has no reference's run: its chart holds the student's speed-up and the release's bar
        ref = [None if c.checked == "final" else (c.measured.get("reference") or {}).get("speedup") for c in speedups]
        series = [(words(T("ui.chart.yours")), yours)]
        if any(v is not None for v in ref):
            series.append((words(T("ui.chart.reference")), ref))
        bar_name = T("release.chart_bar") if any(c.checked == "final" for c in speedups) else T("ui.chart.pass_bar")
        out.append(svg.speedup_rows(labels, series, [c.measured.get("bar") for c in speedups],
                                    title=words(T("ui.chart.speedups")), bar_name=words(bar_name)))
    return "".join(f"<div>{chart}</div>" for chart in out)
