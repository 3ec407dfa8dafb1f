"""``report.md``: the report as a Markdown page, one table per exercise."""
from __future__ import annotations

from grader import safetext
from grader.i18n import Catalog, T
from grader.report.common import (ICONS, copies_note, device_notes, environment_text, measured_text, num, preview_notes,
                                  problem_lines, replay_notes, seed_text)
from grader.results import Report, headline


def _escape(text: str) -> str:
    return safetext.markdown(text)


def render_markdown(report: Report, catalog: Catalog, lang: str) -> str:
    """The report as Markdown, in ``lang``; its first line is the headline (partial runs say so)."""
    words = lambda text: catalog.render(text, lang)  # noqa: E731
    out = [f"# {_escape(words(headline(report)))}", ""]  # it names the graded path: the student's text
    note = copies_note(report)
    if note is not None:
        out += [f"> **{_escape(words(note))}**", ""]
    out.append("> " + words(environment_text(report)) + " · " + words(seed_text(report)))
    out += [f">\n> {_escape(words(note))}" for note in [*device_notes(report), *preview_notes(report),
                                                          *replay_notes(report)]]
    out += ["", f"| {words(T('ui.exercise'))} | {words(T('ui.score'))} | {words(T('ui.status'))} |", "|---|---:|---|"]
    for ex in report.exercises:
        out.append(f"| {ICONS.get(ex.status, '')} `{ex.id}` {_escape(words(ex.title))} | "
                   f"{num(ex.score)} / {num(ex.max_score)} | {words(T(f'ui.status.{ex.status}'))} |")
    problems = problem_lines(report, words)
    for ex in report.exercises:
        out += ["", f"## {ICONS.get(ex.status, '')} {ex.id}: {words(ex.title)} ({num(ex.score)} / {num(ex.max_score)})",
                ""]
        for note in ex.notes:
            out += [f"> **{words(T('ui.note'))}:** {_escape(words(note))}", ""]
        if ex.id in problems:  # could not run: one line, not its checks
            out.append(f"**{_escape(problems[ex.id])}**")
        else:
            out += _checks(ex, words)
        if ex.output.strip() and ex.status in ("error", "timeout", "failed", "partial"):
            out += ["", f"<details><summary>{words(T('ui.output'))}</summary>", "", "```text",
                    safetext.markdown_code(ex.output.strip()), "```", "</details>"]
    if report.integrity:
        out += ["", f"## {words(T('ui.integrity'))}", ""]
        out += [f"- {safetext.markdown_span(str(i['file']) + ':' + str(i['line']))} {_escape(words(i['message']))}"
                for i in report.integrity]
    return "\n".join(out) + "\n"


def _checks(ex, words) -> list[str]:
    """An exercise's error line, its table of checks, and the details of the failed ones."""
    out = [f"**{_escape(words(ex.error))}**", ""] if ex.error else []
    out += [f"| {words(T('ui.check'))} | {words(T('ui.score'))} | {words(T('ui.status'))} | {words(T('ui.seen'))} |",
            "|---|---:|---|---|"]
    for c in ex.checks:
        final = f" · {words(T('release.checked_final'))}" if c.checked == "final" else ""
        out.append(f"| {ICONS.get(c.status, '')} `{c.id}` {_escape(words(c.title))} | {num(c.points)} / "
                   f"{num(c.max_points)} | {words(T(f'ui.status.{c.status}'))}{final} | {_escape(words(c.message))} |")
    for c in (c for c in ex.checks if c.status in ("failed", "error", "timeout")):
        out += ["", f"- **{c.id}**: {_escape(words(c.message))}",
                f"  - {words(T('ui.hint'))}: {_escape(words(c.hint))}"]
        if c.measured:
            out.append(f"  - {words(T('ui.measured'))}: {safetext.markdown_span(measured_text(c.measured, 600))}")
    return out
