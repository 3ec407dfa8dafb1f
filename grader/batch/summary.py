"""The class summary: what the class got wrong, at a glance (``summary.md``, ``summary.html``).

:func:`summarize` reduces the gradebook's rows to a :class:`ClassSummary` (plain
data); :func:`render_markdown` and :func:`render_html` put it into words in either
language. The HTML page is one self-contained file (style inline, charts as inline
SVG, nothing loaded from the network), built from :mod:`grader.report.html_parts` and
:mod:`grader.report.svg`. When the batch ran with a weaker sandbox than bubblewrap
with per-job uids, the first line of both says so.
"""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from grader import safetext
from grader.batch.gradebook import Row
from grader.i18n import T, Text
from grader.report import html_parts as html, svg

Words = Callable[[object], str]
TOP = 10


@dataclass
class CheckRate:
    """How many of the graded students passed one check."""

    #: ``<exercise id> · <check id>``
    label: str
    #: the check's title, in the batch's language
    title: str
    #: students who passed it
    passed: int
    #: students graded on it
    graded: int

    @property
    def rate(self) -> float:
        return 100.0 * self.passed / self.graded if self.graded else 0.0


@dataclass
class Failure:
    """A mistake many students made: a check failed with the same hint, or an exercise crashed or hung."""

    #: ``<exercise id> · <check id>``, or ``<exercise id> · (error)`` / ``(timeout)`` for a whole exercise
    label: str
    #: how many students' checks failed this way
    count: int
    #: one of the messages they got (the first seen), shortened
    example: str
    #: the hint they got
    hint: str


@dataclass
class SimilarPair:
    """A pair of students alike on one exercise, as the summary lists it (:mod:`grader.batch.similarity`)."""

    #: the exercise's id
    exercise: str
    #: the two students, in order of name
    students: tuple[str, str]
    #: their combined score (0 to 1)
    score: float
    #: both trace to one program
    same_program: bool
    #: both traces equal the reference solution's
    equals_reference: bool


@dataclass
class ClassSummary:
    """What the summary pages show."""

    #: the chapter's title and id, in the batch's language
    chapter: str
    #: the batch's seed
    seed: int
    #: the rows of the gradebook
    rows: list[Row]
    #: the maximum score
    max_score: float
    #: a warning for the first line (a weak sandbox), else ``None``
    warning: Text | None = None
    #: the pass rate of every check, most failed first
    checks: list[CheckRate] = field(default_factory=list)
    #: the most common failures, most frequent first
    failures: list[Failure] = field(default_factory=list)
    #: notes for the instructor (the download's layout, late submissions, timings that shared cores, ...)
    notes: list[Text] = field(default_factory=list)
    #: what the instructor should know of a student's files: ``(student, note)`` (a version superseded, a link)
    download: list[tuple[str, Text]] = field(default_factory=list)
    #: the platform's own file (``--gradebook``): each row left as it was, and each graded student it
    #: lacks, ``(who, why)``
    sheet: list[tuple[str, Text]] = field(default_factory=list)
    #: ``--similarity``: the pairs most alike (at most :data:`TOP`), and how many ``similarity.html`` lists;
    #: ``None``: not asked for
    similar: list[SimilarPair] | None = None
    #: how many pairs ``similarity.html`` lists
    similar_total: int = 0

    @property
    def graded(self) -> list[Row]:
        return [r for r in self.rows if r.report is not None]

    @property
    def percents(self) -> list[float]:
        return [100.0 * r.total / self.max_score if self.max_score else 0.0 for r in self.graded]

    @property
    def slowest(self) -> list[Row]:
        return sorted(self.graded, key=lambda r: -r.duration_s)[:5]

    @property
    def problems(self) -> list[Row]:
        return [r for r in self.rows if r.status != "completed"]


def summarize(rows: list[Row], *, chapter: str, seed: int, max_score: float, warning: Text | None = None,
              notes: list[Text] | None = None, download: list | None = None, sheet: list | None = None) -> ClassSummary:
    """Pass rates and common failures over the students that have a report."""
    rates: dict[str, CheckRate] = {}
    failures: Counter = Counter()
    examples: dict[tuple, tuple[str, str]] = {}
    for row in rows:
        for ex in (row.report or {}).get("exercises", []):
            ended = ex["status"] in ("error", "timeout")  # a crash or a hang: one failure, not one per check
            if ended:
                key = (f"{ex['id']} · ({ex['status']})", "", ex["status"])
                failures[key] += 1
                first = next((c["message"] for c in ex["checks"] if c["status"] == ex["status"]), "")
                examples.setdefault(key, (_short(ex.get("error") or first), ""))
            for c in ex["checks"]:
                label = f"{ex['id']} · {c['id']}"
                rate = rates.setdefault(label, CheckRate(label, c["title"], 0, 0))
                rate.graded += 1
                rate.passed += c["status"] == "passed"
                if c["status"] == "failed" or (c["status"] in ("error", "timeout") and not ended):
                    key = (label, c.get("hint_id") or "", c["status"])
                    failures[key] += 1
                    examples.setdefault(key, (_short(c["message"]), c["hint"] or ""))
    checks = sorted(rates.values(), key=lambda r: (r.rate, r.label))
    common = [Failure(key[0], count, *examples[key]) for key, count in failures.most_common(TOP)]
    return ClassSummary(chapter, seed, rows, max_score, warning, checks, common, list(notes or []),
                        list(download or []), list(sheet or []))


