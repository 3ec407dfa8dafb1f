"""Pairs of students alike across a class (``grade batch --similarity``, ``grade similarity RESULTS``).

A batch with ``--similarity`` has each student's jobs record what their graded functions trace to
(:mod:`grader.child.programs`, in the sandbox, as every other record) beside the exercise files' text, and
keeps both in ``RESULTS/.similarity/programs/<student>.json`` (:func:`keep_programs`): the instructor's
alone, never in a student's folder. :func:`similarity_report` then reads them back (:func:`collect`), takes
the baseline every student shares by construction (the chapter's stubs; the reference solutions' source and
programs, graded once with the same seed), ranks the pairs of each exercise with :mod:`grader.similarity`
(the source's fingerprints the MOSS way and the traced program canonicalised, side by side), and writes
``similarity.csv`` and ``similarity.html`` (both submissions side by side, the matching lines marked).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from grader import safetext
from grader.batch.gradebook import write_text
from grader.i18n import T
from grader.report import html_parts as html
from grader.similarity.ranking import THRESHOLD, Baseline, Pair, Submission, rank
from grader.similarity.traced import canonical

if TYPE_CHECKING:
    from grader.chapter import Chapter

#: the folder, in a batch's results, of what the class's similarity reads (a student's key never starts with a dot)
FOLDER = ".similarity"


class Kept(TypedDict, total=False):
    """One student's exercise as kept (``Report.programs``): its file, that file's text as graded, and by
    function ``{"jaxpr": text}`` or ``{"error": why}`` (:mod:`grader.child.programs`)."""

    file: str
    source: str
    functions: dict[str, dict[str, str]]


#: a class's kept programs: by student, by exercise
Class = dict[str, dict[str, Kept]]


def programs_path(out: Path, name: str) -> Path:
    return Path(out) / FOLDER / "programs" / f"{name}.json"


def keep_programs(out: Path, name: str, programs: dict[str, Kept]) -> None:
    """Keep one student's programs and exercise files' text (``Report.programs``) for the class's similarity."""
    write_text(programs_path(out, name), json.dumps(programs, ensure_ascii=False, sort_keys=True))


def has_programs(out: Path, name: str) -> bool:
    """Whether a student's programs are kept (a batch resumed with ``--similarity`` grades again one without)."""
    return programs_path(out, name).is_file()


def collect(out: Path) -> Class:
    """Every student's programs kept in ``out``, by student: ``{exercise: {"file", "source", "functions"}}``;
    a file that cannot be read is left out."""
    found: Class = {}
    folder = Path(out) / FOLDER / "programs"
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            found[path.stem] = data
    return found


# ------------------------------------------------------------------ the class's pairs
@dataclass
class SimilarityResult:
    """What :func:`similarity_report` found and wrote."""

    #: the pairs reported, highest score first
    pairs: list[Pair]
    #: students with programs kept
    students: list[str]
    #: students graded without their programs kept (``--similarity`` not given then)
    missing: list[str]
    #: ``similarity.html`` and ``similarity.csv``
    paths: dict[str, Path] = field(default_factory=dict)


def similarity_report(out: Path, chapter: Chapter, *, lang: str = "en", threshold: float = THRESHOLD,
                      graded: list[str] | None = None, seed: int | None = None) -> SimilarityResult:
    """Rank the pairs of students of the batch in ``out`` and write ``similarity.csv`` and ``similarity.html``
    there; ``graded``: every student the batch graded (those without programs are named), ``seed``: the
    batch's (the reference's programs are traced on its inputs)."""
    kept = collect(out)
    baseline = _baseline(out, chapter, seed)
    class_data = {student: {ex_id: _submission(entry) for ex_id, entry in work.items() if isinstance(entry, dict)}
                  for student, work in kept.items()}
    pairs = rank(class_data, baseline, threshold=threshold)
    missing = sorted(set(graded or ()) - set(kept))
    result = SimilarityResult(pairs, sorted(kept), missing)
    words = lambda text: chapter.catalog.render(text, lang)  # noqa: E731
    functions = _Functions(kept)
    result.paths["csv"] = Path(out) / "similarity.csv"
    write_text(result.paths["csv"], _csv(pairs, functions))
    result.paths["html"] = Path(out) / "similarity.html"
    write_text(result.paths["html"], _html(result, kept, functions, chapter, words, lang, threshold))
    return result


