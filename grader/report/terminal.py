"""The table ``grade`` prints: one line per exercise, the failed checks of the others.

Lines are wrapped by display width (a Chinese character takes two columns), a wrapped
line continues deeper than the text it continues, and the hint, the most useful line,
is never dimmed.
"""
from __future__ import annotations

import shutil

from grader import safetext
from grader.i18n import Catalog, T
from grader.report import textwidth
from grader.report.common import (COLORS, ICONS, copies_note, device_notes, environment_text, measured_text, next_step,
                                  num, preview_notes, problem_lines, replay_notes, seed_text)
from grader.results import CheckResult, ExerciseResult, Report, headline

#: where each kind of line starts, and where its continuation lines start
CHECK_INDENT, CHECK_MORE = "   ", "       "
DETAIL_INDENT, DETAIL_MORE = "       ", "         "
EXERCISE_MORE = "     "


class _Screen:
    """Words in the report's language, styles when the terminal has colour, wrapping to its width."""

    def __init__(self, catalog: Catalog, lang: str, color: bool, width: int):
        self.catalog, self.lang, self.color, self.width = catalog, lang, color, width

    def words(self, text) -> str:
        return self.catalog.render(text, self.lang)

    def style(self, text: str, status: str | None = None, **styles) -> str:
        if not self.color:
            return text
        import click

        fg = styles.pop("fg", None)
        return click.style(text, fg=COLORS.get(status) if status else fg, **styles)

    def wrap(self, text: str, indent: str, more: str) -> list[str]:
        return textwidth.wrap(safetext.terminal(text), self.width, indent, more)  # controls shown, never sent

    def labelled(self, label_key: str, text: str, indent: str, more: str, **label_style) -> list[str]:
        """``Label: text`` wrapped, with the label styled on its first line."""
        label = self.words(T(label_key))
        lines = self.wrap(f"{label}: {text}", indent, more)
        rest = lines[0][len(indent) + len(label) + 1:]
        lines[0] = indent + self.style(label + ":", **label_style) + rest
        return lines


def render_terminal(report: Report, catalog: Catalog, lang: str, *, color: bool = False,
                    width: int | None = None, earlier: dict[str, str] | None = None, head: bool = True,
                    step: bool = True) -> str:
    """The report as the terminal table, in ``lang``; ANSI colours when ``color``. ``earlier``: the
    statuses of the last full report, for ``Next:`` after a partial run; without ``head`` and
    ``step`` (watch mode says those itself), its first line and its ``Next:`` line are left out."""
    screen = _Screen(catalog, lang, color, width or min(shutil.get_terminal_size((100, 24)).columns, 120))
    lines = [screen.style(line, bold=True) for line in screen.wrap(screen.words(headline(report)), "", "  ")] \
        if head else []
    note = copies_note(report)
    if note is not None:
        lines += [screen.style(line, "partial") for line in screen.wrap(screen.words(note), "", "  ")]
    lines.append("")
    problems = problem_lines(report, screen.words)
    widths = (max((len(e.id) for e in report.exercises), default=10),
              max((textwidth.display_width(screen.words(T(f"ui.status.{e.status}"))) for e in report.exercises),
                  default=8))
    for ex in report.exercises:
        lines += _exercise(screen, ex, widths, problems.get(ex.id))
    lines.append("")
    nxt = next_step(report, earlier) if step else None
    if nxt is not None:
        done = nxt.key == "ui.all_passed"
        lines += [screen.style(line, "passed" if done else None, bold=done)
                  for line in screen.wrap(screen.words(nxt), "", "  ")]
    for note in preview_notes(report):
        lines += screen.wrap(screen.words(note), "", "  ")
    if report.integrity:
        text = f"{screen.words(T('ui.integrity'))}: " + "; ".join(
            f"{i['file']}:{i['line']} {screen.words(i['message'])}" for i in report.integrity[:5])
        lines += [screen.style(line, dim=True) for line in
                  screen.wrap(text + (" …" if len(report.integrity) > 5 else ""), "", "  ")]
    notes = report.sandbox.get("notes", []) if report.sandbox.get("kind") != "bwrap" else []
    for text in [*replay_notes(report), environment_text(report), *device_notes(report), *notes, seed_text(report)]:
        lines += [screen.style(line, dim=True) for line in screen.wrap(screen.words(text), "", "  ")]
    return "\n".join(lines) + "\n"


