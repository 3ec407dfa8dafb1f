"""Shared helpers: building submissions from the reference plus variants, and grading them."""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from grader.authoring import variants
from grader.authoring.variants import Variant

ROOT = Path(__file__).resolve().parent.parent
# the grader's caches for this test session alone (what it compiles and the reference's outcomes);
# subprocesses the tests start inherit it. Removed as the process that made it ends (pytest, or a script that
# imports these helpers: scripts/report_snapshot.py): 342 of them, 264 MB, had piled up in /tmp.
if "GRADER_CACHE_DIR" not in os.environ:
    os.environ["GRADER_CACHE_DIR"] = tempfile.mkdtemp(prefix="grader-test-cache-")
    atexit.register(shutil.rmtree, os.environ["GRADER_CACHE_DIR"], ignore_errors=True)
# a first `grade` on a machine builds the chapter's programs first (grader.batch.warmup.build_once):
# not in the tests, whose caches are new (tests/test_first_build.py turns it on)
os.environ.setdefault("GRADER_BUILD", "0")
# a student's gradings keep seeds drawn ahead (grader.ahead): not in the tests, which expect the seeds they
# give or a reference run (tests/test_seeds_ahead.py turns it on)
os.environ.setdefault("GRADER_SEEDS_AHEAD", "0")
# No warm service between a test's gradings (each test sees the processes its own grading starts, and none
# outlives it): tests/test_warm_service.py starts them on purpose.
os.environ.setdefault("GRADER_WARM_S", "0")
# The width the grader writes for is the terminal's, or COLUMNS where set (shutil.get_terminal_size): the tests that
# read lines of its output set the width they read at; none takes it from the shell that ran pytest (a shell that
# exports COLUMNS, or pytest-xdist's workers, which set COLUMNS=80, wrapped a line test_release.py reads whole).
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
_MYPY_CACHE: list[str] = []


def mypy_cache() -> str:
    """mypy's cache folder for this test session, removed as it ends: the first run reads JAX's and NumPy's types
    (about 20 s here), the later ones (tests/test_types.py, tests/test_new_chapter.py) find them cached."""
    if not _MYPY_CACHE:
        _MYPY_CACHE.append(tempfile.mkdtemp(prefix="mypy-cache-"))
        atexit.register(shutil.rmtree, _MYPY_CACHE[0], ignore_errors=True)
    return _MYPY_CACHE[0]


SOLUTIONS = ROOT / "solutions" / "ch4"
STUBS = ROOT / "exercises" / "ch4"
VARIANTS = Path(__file__).resolve().parent / "variants" / "ch4"


def _full_marks() -> float:
    from grader.chapter import load_chapter

    return load_chapter("ch4").max_score


#: ch4's full marks, from its exercises' checks (a check added changes it; no test writes the number)
FULL = _full_marks()


def all_chapters() -> list:
    """Every chapter the grader finds (built in, or on ``GRADER_CHAPTERS``): the structural tests
    (variants, record keys, hints, stubs, input coverage, integrity) follow each, so a chapter made by
    ``grade dev new-chapter`` is covered with no test file edited (tests/test_new_chapter.py)."""
    from grader.chapter import available_chapters, load_chapter

    return [load_chapter(c) for c in available_chapters()]


def load_variants(chapter: str = "ch4") -> list[Variant]:
    """The chapter's variants (grader.authoring.variants: each declares its verdict)."""
    from grader.chapter import load_chapter

    return variants.load(load_chapter(chapter))


def variant(exercise: str, name: str, chapter: str = "ch4") -> str:
    """The student module variant ``exercise/name`` stands for (a patch spliced into the solution)."""
    return variants.module_text(VARIANTS / exercise / f"{name}.py", SOLUTIONS / f"{exercise}.py")


