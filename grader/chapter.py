"""A chapter: its metadata file read into typed structures, and its exercise modules.

A chapter is a folder ``<id>/`` (built in under ``grader/chapters/``, or elsewhere on
``GRADER_CHAPTERS``, see :mod:`grader.chapters`) holding

* ``chapter.toml``: titles, sections, exercises and their settings, and each check's
  category, points, title and hints, in English and Chinese (read here);
* ``messages.toml``: the chapter's own feedback sentences (see :mod:`grader.i18n`);
* one module per exercise, named by its id (``ex02_where.py``): its hidden inputs
  (``inputs(rng)``), what its child process records (``probe(ctx)``), its checks
  (declared with :func:`grader.checks.check`) and, for a timed exercise, its driver
  (``drive(sides, inputs, budget)``); shared helpers in modules of their own.

The core knows no chapter: adding one adds such a folder. :func:`load_chapter` holds
the file and the modules to each other: a check in one and not the other is an error
naming the file, the id and the fix.
"""
from __future__ import annotations

import importlib
import tomllib
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np

from grader import chapters as chapter_folders
from grader.checks import declared_checks
from grader.i18n import Bilingual, Catalog, grader_catalog, read_toml
from grader.report.data import CATEGORIES


class ChapterError(Exception):
    """A chapter folder, metadata file or exercise module that cannot be used; the message says why."""


class UnknownExercise(ChapterError):
    def __init__(self, item: str, chapter: str, known: str):
        super().__init__(f"no exercise {item!r} in chapter {chapter} (known: {known})")
        self.item, self.chapter, self.known = item, chapter, known


@dataclass(frozen=True)
class CheckSpec:
    """One hidden check: its entry in ``chapter.toml`` joined to the function that judges it."""

    #: the check's id in its exercise (``piecewise.values``)
    id: str
    #: one of :data:`grader.report.data.CATEGORIES`: ``numeric``, ``compile``, ``purity``,
    #: ``speedup``, ``harness`` or ``structure``
    category: str
    #: what the check is worth (positive)
    points: float
    #: what it checks, as the report titles it
    title: Bilingual
    #: the check's own hint, for a failure that is this check's one mistake
    hint: Bilingual
    #: checks of the same exercise that must pass first (from ``@check(..., depends=...)``)
    depends: tuple[str, ...] = ()
    #: named hints for the different mistakes the check tells apart (``Fail(hint=name)``)
    hints: dict[str, Bilingual] = field(default_factory=dict)
    #: the hint's further layers, shown one at a time by ``grade ... --hint CHECK``: after the
    #: nudge (``hint`` or a named hint), why it matters under ``jax.jit``, then a worked
    #: explanation of the concept (never the answer's code)
    layers: tuple[Bilingual, ...] = ()
    #: the function that judges, ``(student, reference, ctx) -> measured`` (raises ``Fail``)
    function: Callable | None = None

    def resolve_hint(self, hint: Any) -> tuple[Any, str]:
        """The hint to show for ``Fail(hint=...)``, and its id for the report (``hint_id``).

        ``None`` is the check's own hint (id ``check``); a name, one of its named hints
        (id ``check:<name>``); a :class:`~grader.i18n.Text`, a hint of the grader's own
        (id: its message key).
        """
        if hint is None:
            return self.hint, "check"
        if isinstance(hint, str):
            if hint not in self.hints:
                raise KeyError(f"check {self.id} has no hint named {hint!r} in chapter.toml")
            return self.hints[hint], f"check:{hint}"
        return hint, getattr(hint, "key", "text")