def _exercise(screen: _Screen, ex: ExerciseResult, widths: tuple[int, int], problem: str | None) -> list[str]:
    """An exercise's lines: its head (id and status padded to ``widths``); when it could not
    run, the problem on the same line, else its failed checks; then what its code printed."""
    status_word = textwidth.pad(screen.words(T(f"ui.status.{ex.status}")), widths[1])
    head = f"{ICONS.get(ex.status, ' ')} {ex.id.ljust(widths[0])}  {num(ex.score) + '/' + num(ex.max_score):>9}  "
    if problem is not None:  # what, where and what to do, instead of the checks and their hints
        lines = [screen.style(line, ex.status) for line in
                 screen.wrap(f"{head}{status_word}  {problem}", " ", EXERCISE_MORE)]
    else:
        lines = _head_and_checks(screen, ex, head, status_word)
    for note in ex.notes:  # how its code was read (a notebook's cells)
        lines += screen.labelled("ui.note", screen.words(note), EXERCISE_MORE, EXERCISE_MORE + "  ", bold=True)
    if ex.output.strip() and ex.status in ("error", "timeout", "failed", "partial"):
        lines.append(screen.style(f"{EXERCISE_MORE}{screen.words(T('ui.output'))}:", dim=True))
        printed = safetext.terminal(ex.output.strip()).split("\n")  # a student's controls shown, never sent
        lines += [screen.style(f"{DETAIL_INDENT}| " + textwidth.truncate(line, screen.width - 10), dim=True)
                  for line in _excerpt(printed, screen)]
    return lines


def _excerpt(lines: list[str], screen: _Screen, head: int = 4, tail: int = 6) -> list[str]:
    """The first and the last lines of what the student's code printed (the rest is in report.md)."""
    if len(lines) <= head + tail + 1:
        return lines
    return lines[:head] + [screen.words(T("ui.output_more", n=len(lines) - head - tail))] + lines[-tail:]


def _head_and_checks(screen: _Screen, ex: ExerciseResult, head: str, status_word: str) -> list[str]:
    """The exercise's line with its title, its error if any, and the checks that did not pass."""
    lines = screen.wrap(f"{head}{status_word}  {screen.words(ex.title)}", " ", EXERCISE_MORE)
    if screen.color:  # the head in the status's colour, the title dimmed
        cut = min(len(head) + len(status_word) + 1, len(lines[0]))
        lines = [screen.style(lines[0][:cut], ex.status) + screen.style(lines[0][cut:], dim=True),
                 *(screen.style(line, dim=True) for line in lines[1:])]
    if ex.error and ex.status in ("error", "timeout"):
        lines += [screen.style(line, ex.status) for line in
                  screen.wrap(screen.words(ex.error), EXERCISE_MORE, EXERCISE_MORE + "  ")]
    if ex.status in ("not_attempted", "passed"):
        return lines
    shown_error = screen.words(ex.error) if ex.error else None
    untold = 0
    for check in ex.checks:
        if check.status == "passed":
            continue
        if ex.status in ("error", "timeout") and check.status != "failed":
            untold += 1  # no result of its own: the exercise's line above says why
            continue
        lines += _check(screen, check, shown_error)
    if untold:
        lines += [screen.style(line, dim=True) for line in
                  screen.wrap(screen.words(T("ui.no_result", n=untold)), CHECK_INDENT, CHECK_MORE)]
    return lines


def _check(screen: _Screen, check: CheckResult, shown_error: str | None) -> list[str]:
    """A check that did not pass: its head, what was seen, the numbers, and the hint."""
    head = (f"{ICONS.get(check.status, ' ')} {check.id}  {num(check.points)}/{num(check.max_points)}  "
            f"{screen.words(check.title)}")
    lines = [screen.style(line, check.status) for line in screen.wrap(head, CHECK_INDENT, CHECK_MORE)[:2]]
    message = screen.words(check.message)
    if check.status in ("failed", "skipped", "not_attempted") or message != shown_error:
        lines += screen.labelled("ui.seen", message, DETAIL_INDENT, DETAIL_MORE)[:8]
    if check.status == "failed" and check.measured:
        lines += [screen.style(line, dim=True) for line in screen.wrap(
            f"{screen.words(T('ui.measured'))}: {measured_text(check.measured)}", DETAIL_INDENT, DETAIL_MORE)[:3]]
    if check.status in ("failed", "error", "timeout") and check.hint:
        lines += screen.labelled("ui.hint", screen.words(check.hint), DETAIL_INDENT, DETAIL_MORE,
                                 fg="cyan", bold=True)
    return lines
