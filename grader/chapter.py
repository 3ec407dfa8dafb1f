"""A chapter: its metadata file read into typed structures, and where its code lives.

A chapter is a folder ``grader/chapters/<id>/`` holding

* ``chapter.toml``: titles, sections, exercises, and each check's category, points,
  title and hint, in English and Chinese (read here);
* ``messages.toml``: the chapter's own feedback sentences (see :mod:`grader.i18n`);
* ``checks.py``: the hidden checks, run by the grader on plain data, and the hidden
  inputs (imported in the grader's process, never in a child);
* ``probes.py``: what runs next to the student's code in the child process.

Adding chapter 5 adds such a folder; nothing in the grader's core changes.
"""
from __future__ import annotations

import importlib
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from grader.i18n import Bilingual, Catalog, grader_catalog
from grader.results import CATEGORIES

CHAPTERS_DIR = Path(__file__).with_name("chapters")
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class ChapterError(Exception):
    """A chapter folder or metadata file that cannot be used; the message says why."""


class UnknownExercise(ChapterError):
    def __init__(self, item: str, chapter: str, known: str):
        super().__init__(f"no exercise {item!r} in chapter {chapter} (known: {known})")
        self.item, self.chapter, self.known = item, chapter, known


@dataclass(frozen=True)
class CheckSpec:
    id: str
    category: str
    points: float
    title: Bilingual
    #: the check's own hint, for a failure that is this check's one mistake
    hint: Bilingual
    depends: tuple[str, ...] = ()
    #: named hints for the different mistakes the check tells apart (``Fail(hint=name)``)
    hints: dict[str, Bilingual] = field(default_factory=dict)

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
    id: str
    title: Bilingual
    section: str
    functions: tuple[str, ...]
    checks: tuple[CheckSpec, ...]
    timeout_s: float = 60.0
    #: the limit for importing the student's module (code at the top level of the file)
    import_timeout_s: float = 20.0
    #: timed exercises run alone, with the student's and the reference's processes
    #: alive together so the grader can alternate between them
    timed: bool = False
    #: False when the checks judge against the grader's own measurements only
    needs_reference: bool = True
    #: the chapter's own settings for this exercise (other keys of its table)
    params: dict = field(default_factory=dict)
    #: where the chapter teaches each kind of JAX error (``tracer_bool``, ...; ``""``: any
    #: other exception), for hints about exceptions; from the chapter's ``[error_sections]``
    error_sections: dict[str, Bilingual] = field(default_factory=dict)

    @property
    def module(self) -> str:
        return self.id

    @property
    def filename(self) -> str:
        return f"{self.id}.py"

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.checks)


@dataclass(frozen=True)
class Chapter:
    id: str
    title: Bilingual
    sections: dict[str, Bilingual]
    exercises: tuple[ExerciseSpec, ...]
    folder: Path
    solutions: Path
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

    @cached_property
    def checks_module(self) -> Any:
        return importlib.import_module(f"grader.chapters.{self.id}.checks")

    @property
    def probes_module_name(self) -> str:
        return f"grader.chapters.{self.id}.probes"


def available_chapters() -> list[str]:
    return sorted(p.parent.name for p in CHAPTERS_DIR.glob("*/chapter.toml"))


def load_chapter(chapter_id: str) -> Chapter:
    folder = CHAPTERS_DIR / chapter_id
    path = folder / "chapter.toml"
    if not path.exists():
        known = ", ".join(available_chapters()) or "none"
        raise ChapterError(f"unknown chapter {chapter_id!r} (known chapters: {known})")
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ChapterError(f"{path}: {exc}") from None
    return _parse(data, folder, path)


def _bilingual(value: Any, where: str) -> Bilingual:
    if not isinstance(value, dict) or not isinstance(value.get("en"), str) or not isinstance(value.get("zh"), str):
        raise ChapterError(f"{where} needs both an 'en' and a 'zh' text")
    return Bilingual(en=value["en"], zh=value["zh"])