def make_submission(folder: Path, replacements: dict[str, Path | str] | None = None,
                    base: Path = SOLUTIONS) -> Path:
    """A chapter's folder (named as ``base``: ``ch4``) holding the reference modules, with some modules replaced (a
    path: a file of ch4's variants, a patch spliced into its solution; a string: the module's text)."""
    target = folder / base.name
    target.mkdir(parents=True, exist_ok=True)
    for file in base.glob("*.py"):
        shutil.copy(file, target / file.name)
    for exercise, source in (replacements or {}).items():
        text = variants.module_text(source, SOLUTIONS / f"{exercise}.py") if isinstance(source, Path) else source
        (target / f"{exercise}.py").write_text(text, encoding="utf-8")
    return target


_REFERENCES: list = []


def grade_report(path: Path, **options):
    """Grade in this process (the :class:`grader.results.Report`, its sentences still
    unrendered); the reference's runs are shared by every grading of the test session."""
    from grader.grading import GradeOptions, Machinery, grade
    from grader.outcomes import ReferenceCache

    if not _REFERENCES:
        _REFERENCES.append(ReferenceCache())
    machinery = {name: options.pop(name) for name in Machinery.__dataclass_fields__ if name in options}
    machinery.setdefault("reference_cache", _REFERENCES[0])
    return grade(path, GradeOptions(**options), Machinery(**machinery))


def rendered(report, lang: str = "en") -> dict:
    """A report as its JSON says it, every sentence in ``lang``."""
    from grader.chapter import load_chapter
    from grader.results import report_to_dict

    return report_to_dict(report, load_chapter(report.chapter).catalog, lang)


def grade_to_dict(path: Path, lang: str = "en", **options) -> dict:
    """Grade in this process and render the report in ``lang`` (see :func:`grade_report`)."""
    return rendered(grade_report(path, **options), lang)


def exercise(report: dict, exercise_id: str) -> dict:
    return next(e for e in report["exercises"] if e["id"] == exercise_id)


def statuses(ex: dict) -> dict[str, str]:
    return {c["id"]: c["status"] for c in ex["checks"]}


@pytest.fixture(scope="session")
def grade_cache(tmp_path_factory):
    """Grade a submission once per distinct content within the session (rendered in ``lang``,
    English unless asked: the same grading renders in every language)."""
    cache: dict = {}

    def run(replacements: dict[str, Path | str], *, exercises: tuple[str, ...], seed: int = 1234,
            base: Path = SOLUTIONS, lang: str = "en", **options) -> dict:
        key = (tuple(sorted((k, str(v)) for k, v in replacements.items())), exercises, seed, str(base),
               tuple(sorted(options.items())))
        if key not in cache:
            folder = tmp_path_factory.mktemp("sub")
            path = make_submission(folder, replacements, base=base)
            cache[key] = grade_report(path, exercises=exercises, seed=seed, **options)
        return rendered(cache[key], lang)

    return run


@pytest.fixture
def two_chapters(monkeypatch):
    """A second chapter installed beside ch4 (``ch5``, one exercise of other names), so
    that the chapter of a submission must be told from its name or its contents."""
    import dataclasses

    import grader.cli.check
    import grader.submission
    from grader.chapter import ChapterError, load_chapter

    ch4 = load_chapter("ch4")
    ex = dataclasses.replace(ch4.exercises[0], id="ex01_vmap_basics", functions=("batched_dot", "per_example"))
    ch5 = dataclasses.replace(ch4, id="ch5", exercises=(ex,))

    def load(chapter_id: str):
        if chapter_id == "ch5":
            return ch5
        if chapter_id == "ch4":
            return ch4
        raise ChapterError(f"unknown chapter {chapter_id!r} (known chapters: ch4, ch5)")

    monkeypatch.setattr(grader.submission, "available_chapters", lambda: ["ch4", "ch5"])
    monkeypatch.setattr(grader.submission, "load_chapter", load)
    monkeypatch.setattr(grader.cli.check, "load_chapter", load)
    return ch4, ch5


def sigint_as_at_a_terminal() -> None:
    """``preexec_fn`` for a child that a test interrupts as a user would with Ctrl-C: SIGINT's
    default action, even when the test run itself was started in the background by a
    non-interactive shell (its children then inherit SIGINT as ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
