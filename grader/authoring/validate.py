"""Validating a chapter end to end, for its authors (``grade dev validate``).

A chapter is valid when it loads (each exercise folder's code and words name the same
checks, see :func:`grader.chapter.load_chapter`), every exercise has its reference
solution, the messages its code names exist and its own messages are used (with the
same fields in English and Chinese), its stubs (and its notebook, when it has one) are
what its solutions generate, the reference solution scores full marks and the stubs
score zero with every exercise "not attempted". Each problem is one line that names the
file to edit and what to do, so that an exercise copied from another's folder is
finished by following them.
"""
from __future__ import annotations

import ast
from typing import Callable

from grader.authoring.stubs import StubFormatError, generate
from grader.chapter import Chapter, ChapterError, ExerciseSpec
from grader.exercise_folder import CODE, WORDS
from grader.i18n import Catalog, placeholders


def validate(chapter: Chapter, *, seed: int | None = None, lang: str = "en",
             echo: Callable[[str], None] = print) -> list[str]:
    from grader.grading import Machinery, grade
    from grader.options import LimitOptions
    from grader.outcomes import ReferenceCache

    problems = exercise_problems(chapter)
    if problems:
        return problems
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
        report = grade(folder, LimitOptions().grade_options(chapter=chapter.id, seed=seed, allow_weak_sandbox=True),
                       Machinery(reference_cache=cache))  # the author's own code
        echo(f"  {report.score:g} / {report.max_score:g} in {report.duration_s:.1f} s (seed {report.seed})")
        for ex in report.exercises:
            if want_full and ex.score < ex.max_score:
                bad = [f"{c.id}: {catalog.render(c.message, lang)}" for c in ex.checks if c.status != "passed"]
                problems.append(f"reference {ex.id} scores {ex.score:g}/{ex.max_score:g}: " + "; ".join(bad))
            if not want_full and (ex.score > 0 or ex.status != "not_attempted"):
                bad = [f"{c.id}: {c.status}" for c in ex.checks if c.status != "not_attempted"]
                problems.append(f"stub {ex.id} is {ex.status} with {ex.score:g} points: " + "; ".join(bad))
    return problems


def exercise_problems(chapter: Chapter) -> list[str]:
    """What to edit before grading makes sense: each exercise's missing solution, and the
    messages its code and its words disagree on."""
    problems = [f"{chapter.solutions / ex.filename} is missing: the reference solution of {ex.id} (its functions "
                f"{', '.join(ex.functions)}, with SOLUTION and STUB blocks); then grade dev stubs {chapter.id} "
                f"writes its stub" for ex in chapter.exercises if not (chapter.solutions / ex.filename).is_file()]
    try:
        catalog = chapter.catalog
    except ChapterError as exc:
        return [*problems, str(exc)]
    for ex in chapter.exercises:
        problems += message_problems(ex, catalog)
    return problems


def message_problems(ex: ExerciseSpec, catalog: Catalog) -> list[str]:
    """An exercise's code names only messages that exist, and uses every message of its words,
    each with the same fields in both languages."""
    if ex.folder is None:
        return []
    words, problems, named = ex.folder / WORDS, [], set()
    for file in sorted(ex.folder.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"), filename=str(file))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                named.add(node.value)
            key = _literal_key(node)
            if key is not None and key not in catalog.keys():
                problems.append(f"{file}:{node.lineno}: T({key!r}) names no message: add [messages.\"{key}\"] with its "
                                f"en and zh texts to {words}")
    for key, langs in ex.messages.items():
        if key not in named:
            problems.append(f"{words}: message {key!r} is not used by the exercise's code ({ex.folder / CODE}): use "
                            f"it, T(\"{key}\", ...), or remove it")
        en, zh = placeholders(langs["en"]), placeholders(langs["zh"])
        if en != zh:
            problems.append(f"{words}: message {key!r} fills {sorted(en)} in English but {sorted(zh)} in Chinese: "
                            f"use the same fields in both")
    return problems


def _literal_key(node: ast.AST) -> str | None:
    """The message key of a call of ``T`` whose first argument is a string literal, if ``node`` is one."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "T" and node.args:
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None
