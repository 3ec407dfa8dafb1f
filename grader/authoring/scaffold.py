"""A new chapter from nothing: ``grade dev new-chapter ID`` (see ``docs/authoring.md``).

It writes a chapter that grades end to end at once: its ``chapter.toml``, one exercise
folder (its code, ``__init__.py``, in the typed form of :class:`grader.exercise_package.ExercisePackage`:
hidden inputs (an ``Inputs`` TypedDict), the regimes they cover, probe, two checks; its
words, ``exercise.toml``: title, checks, hints, hint layers and messages), a reference solution with
its SOLUTION/STUB blocks, the stub generated from it, and the variants the grader's tests grade it
with (a mistake for each check, a correct answer written otherwise): the structural tests cover the
new chapter at once, no test file edited. An author then renames and
rewrites, and adds exercises by copying the folder; nothing in the grader's core
changes. It never writes over a file that exists.
"""
from __future__ import annotations

import keyword
from dataclasses import dataclass
from pathlib import Path

from grader.authoring.stubs import make_stub

PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent


class ScaffoldError(ValueError):
    """The chapter cannot be made as asked; the message says why and what to do."""


@dataclass
class Scaffold:
    """Where a new chapter's files go."""

    #: the new chapter's id (a Python name)
    chapter: str
    #: its first exercise's id (``ex01_scale``)
    exercise: str
    #: the folder that holds chapter folders (``grader/chapters`` in this repository)
    chapters: Path
    #: the folder of its reference solutions
    solutions: Path
    #: the folder of its stubs (what students get)
    stubs: Path
    #: the folder of its variants (the wrong and the differently right answers the tests grade)
    variants: Path

    @property
    def folder(self) -> Path:
        return self.chapters / self.chapter

    def files(self) -> dict[Path, str]:
        """Every file to write, by path."""
        solution = _solution(self.chapter, self.exercise)
        return {
            self.folder / "chapter.toml": _chapter_toml(self),
            self.folder / self.exercise / "__init__.py": _exercise_module(self.chapter, self.exercise),
            self.folder / self.exercise / "exercise.toml": _template("exercise.toml").format(
                chapter=self.chapter, exercise=self.exercise, tag=self.exercise[:4]),
            self.solutions / f"{self.exercise}.py": solution,
            self.stubs / f"{self.exercise}.py": make_stub(solution, filename=f"{self.exercise}.py"),
            **{self.variants / self.exercise / f"{name}.py": _template(f"variant-{name}.py")
               for name in VARIANTS},
        }


def plan(chapter: str, *, root: Path | None = None, exercise: str = "ex01_scale") -> Scaffold:
    """Where chapter ``chapter`` goes: under ``root`` (``chapters/``, ``solutions/``,
    ``exercises/``), or by default into this repository beside chapter 4."""
    for name, what in ((chapter, "chapter id"), (exercise, "exercise id")):
        if not name.isidentifier() or keyword.iskeyword(name) or name != name.lower():
            raise ScaffoldError(f"{what} {name!r} must be a lower-case Python name (letters, digits, _): "
                                f"it is a module name")
    if not exercise.startswith("ex") or not exercise[2:4].isdigit():
        raise ScaffoldError(f"exercise id {exercise!r} should start with exNN_ (ex01_scale): students select "
                            f"exercises by that number (grade ... -k 1)")
    if root is None:
        chapters = PACKAGE_ROOT / "grader" / "chapters"
        root = PACKAGE_ROOT
        variants = PACKAGE_ROOT / "tests" / "variants" / chapter
    else:
        root = Path(root).resolve()
        chapters = root / "chapters"
        variants = root / "variants" / chapter
    made = Scaffold(chapter, exercise, chapters, root / "solutions" / chapter, root / "exercises" / chapter,
                    variants)
    if not (TEMPLATES / "solution.py.tmpl").is_file():
        raise ScaffoldError("this copy of the grader has no chapter templates (a course release or a Gradescope "
                            "bundle holds none): make a chapter with the grader's repository")
    taken = [str(p) for p in (made.folder, made.solutions, made.stubs, made.variants) if p.exists()]
    if taken:
        raise ScaffoldError(f"chapter {chapter} already has {', '.join(taken)}: choose another id, or remove "
                            f"those first (nothing was written)")
    return made


def write(made: Scaffold) -> list[Path]:
    """Write the chapter's files; returns their paths."""
    written = []
    for path, text in made.files().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def _relative(target: Path, start: Path) -> str:
    import os

    return Path(os.path.relpath(target, start)).as_posix()


def _chapter_toml(made: Scaffold) -> str:
    return _template("chapter.toml").format(chapter=made.chapter, exercise=made.exercise,
                                solutions=_relative(made.solutions, made.folder),
                                stubs=_relative(made.stubs, made.folder),
                                variants=_relative(made.variants, made.folder))


def _exercise_module(chapter: str, exercise: str) -> str:
    return _template("exercise.py").format(chapter=chapter, exercise=exercise, tag=exercise[:4])


def _solution(chapter: str, exercise: str) -> str:
    return _template("solution.py").format(chapter=chapter, exercise=exercise, tag=exercise[:4])


# ------------------------------------------------------------------ templates
#: the first exercise's variants (``templates/variant-<name>.py``): a mistake for each check, the hint a
#: mistake of shape gets, and a correct answer written otherwise (tests/test_variants.py grades them)
VARIANTS = ("adds_factor", "static_factor", "sums_first", "alt_multiply")
TEMPLATES = Path(__file__).resolve().parent / "templates"


def _template(name: str) -> str:
    """A template of ``templates/`` (``str.format`` fields; ``{{`` and ``}}`` are braces)."""
    return (TEMPLATES / f"{name}.tmpl").read_text(encoding="utf-8")
