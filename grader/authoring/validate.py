"""Validating a chapter end to end, for its authors (``grade dev validate``).

A chapter is valid when it loads (its file and its exercise modules name the same
checks, see :func:`grader.chapter.load_chapter`), its stubs (and its notebook, when it
has one) are what its solutions generate, the reference solution scores full marks and the stubs score zero with every
exercise "not attempted".
"""
from __future__ import annotations

from typing import Callable

from grader.authoring.stubs import StubFormatError, generate
from grader.chapter import Chapter


def validate(chapter: Chapter, *, seed: int | None = None, lang: str = "en",
             echo: Callable[[str], None] = print) -> list[str]:
    from grader.grading import GradeOptions, grade
    from grader.outcomes import ReferenceCache

    problems: list[str] = []
    from grader.authoring import notebook

    try:
        has_notebook = notebook.notebook_path(chapter).exists() and not notebook.missing_solutions(chapter)
        more = [notebook.planned(chapter)] if has_notebook else []
        problems += [f"{d.path}: {d.reason} (run grade dev stubs)"
                     for d in generate(chapter.solutions, chapter.stubs, write=False, more=more)]
    except StubFormatError as exc:
        problems.append(str(exc))
    if problems:
        return problems

    catalog = chapter.catalog
    cache = ReferenceCache()
    for label, folder, want_full in (("reference", chapter.solutions, True), ("stubs", chapter.stubs, False)):
        echo(f"grading the {label} ({folder}) …")
        report = grade(folder, GradeOptions(chapter=chapter.id, seed=seed, reference_cache=cache))
        echo(f"  {report.score:g} / {report.max_score:g} in {report.duration_s:.1f} s (seed {report.seed})")
        for ex in report.exercises:
            if want_full and ex.score < ex.max_score:
                bad = [f"{c.id}: {catalog.render(c.message, lang)}" for c in ex.checks if c.status != "passed"]
                problems.append(f"reference {ex.id} scores {ex.score:g}/{ex.max_score:g}: " + "; ".join(bad))
            if not want_full and (ex.score > 0 or ex.status != "not_attempted"):
                bad = [f"{c.id}: {c.status}" for c in ex.checks if c.status != "not_attempted"]
                problems.append(f"stub {ex.id} is {ex.status} with {ex.score:g} points: " + "; ".join(bad))
    return problems