def _short(text: str, limit: int = 220) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _num(value: float) -> str:
    return f"{value:g}"


def _overview(s: ClassSummary) -> Text:
    scores = [r.total for r in s.graded]
    return T("batch.summary.overview", students=len(s.rows), graded=len(scores), max_score=_num(s.max_score),
             mean=_num(round(statistics.fmean(scores), 2)) if scores else "–",
             median=_num(round(statistics.median(scores), 2)) if scores else "–",
             statuses=", ".join(f"{status} {n}" for status, n in Counter(r.status for r in s.rows).items()))


def _md(text: str) -> str:
    return safetext.markdown(text)


# ------------------------------------------------------------------ Markdown
def render_markdown(s: ClassSummary, words: Words) -> str:
    """``summary.md``: its first line is the warning when there is one, else the title."""
    out = [f"> **{words(s.warning)}**", ""] if s.warning else []
    out += [f"# {words(T('batch.summary.title', chapter=s.chapter))}", "",
            words(_overview(s)) + " · " + words(T("ui.seed", seed=s.seed)), ""]
    out += [f"- {_md(words(note))}" for note in s.notes] + ([""] if s.notes else [])
    out += [f"## {words(T('batch.summary.histogram'))}", "", "| % | n |", "|---|---:|"]
    bins = [0] * 10
    for p in s.percents:
        bins[min(9, int(p // 10))] += 1
    out += [f"| {i * 10}–{i * 10 + 10 if i < 9 else 100} | {'█' * n} {n} |" for i, n in enumerate(bins)]
    out += ["", f"## {words(T('batch.summary.checks'))}", "",
            f"| {words(T('ui.check'))} | {words(T('batch.summary.pass_rate'))} | {words(T('batch.summary.passed'))} |",
            "|---|---:|---:|"]
    out += [f"| `{c.label}` {_md(c.title)} | {c.rate:.0f}% | {c.passed} / {c.graded} |" for c in s.checks]
    out += ["", f"## {words(T('batch.summary.failures'))}", ""]
    out += [f"{i}. **{f.count}×** `{f.label}`: {_md(f.example)}" + (f"  \n   {words(T('ui.hint'))}: {_md(f.hint)}"
                                                                   if f.hint else "")
            for i, f in enumerate(s.failures, 1)] or [words(T("batch.summary.none"))]
    out += ["", f"## {words(T('batch.summary.slowest'))}", "",
            f"| {words(T('batch.summary.student'))} | s | {words(T('ui.score'))} |", "|---|---:|---:|"]
    out += [f"| {_md(r.name)} | {r.duration_s:.1f} | {_num(r.total)} |" for r in s.slowest]
    if s.similar is not None:
        out += ["", f"## {words(T('batch.similarity.summary'))}", "",
                words(T("batch.similarity.summary_more", shown=len(s.similar), total=s.similar_total,
                        page="similarity.html")), ""]
        out += [f"- `{p.exercise}` {_md(p.students[0])} · {_md(p.students[1])}: {p.score:.2f}"
                + (f" ({words(T(_said(p)))})" if _said(p) else "") for p in s.similar]
    out += ["", f"## {words(T('batch.summary.problems'))}", ""]
    out += [f"- **{_md(r.name)}**: {r.status}" + (f": {_md(r.detail)}" if r.detail else "") for r in s.problems] \
        or [words(T("batch.summary.none"))]
    for title, listed in (("batch.summary.download", s.download), ("batch.summary.sheet", s.sheet)):
        if listed:
            out += ["", f"## {words(T(title))}", ""]
            out += [f"- **{_md(name)}**: {_md(words(note))}" for name, note in listed]
    out += ["", f"## {words(T('batch.summary.students'))}", "",
            f"| {words(T('batch.summary.student'))} | {words(T('ui.score'))} | % | {words(T('ui.status'))} |",
            "|---|---:|---:|---|"]
    for r in s.rows:
        percent = 100 * r.total / s.max_score if s.max_score else 0
        out.append(f"| {_md(r.name)} | {_num(r.total)} / {_num(s.max_score)} | {percent:.0f} | {r.status} |")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ HTML
def render_html(s: ClassSummary, words: Words, lang: str) -> str:
    """``summary.html``: one self-contained page; its first line of text is the warning, if any."""
    title = words(T("batch.summary.title", chapter=s.chapter))
    body = [f'<p class="banner"><strong>{html.escape(words(s.warning))}</strong></p>'] if s.warning else []
    body += [f"<h1>{html.escape(title)}</h1>",
             f'<p class="meta">{html.escape(words(_overview(s)))} · {html.escape(words(T("ui.seed", seed=s.seed)))}'
             "</p>"]
    body += [f'<p class="meta">{html.escape(words(note))}</p>' for note in s.notes]
    body.append(f"<h2>{html.escape(words(T('batch.summary.histogram')))}</h2>")
    body.append(svg.histogram(s.percents, lowest=0, highest=100, bins=10, title=words(T("batch.summary.histogram"))))
    body.append(f"<h2>{html.escape(words(T('batch.summary.checks')))}</h2>")
    worst = s.checks[:15]
    body.append(svg.bars([(c.label, c.rate) for c in worst], title=words(T("batch.summary.checks")), unit="%",
                         label_width=260))
    body.append(html.table([words(T("ui.check")), words(T("batch.summary.pass_rate")),
                            words(T("batch.summary.passed"))],
                           [[f"<code>{html.escape(c.label)}</code> {html.escape(c.title)}", f"{c.rate:.0f}%",
                             f"{c.passed} / {c.graded}"] for c in s.checks], numeric=(1, 2)))
    body.append(f"<h2>{html.escape(words(T('batch.summary.failures')))}</h2>")
    body.append(html.table(["n", words(T("ui.check")), words(T("ui.seen")), words(T("ui.hint"))],
                           [[str(f.count), f"<code>{html.escape(f.label)}</code>", html.escape(f.example),
                             f'<span class="hint">{html.escape(f.hint)}</span>'] for f in s.failures], numeric=(0,))
                if s.failures else f"<p>{html.escape(words(T('batch.summary.none')))}</p>")
    body.append(f"<h2>{html.escape(words(T('batch.summary.slowest')))}</h2>")
    body.append(svg.bars([(r.name, r.duration_s) for r in s.slowest], title=words(T("batch.summary.slowest")),
                         unit=" s"))
    if s.similar is not None:
        body += _similar_html(s, words)
    body.append(f"<h2>{html.escape(words(T('batch.summary.problems')))}</h2>")
    body.append(html.table([words(T("batch.summary.student")), words(T("ui.status")), ""],
                           [[html.escape(r.name), html.status(r.status, "failed"), html.escape(r.detail)]
                            for r in s.problems])
                if s.problems else f"<p>{html.escape(words(T('batch.summary.none')))}</p>")
    for title, listed in (("batch.summary.download", s.download), ("batch.summary.sheet", s.sheet)):
        if listed:
            body.append(f"<h2>{html.escape(words(T(title)))}</h2>")
            body.append(html.table([words(T("batch.summary.student")), ""],
                                   [[html.escape(name), html.escape(words(note))] for name, note in listed]))
    body.append(f"<h2>{html.escape(words(T('batch.summary.students')))}</h2>")
    body.append(html.table([words(T("batch.summary.student")), words(T("ui.score")), "%", words(T("ui.status"))],
                           [[_student_link(r), f"{_num(r.total)} / {_num(s.max_score)}",
                             f"{100 * r.total / s.max_score:.0f}" if s.max_score else "0",
                             html.status(r.status, "passed" if r.status == "completed" else "failed")]
                            for r in s.rows], numeric=(1, 2)))
    return html.page(title, "\n".join(body), lang=lang)


def _said(p: SimilarPair) -> str | None:
    return "batch.similarity.equals_reference" if p.equals_reference else \
        "batch.similarity.same_program" if p.same_program else None


def _similar_html(s: ClassSummary, words: Words) -> list[str]:
    """The pairs most alike, each a link to its place in ``similarity.html`` (the instructor's alone)."""
    from grader.batch.similarity import anchor

    more = T("batch.similarity.summary_more", shown=len(s.similar or []), total=s.similar_total,
             page="similarity.html")
    body = [f"<h2>{html.escape(words(T('batch.similarity.summary')))}</h2>",
            f'<p class="meta">{html.escape(words(more))}</p>']
    if not s.similar:
        return body + [f"<p>{html.escape(words(T('batch.similarity.none')))}</p>"]
    rows = []
    for p in s.similar:
        said = _said(p)
        note = f' <span class="hint">{html.escape(words(T(said)))}</span>' if said else ""
        link = f'similarity.html#{anchor(p.exercise, p.students)}'
        rows.append([f"<code>{html.escape(p.exercise)}</code>",
                     f'<a href="{html.escape(link)}">{html.escape(p.students[0])} · {html.escape(p.students[1])}</a>'
                     f"{note}", f"{p.score:.2f}"])
    return body + [html.table([words(T("batch.similarity.exercise")), words(T("batch.similarity.pair")),
                               words(T("ui.score"))], rows, numeric=(2,))]


def _student_link(row: Row) -> str:
    if row.report is None:
        return html.escape(row.name)
    from urllib.parse import quote

    name = "report.partial.md" if row.report.get("partial") else "report.md"
    return f'<a href="{quote(row.key)}/{name}">{html.escape(row.name)}</a>'