@dataclass(frozen=True)
class ExerciseSpec:
    """One exercise: what ``chapter.toml`` says of it, and its module."""

    #: the exercise's id, also the student's module name (``ex02_where``)
    id: str
    #: its title, in both languages
    title: Bilingual
    #: the section of the course text it practises (a key of the chapter's ``sections``)
    section: str
    #: the module-level names the student writes
    functions: tuple[str, ...]
    #: its checks, in the order of ``chapter.toml`` (the report's order)
    checks: tuple[CheckSpec, ...]
    #: the exercise's module (inputs, probe, checks, driver), imported in the grader
    code: ModuleType
    #: the wall-clock limit for the student's job, in seconds
    timeout_s: float = 60.0
    #: the limit for importing the student's module (code at the top level of the file)
    import_timeout_s: float = 20.0
    #: timed exercises run alone, with the student's and the reference's processes alive
    #: together so that the driver can alternate between them
    timed: bool = False
    #: ``False`` when the checks judge against the grader's own measurements only
    needs_reference: bool = True
    #: mixed with the run's seed to draw this exercise's hidden inputs
    seed_salt: int = 0
    #: modules of the chapter the child imports before the student's (provided code)
    preload: tuple[str, ...] = ()
    #: run JAX's CPU client with synchronous dispatch in this exercise's jobs (timing)
    sync_cpu_dispatch: bool = False
    #: the bar of a speed-up check: this fraction of the reference's gain (``speedup - 1``)
    speedup_fraction: float = 0.5
    #: a course release's preview has no reference to measure: the speed-up over the
    #: provided eager code each function must reach there, by function name (the
    #: instructor's bar; final grading uses ``speedup_fraction`` of the reference's gain)
    release_speedup_bar: dict[str, float] = field(default_factory=dict)
    #: where the chapter teaches each kind of JAX error (``tracer_bool``, ...; ``""``: any
    #: other exception), for hints about exceptions; from the chapter's ``[error_sections]``
    error_sections: dict[str, Bilingual] = field(default_factory=dict)

    @property
    def student_module(self) -> str:
        """The student's module for this exercise (``ex02_where``)."""
        return self.id

    @property
    def filename(self) -> str:
        return f"{self.id}.py"

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.checks)

    @property
    def code_name(self) -> str:
        """The import name of the exercise's module, for the child process."""
        return self.code.__name__

    def inputs(self, seed: int) -> dict:
        """The hidden inputs of this exercise for a run's seed (the same for both sides)."""
        return self.code.inputs(np.random.default_rng([seed, self.seed_salt]))

    @property
    def driver(self) -> Callable | None:
        """The timing driver of a timed exercise (``drive(sides, inputs, budget)``), if any."""
        return getattr(self.code, "drive", None)


@dataclass(frozen=True)
class Chapter:
    #: the chapter's id (``ch4``), also its folder's name
    id: str
    #: its title, in both languages
    title: Bilingual
    #: its sections by key (``"1"``): what hints point students at
    sections: dict[str, Bilingual]
    #: its exercises, in order
    exercises: tuple[ExerciseSpec, ...]
    #: the chapter's folder (``chapter.toml``, ``messages.toml``, its modules)
    folder: Path
    #: the reference solutions (``solutions`` in the toml)
    solutions: Path
    #: the student's stubs (``stubs`` in the toml)
    stubs: Path

    def exercise(self, exercise_id: str) -> ExerciseSpec:
        for ex in self.exercises:
            if ex.id == exercise_id:
                return ex
        raise KeyError(exercise_id)

    def select(self, wanted: list[str] | tuple[str, ...]) -> list[ExerciseSpec]:
        """Exercises matching ``wanted`` (full ids, ``ex03`` prefixes or numbers)."""
        if not wanted:
            return list(self.exercises)
        chosen: list[ExerciseSpec] = []
        for item in wanted:
            key = item.strip()
            if key.isdigit():
                key = f"ex{int(key):02d}"
            matches = [ex for ex in self.exercises if ex.id == key or ex.id.startswith(key + "_")]
            if len(matches) != 1:
                known = ", ".join(ex.id for ex in self.exercises)
                raise UnknownExercise(item, self.id, known)
            if matches[0] not in chosen:
                chosen.append(matches[0])
        return [ex for ex in self.exercises if ex in chosen]

    @cached_property
    def catalog(self) -> Catalog:
        catalog = grader_catalog()
        messages = self.folder / "messages.toml"
        if messages.exists():
            catalog.load(messages)
        return catalog

    @property
    def child_modules(self) -> list[str]:
        """What the child imports before any student code: every exercise module and its preloads."""
        names: list[str] = []
        for ex in self.exercises:
            for name in (ex.code_name, *(f"grader.chapters.{self.id}.{p}" for p in ex.preload)):
                if name not in names:
                    names.append(name)
        return names

    @property
    def search_folder(self) -> Path:
        """The folder that holds this chapter's folder (for the child's import path)."""
        return self.folder.parent


def available_chapters() -> list[str]:
    found: list[str] = []
    for folder in chapter_folders.search_path():
        found += [p.parent.name for p in folder.glob("*/chapter.toml") if p.parent.name not in found]
    return sorted(found)


def load_chapter(chapter_id: str) -> Chapter:
    """Read a chapter and import its exercise modules; :class:`ChapterError` says what is wrong."""
    folder = next((f / chapter_id for f in chapter_folders.search_path() if (f / chapter_id / "chapter.toml").exists()),
                  None)
    if folder is None:
        known = ", ".join(available_chapters()) or "none"
        raise ChapterError(f"unknown chapter {chapter_id!r} (known chapters: {known})")
    path = folder / "chapter.toml"
    try:
        data = read_toml(path)
    except tomllib.TOMLDecodeError as exc:
        raise ChapterError(f"{path}: {exc}") from None
    chapter_folders.extend([folder.parent])
    return _parse(data, folder, path)