def _submission(entry: Kept) -> Submission:
    """One student's exercise as the measures read it: the file's text, and the jaxprs of its functions joined
    (``None`` where none could be traced)."""
    functions = entry.get("functions") or {}
    traced = [functions[name]["jaxpr"] for name in sorted(functions)
              if isinstance(functions[name], dict) and isinstance(functions[name].get("jaxpr"), str)]
    return {"source": str(entry.get("source") or ""), "jaxpr": "\n".join(traced) if traced else None}


def _baseline(out: Path, chapter: Chapter, seed: int | None) -> Baseline:
    """The chapter's stubs, and the reference solutions as graded with the programs recorded (once: kept)."""
    stubs = {}
    for ex in chapter.exercises:
        path = chapter.stubs / ex.filename
        stubs[ex.id] = [path.read_text(encoding="utf-8")] if path.is_file() else []
    kept = Path(out) / FOLDER / "reference.json"
    reference: dict[str, Kept]
    try:
        reference = json.loads(kept.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        reference = _reference_programs(chapter, seed)
        write_text(kept, json.dumps(reference, ensure_ascii=False, sort_keys=True))
    return Baseline(stubs=stubs, reference={ex_id: _submission(entry) for ex_id, entry in reference.items()
                                            if isinstance(entry, dict)})


def _reference_programs(chapter: Chapter, seed: int | None) -> dict[str, Kept]:
    """The reference solutions graded as a student's work with their programs recorded (trusted code)."""
    from grader.grading import GradeOptions, Machinery, grade

    report = grade(chapter.solutions, GradeOptions(chapter=chapter.id, seed=seed, allow_weak_sandbox=True),
                   Machinery(programs=True))
    return report.programs


class _Functions:
    """Which functions a pair's likeness is in: those whose lines hold a match (by the source's syntax tree),
    and those that trace to one program on both sides (each function's canonical form, measured once)."""

    def __init__(self, kept: Class):
        self.kept = kept
        self._digests: dict[str, str | None] = {}

    def _entry(self, student: str, exercise: str) -> Kept:
        return (self.kept.get(student) or {}).get(exercise) or {}

    def at_lines(self, student: str, exercise: str, spans: list[tuple[int, int]]) -> list[str]:
        import ast

        try:
            tree = ast.parse(str(self._entry(student, exercise).get("source") or ""))
        except (SyntaxError, ValueError):
            return []
        found = []
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first, last = node.lineno, node.end_lineno or node.lineno
                if any(a <= last and first <= b for a, b in spans):
                    found.append(node.name)
        return found

    def same_program(self, pair: Pair) -> list[str]:
        first, second = (self._entry(s, pair.exercise).get("functions") or {} for s in pair.students)
        return [name for name in sorted(set(first) & set(second))
                if self._digest(first[name]) is not None and self._digest(first[name]) == self._digest(second[name])]

    def _digest(self, entry: object) -> str | None:
        text = entry.get("jaxpr") if isinstance(entry, dict) else None
        if not isinstance(text, str):
            return None
        if text not in self._digests:
            try:
                self._digests[text] = canonical(text).digest
            except ValueError:
                self._digests[text] = None
        return self._digests[text]


def _lines(span: tuple[int, int]) -> str:
    return f"{span[0]}-{span[1]}" if span[1] != span[0] else str(span[0])


def _csv(pairs: list[Pair], functions: _Functions) -> str:
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["exercise", "student_a", "student_b", "score", "source_score", "trace_score",
                     "same_program", "equals_reference", "functions_same_program", "lines_a", "lines_b",
                     "functions_a", "functions_b"])
    for p in pairs:
        writer.writerow(safetext.csv_row([
            p.exercise, p.students[0], p.students[1], f"{p.score:.3f}", f"{p.source_score:.3f}",
            "" if p.trace_score is None else f"{p.trace_score:.3f}", "yes" if p.same_program else "no",
            "yes" if p.equals_reference else "no", " ".join(functions.same_program(p)),
            " ".join(_lines(m.first) for m in p.why), " ".join(_lines(m.second) for m in p.why),
            " ".join(functions.at_lines(p.students[0], p.exercise, [m.first for m in p.why])),
            " ".join(functions.at_lines(p.students[1], p.exercise, [m.second for m in p.why]))]))
    return buffer.getvalue()