_EXERCISE_KEYS = {"id", "title", "section", "functions", "checks", "timeout_s", "import_timeout_s", "timed",
                  "reference"}


def _parse(data: dict, folder: Path, path: Path) -> Chapter:
    def need(table: dict, key: str, where: str) -> Any:
        if key not in table:
            raise ChapterError(f"{path}: {where} has no {key!r}")
        return table[key]

    sections = {
        str(k): _bilingual(v, f"{path}: section {k}") for k, v in need(data, "sections", "the chapter").items()
    }
    error_sections = {}
    for kind, section in data.get("error_sections", {}).items():
        if str(section) not in sections:
            raise ChapterError(f"{path}: [error_sections] {kind} names section {section!r}, which is not among "
                               f"the chapter's sections")
        error_sections[str(kind)] = sections[str(section)]
    exercises = []
    for raw in need(data, "exercises", "the chapter"):
        ex_id = need(raw, "id", "an exercise")
        where = f"{path}: exercise {ex_id}"
        section = str(need(raw, "section", f"exercise {ex_id}"))
        if section not in sections:
            raise ChapterError(f"{where}: section {section!r} is not among the chapter's sections")
        checks = []
        for c in need(raw, "checks", f"exercise {ex_id}"):
            cid = need(c, "id", f"a check of {ex_id}")
            category = need(c, "category", f"check {cid}")
            if category not in CATEGORIES:
                raise ChapterError(f"{where}: check {cid} has category {category!r}; use one of {', '.join(CATEGORIES)}")
            points = need(c, "points", f"check {cid}")
            if isinstance(points, bool) or not isinstance(points, (int, float)) or not 0 < points < float("inf"):
                raise ChapterError(f"{where}: check {cid} must carry positive points (a number), not {points!r}")
            points = float(points)
            checks.append(CheckSpec(
                id=cid,
                category=category,
                points=points,
                title=_bilingual(need(c, "title", f"check {cid}"), f"{where}: check {cid} title"),
                hint=_bilingual(need(c, "hint", f"check {cid}"), f"{where}: check {cid} hint"),
                depends=tuple(c.get("depends", ())),
                hints={str(name): _bilingual(text, f"{where}: check {cid} hint {name!r}")
                       for name, text in c.get("hints", {}).items()},
            ))
        ids = [c.id for c in checks]
        if len(set(ids)) != len(ids):
            raise ChapterError(f"{where}: two checks share an id")
        for c in checks:
            for dep in c.depends:
                if dep not in ids or ids.index(dep) >= ids.index(c.id):
                    raise ChapterError(f"{where}: check {c.id} depends on {dep!r}, which must be an earlier check")
        exercises.append(ExerciseSpec(
            id=ex_id,
            title=_bilingual(need(raw, "title", f"exercise {ex_id}"), f"{where} title"),
            section=section,
            functions=tuple(need(raw, "functions", f"exercise {ex_id}")),
            checks=tuple(checks),
            timeout_s=float(raw.get("timeout_s", 60)),
            import_timeout_s=float(raw.get("import_timeout_s", 20)),
            timed=bool(raw.get("timed", False)),
            needs_reference=bool(raw.get("reference", True)),
            params={k: v for k, v in raw.items() if k not in _EXERCISE_KEYS},
            error_sections={"": sections[section], **error_sections},
        ))
    ids = [ex.id for ex in exercises]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise ChapterError(f"{path}: exercise id(s) used twice: {', '.join(twice)}")
    return Chapter(
        id=need(data, "id", "the chapter"),
        title=_bilingual(need(data, "title", "the chapter"), f"{path}: title"),
        sections=sections,
        exercises=tuple(exercises),
        folder=folder,
        solutions=(PROJECT_ROOT / need(data, "solutions", "the chapter")).resolve(),
        stubs=(PROJECT_ROOT / need(data, "stubs", "the chapter")).resolve(),
    )