# ------------------------------------------------------------------ reading the file
def _bilingual(value: Any, where: str) -> Bilingual:
    if not isinstance(value, dict) or not isinstance(value.get("en"), str) or not isinstance(value.get("zh"), str):
        raise ChapterError(f"{where} needs both an 'en' and a 'zh' text")
    return Bilingual(en=value["en"], zh=value["zh"])


#: an exercise's settings in chapter.toml, and their types
_SETTINGS = {"timeout_s": float, "import_timeout_s": float, "timed": bool, "reference": bool, "seed_salt": int,
             "preload": list, "sync_cpu_dispatch": bool, "speedup_fraction": float, "release_speedup_bar": dict}
_EXERCISE_KEYS = {"id", "title", "section", "functions", "checks", *_SETTINGS}
_CHECK_KEYS = {"id", "category", "points", "title", "hint", "hints", "layers"}


def _need(table: dict, key: str, where: str, path: Path) -> Any:
    if key not in table:
        raise ChapterError(f"{path}: {where} has no {key!r}")
    return table[key]


def _parse(data: dict, folder: Path, path: Path) -> Chapter:
    chapter_id = _need(data, "id", "the chapter", path)
    sections = {str(k): _bilingual(v, f"{path}: section {k}")
                for k, v in _need(data, "sections", "the chapter", path).items()}
    error_sections = {}
    for kind, section in data.get("error_sections", {}).items():
        if str(section) not in sections:
            raise ChapterError(f"{path}: [error_sections] {kind} names section {section!r}, which is not among "
                               f"the chapter's sections")
        error_sections[str(kind)] = sections[str(section)]
    exercises = [_exercise(raw, chapter_id, sections, error_sections, folder, path)
                 for raw in _need(data, "exercises", "the chapter", path)]
    ids = [ex.id for ex in exercises]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise ChapterError(f"{path}: exercise id(s) used twice: {', '.join(twice)}")
    return Chapter(
        id=chapter_id,
        title=_bilingual(_need(data, "title", "the chapter", path), f"{path}: title"),
        sections=sections,
        exercises=tuple(exercises),
        folder=folder,
        solutions=(folder / _need(data, "solutions", "the chapter", path)).resolve(),
        stubs=(folder / _need(data, "stubs", "the chapter", path)).resolve(),
    )


def _exercise(raw: dict, chapter_id: str, sections: dict, error_sections: dict, folder: Path,
              path: Path) -> ExerciseSpec:
    ex_id = _need(raw, "id", "an exercise", path)
    where = f"{path}: exercise {ex_id}"
    unknown = sorted(set(raw) - _EXERCISE_KEYS)
    if unknown:
        raise ChapterError(f"{where}: unknown setting(s) {', '.join(unknown)} (known: {', '.join(sorted(_SETTINGS))})")
    for key, kind in _SETTINGS.items():
        if key in raw and not (isinstance(raw[key], kind) or kind is float and type(raw[key]) is int):
            raise ChapterError(f"{where}: {key} must be a {kind.__name__}, not {raw[key]!r}")
    section = str(_need(raw, "section", f"exercise {ex_id}", path))
    if section not in sections:
        raise ChapterError(f"{where}: section {section!r} is not among the chapter's sections")
    module = _exercise_module(chapter_id, ex_id, folder)
    functions = declared_checks(module)
    checks = [_check(c, ex_id, functions, folder, where, path) for c in _need(raw, "checks", f"exercise {ex_id}", path)]
    ids = [c.id for c in checks]
    if len(set(ids)) != len(ids):
        raise ChapterError(f"{where}: two checks share an id")
    for extra in sorted(set(functions) - set(ids)):
        raise ChapterError(f"check {extra!r} is declared in {folder / ex_id / '__init__.py'} but {path} has no entry for "
                           f"it: add an [[exercises.checks]] table to {ex_id} with id = \"{extra}\", its category, "
                           f"points, title and hint")
    for c in checks:
        for dep in c.depends:
            if dep not in ids or ids.index(dep) >= ids.index(c.id):
                raise ChapterError(f"{folder / ex_id / '__init__.py'}: check {c.id} depends on {dep!r}, which must be an "
                                   f"earlier check of {ex_id} in {path.name}")
    return ExerciseSpec(
        id=ex_id,
        title=_bilingual(_need(raw, "title", f"exercise {ex_id}", path), f"{where} title"),
        section=section,
        functions=tuple(_need(raw, "functions", f"exercise {ex_id}", path)),
        checks=tuple(checks),
        code=module,
        timeout_s=float(raw.get("timeout_s", 60)),
        import_timeout_s=float(raw.get("import_timeout_s", 20)),
        timed=bool(raw.get("timed", False)),
        needs_reference=bool(raw.get("reference", True)),
        seed_salt=int(raw.get("seed_salt", zlib.crc32(ex_id.encode()))),
        preload=tuple(raw.get("preload", ())),
        sync_cpu_dispatch=bool(raw.get("sync_cpu_dispatch", False)),
        speedup_fraction=float(raw.get("speedup_fraction", 0.5)),
        release_speedup_bar=_speedup_bars(raw.get("release_speedup_bar", {}), raw, where),
        error_sections={"": sections[section], **error_sections},
    )