def _html(result: SimilarityResult, kept: Class, functions: _Functions, chapter: Chapter,
          words, lang: str, threshold: float) -> str:
    """``similarity.html``: the pairs above the threshold, each with both submissions side by side and the
    matching lines marked (one self-contained page: nothing is loaded from elsewhere)."""
    title = words(T("batch.similarity.title", chapter=chapter.id))
    overview = T("batch.similarity.overview", students=len(result.students), pairs=len(result.pairs),
                 threshold=f"{threshold:g}")
    body = [f"<h1>{html.escape(title)}</h1>", f'<p class="meta">{html.escape(words(overview))}</p>',
            f'<p class="meta">{html.escape(words(T("batch.similarity.how")))}</p>']
    if result.missing:
        missing = T("batch.similarity.missing", n=len(result.missing), students=", ".join(result.missing[:10]))
        body.append(f'<p class="banner">{html.escape(words(missing))}</p>')
    if not result.pairs:
        body.append(f"<p>{html.escape(words(T('batch.similarity.none')))}</p>")
    headers = [words(T("batch.similarity.exercise")), words(T("batch.similarity.pair")), words(T("ui.score")),
               words(T("batch.similarity.source")), words(T("batch.similarity.traced"))]
    rows = []
    for p in result.pairs:
        said = "batch.similarity.equals_reference" if p.equals_reference else \
            "batch.similarity.same_program" if p.same_program else None
        note = f' <span class="hint">{html.escape(words(T(said)))}</span>' if said else ""
        pair = f"{html.escape(p.students[0])} · {html.escape(p.students[1])}"
        rows.append([f"<code>{html.escape(p.exercise)}</code>", f'<a href="#{_anchor(p)}">{pair}</a>{note}',
                     f"{p.score:.2f}", f"{p.source_score:.2f}",
                     "–" if p.trace_score is None else f"{p.trace_score:.2f}"])
    if rows:
        body.append(html.table(headers, rows, numeric=(2, 3, 4)))
    for p in result.pairs:
        sides = []
        for student, spans in ((p.students[0], [m.first for m in p.why]), (p.students[1], [m.second for m in p.why])):
            source = str(((kept.get(student) or {}).get(p.exercise) or {}).get("source") or "")
            sides.append(f'<div class="side"><h3>{html.escape(student)}</h3>{_marked(source, spans)}</div>')
        summary = f"<code>{html.escape(p.exercise)}</code> {html.escape(p.students[0])} · {html.escape(p.students[1])}"
        same = functions.same_program(p)
        if same:
            summary += " — " + html.escape(words(T("batch.similarity.functions_same", functions=", ".join(same))))
        body.append(f'<section id="{_anchor(p)}" class="pair">'
                    + html.details(summary, f'<div class="sides">{"".join(sides)}</div>', open_=True) + "</section>")
    return html.page(title, "\n".join(body), lang=lang).replace("</style>", SIDE_BY_SIDE + "</style>", 1)


#: the two submissions of a pair side by side, matching lines marked
SIDE_BY_SIDE = """
.sides{display:flex;gap:1em;align-items:flex-start}.side{flex:1;min-width:0;overflow-x:auto}
.side pre{margin:0;font-size:12px;line-height:1.4}.side .line{display:block;white-space:pre}
.side .match{background:#fff3b0}.side .no{color:#888;user-select:none;display:inline-block;width:3em}
"""


def _anchor(p: Pair) -> str:
    return anchor(p.exercise, p.students)


def anchor(exercise: str, students: tuple[str, str]) -> str:
    """A pair's place in ``similarity.html`` (the summary links to it)."""
    import hashlib

    return "pair-" + hashlib.sha256(f"{exercise}\0{students[0]}\0{students[1]}".encode()).hexdigest()[:12]


def _marked(source: str, spans: list[tuple[int, int]]) -> str:
    """``source``'s lines numbered, those in ``spans`` marked."""
    marked = {n for first, last in spans for n in range(first, last + 1)}
    lines = []
    for number, line in enumerate(source.splitlines(), start=1):
        css = "line match" if number in marked else "line"
        lines.append(f'<span class="{css}"><span class="no">{number}</span>{html.escape(line)}</span>')
    return "<pre>" + "".join(lines) + "</pre>"