def _speedup_bars(table: dict, raw: dict, where: str) -> dict[str, float]:
    """``release_speedup_bar``: a speed-up above 1 for functions of the exercise."""
    for name, bar in table.items():
        if name not in raw.get("functions", ()):
            raise ChapterError(f"{where}: release_speedup_bar names {name!r}, which is not one of its functions")
        if isinstance(bar, bool) or not isinstance(bar, (int, float)) or not bar > 1:
            raise ChapterError(f"{where}: release_speedup_bar.{name} must be a speed-up above 1, not {bar!r}")
    return {str(name): float(bar) for name, bar in table.items()}


def _exercise_module(chapter_id: str, ex_id: str, folder: Path) -> ModuleType:
    file = folder / ex_id / "__init__.py"
    if not file.exists():
        raise ChapterError(f"{file} is missing: every exercise of chapter.toml needs a folder of that name "
                           f"whose __init__.py holds its inputs(rng), probe(ctx) and checks (grade dev new-chapter "
                           f"makes one to copy)")
    try:
        module = importlib.import_module(f"grader.chapters.{chapter_id}.{ex_id}")
    except Exception as exc:  # noqa: BLE001 - an author's module that does not import
        raise ChapterError(f"{file} does not import: {type(exc).__name__}: {exc}") from None
    for name in ("inputs", "probe"):
        if not callable(getattr(module, name, None)):
            raise ChapterError(f"{file} defines no {name}(): an exercise module needs inputs(rng) (its hidden "
                               f"inputs) and probe(ctx) (what its child process records)")
    return module


def _check(c: dict, ex_id: str, functions: dict, folder: Path, where: str, path: Path) -> CheckSpec:
    cid = _need(c, "id", f"a check of {ex_id}", path)
    if "depends" in c:
        raise ChapterError(f"{where}: check {cid} has 'depends' in {path.name}; it now sits on the function: "
                           f"@check(\"{cid}\", depends=(...)) in {folder / ex_id / '__init__.py'}")
    unknown = sorted(set(c) - _CHECK_KEYS)
    if unknown:
        raise ChapterError(f"{where}: check {cid} has unknown key(s) {', '.join(unknown)}")
    if cid not in functions:
        raise ChapterError(f"check {cid!r} of {ex_id} is in {path} but not declared: add @check(\"{cid}\") to its "
                           f"function in {folder / ex_id / '__init__.py'}")
    category = _need(c, "category", f"check {cid}", path)
    if category not in CATEGORIES:
        raise ChapterError(f"{where}: check {cid} has category {category!r}; use one of {', '.join(CATEGORIES)}")
    points = _need(c, "points", f"check {cid}", path)
    if isinstance(points, bool) or not isinstance(points, (int, float)) or not 0 < points < float("inf"):
        raise ChapterError(f"{where}: check {cid} must carry positive points (a number), not {points!r}")
    function = functions[cid]
    return CheckSpec(
        id=cid,
        category=category,
        points=float(points),
        title=_bilingual(_need(c, "title", f"check {cid}", path), f"{where}: check {cid} title"),
        hint=_bilingual(_need(c, "hint", f"check {cid}", path), f"{where}: check {cid} hint"),
        depends=tuple(function.check_depends),
        hints={str(name): _bilingual(text, f"{where}: check {cid} hint {name!r}")
               for name, text in c.get("hints", {}).items()},
        layers=tuple(_bilingual(text, f"{where}: check {cid} hint layer {i + 2}")
                     for i, text in enumerate(c.get("layers", ()))),
        function=function,
    )
