"""A chapter: its ``chapter.toml`` and its exercise folders read into typed structures.

A chapter is a folder ``<id>/`` (built in under ``grader/chapters/``, or elsewhere on
``GRADER_CHAPTERS``, see :mod:`grader.chapters`) holding

* ``chapter.toml``: what is the chapter's: its id and title, where its solutions and
  stubs are, its sections, where it teaches each kind of JAX error, the order of its
  exercises, and the instructor's settings (``[release_speedup_bar]``);
* one folder per exercise, named by its id (``ex03_static_args/``): its code and its
  words (titles, points, hints, messages, in English and Chinese), read by
  :mod:`grader.exercise_folder`;
* optionally ``messages.toml``, feedback sentences several of its exercises use (see
  :mod:`grader.i18n`), and modules of helpers its exercises share (``common.py``).

The core knows no chapter: adding one adds such a folder, and adding an exercise adds
a folder to it. :func:`load_chapter` holds the files and the code to each other: a check,
an exercise or a message in one place and not the other is an error naming the file,
the id and the fix.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from grader import chapters as chapter_folders
from grader.exercise_folder import (CODE, WORDS, ChapterError, CheckSpec, ExerciseSpec, bilingual, need,
                                    read_exercise)
from grader.i18n import Bilingual, Catalog, grader_catalog, read_toml

__all__ = ["Chapter", "ChapterError", "CheckSpec", "ExerciseSpec", "UnknownExercise", "available_chapters",
           "load_chapter"]


class UnknownExercise(ChapterError):
    def __init__(self, item: str, chapter: str, known: str):
        super().__init__(f"no exercise {item!r} in chapter {chapter} (known: {known})")
        self.item, self.chapter, self.known = item, chapter, known


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
    #: the chapter's folder (``chapter.toml``, its exercises' folders, its shared modules)
    folder: Path
    #: the reference solutions (``solutions`` in the toml)
    solutions: Path
    #: the student's stubs (``stubs`` in the toml)
    stubs: Path
    #: the top-level modules a student's file may import without a warning (``allowed_imports``: the
    #: contract's list; the integrity scan names any other, see :mod:`grader.integrity`)
    allowed_imports: frozenset[str] = frozenset()
    #: the wrong and the differently right answers the grader's tests grade (``variants``: a folder of
    #: ``<exercise>/<name>.py``, each declaring its verdict, see ``tests/test_variants.py``); ``None``: none
    variants: Path | None = None

    @property
    def max_score(self) -> float:
        """The chapter's full marks: every check's points."""
        return sum(ex.max_score for ex in self.exercises)

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
        """The grader's messages, the chapter's (``messages.toml``) and each exercise's; a key
        defined twice is a :class:`ChapterError` naming both files."""
        catalog = grader_catalog()
        messages = self.folder / "messages.toml"
        try:
            if messages.exists():
                catalog.load(messages)
            for ex in self.exercises:
                catalog.add(ex.messages, (ex.folder or self.folder) / WORDS)
        except ValueError as exc:
            raise ChapterError(str(exc)) from None
        return catalog

    @property
    def child_modules(self) -> list[str]:
        """What the child imports before any student code: every exercise package and its preloads."""
        names: list[str] = []
        for ex in self.exercises:
            for name in (ex.package_name, *(f"grader.chapters.{self.id}.{p}" for p in ex.preload)):
                if name not in names:
                    names.append(name)
        return names

    @property
    def search_folder(self) -> Path:
        """The folder that holds this chapter's folder (for the child's import path)."""
        return self.folder.parent

    @property
    def import_folders(self) -> list[Path]:
        """The folders a child process adds to ``grader.chapters``' path so that this chapter's
        modules import there (:func:`grader.chapters.extend`): none for a built-in chapter."""
        return [] if self.search_folder == chapter_folders.BUILT_IN else [self.search_folder]


def available_chapters() -> list[str]:
    found: list[str] = []
    for folder in chapter_folders.search_path():
        found += [p.parent.name for p in folder.glob("*/chapter.toml") if p.parent.name not in found]
    return sorted(found)


#: the chapters this process has read, by folder: the words they were read from (:func:`_words_read`) and the chapter
_read: dict[Path, tuple[bytes, Chapter]] = {}


def load_chapter(chapter_id: str) -> Chapter:
    """Read a chapter and import its exercise packages; :class:`ChapterError` says what is wrong.

    A chapter read before in this process is read again only where its words changed (a TOML file of its folder
    or of an exercise's): a grading asks for its chapter several times (the submission, the reports' next step),
    and a batch's worker for every student; reading it costs about 13 ms each time, its catalog included. Its
    code is read again where Python imports it again (its modules forgotten: :func:`_still_imported`)."""
    folder = next((f / chapter_id for f in chapter_folders.search_path() if (f / chapter_id / "chapter.toml").exists()),
                  None)
    if folder is None:
        known = ", ".join(available_chapters()) or "none"
        raise ChapterError(f"unknown chapter {chapter_id!r} (known chapters: {known})")
    words = _words_read(folder)
    known_chapter = _read.get(folder)
    if known_chapter is not None and known_chapter[0] == words and _still_imported(known_chapter[1]):
        chapter_folders.extend([folder.parent])
        return known_chapter[1]
    path = folder / "chapter.toml"
    try:
        data = read_toml(path)
    except tomllib.TOMLDecodeError as exc:
        raise ChapterError(f"{path}: {exc}") from None
    chapter_folders.extend([folder.parent])
    chapter = _parse(data, folder, path)
    chapter.catalog  # noqa: B018 - a message key two files define is the author's error, said here in one line
    _read[folder] = (words, chapter)
    return chapter


def _still_imported(chapter: Chapter) -> bool:
    """Whether each of the chapter's exercise packages is still the module Python has imported under its name
    (a process that forgets them, ``del sys.modules[...]``, asks for them anew)."""
    import sys

    return all(sys.modules.get(ex.package_name) is ex.package for ex in chapter.exercises)


def _words_read(folder: Path) -> bytes:
    """A digest of every TOML file of a chapter's folder and its exercises' folders (names and bytes): what
    :func:`_parse` reads besides the exercises' code."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted([*folder.glob("*.toml"), *folder.glob("*/*.toml")]):
        try:
            digest.update(f"{path.relative_to(folder)}\0".encode() + path.read_bytes() + b"\0")
        except OSError:
            digest.update(f"{path.relative_to(folder)}\0?\0".encode())
    return digest.digest()


# ------------------------------------------------------------------ reading chapter.toml
#: what chapter.toml may hold
_CHAPTER_KEYS = {"id", "title", "solutions", "stubs", "sections", "error_sections", "exercises", "release_speedup_bar",
                 "allowed_imports", "variants"}


def _parse(data: dict, folder: Path, path: Path) -> Chapter:
    chapter_id = need(data, "id", "the chapter", path)
    unknown = sorted(set(data) - _CHAPTER_KEYS)
    if unknown:
        raise ChapterError(f"{path}: unknown key(s) {', '.join(unknown)} "
                           f"(a chapter holds {', '.join(sorted(_CHAPTER_KEYS))}"
                           f"; an exercise's settings are in its folder's {WORDS})")
    sections = {str(k): bilingual(v, f"{path}: section {k}")
                for k, v in need(data, "sections", "the chapter", path).items()}
    error_sections = {}
    for kind, section in data.get("error_sections", {}).items():
        if str(section) not in sections:
            raise ChapterError(f"{path}: [error_sections] {kind} names section {section!r}, which is not among "
                               f"the chapter's sections")
        error_sections[str(kind)] = sections[str(section)]
    order = _order(need(data, "exercises", "the chapter", path), folder, path)
    bars = data.get("release_speedup_bar", {})
    for name in sorted(set(bars) - set(order)):
        raise ChapterError(f"{path}: [release_speedup_bar] names {name!r}, which is not one of the chapter's "
                           f"exercises ({', '.join(order)})")
    exercises = [read_exercise(folder / ex_id, _words(folder / ex_id), chapter_id, sections, error_sections,
                               bars.get(ex_id, {})) for ex_id in order]
    _no_message_twice(exercises)
    _no_salt_twice(exercises)
    return Chapter(
        id=chapter_id,
        title=bilingual(need(data, "title", "the chapter", path), f"{path}: title"),
        sections=sections,
        exercises=tuple(exercises),
        folder=folder,
        solutions=(folder / need(data, "solutions", "the chapter", path)).resolve(),
        stubs=(folder / need(data, "stubs", "the chapter", path)).resolve(),
        allowed_imports=_allowed_imports(data.get("allowed_imports", []), path),
        variants=(folder / data["variants"]).resolve() if isinstance(data.get("variants"), str) else None,
    )


def _allowed_imports(names: Any, path: Path) -> frozenset[str]:
    """chapter.toml's ``allowed_imports``: top-level module names (``jax``, ``numpy``, ...)."""
    if not isinstance(names, list) or not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise ChapterError(f"{path}: allowed_imports must list top-level module names: allowed_imports = "
                           f"[\"jax\", \"numpy\", ...]")
    return frozenset(names)


def _order(order: Any, folder: Path, path: Path) -> list[str]:
    """chapter.toml's ``exercises``: the ids of the exercise folders, in order; every one of them."""
    if isinstance(order, list) and order and all(isinstance(x, dict) for x in order):
        raise ChapterError(f"{path}: [[exercises]] tables are the old layout: each exercise is now a folder "
                           f"beside chapter.toml, named by its id, holding its code ({CODE}) and its words "
                           f"({WORDS}: the table's keys, its [[checks]]); list their ids in order: exercises = "
                           f"[\"ex01_...\", ...] (docs/authoring.md)")
    if not isinstance(order, list) or not all(isinstance(x, str) for x in order):
        raise ChapterError(f"{path}: exercises must list the exercises' ids in order: exercises = [\"ex01_...\", ...]")
    for ex_id in order:
        if not ex_id.isidentifier() or ex_id != ex_id.lower():
            raise ChapterError(f"{path}: exercise id {ex_id!r} must be a lower-case Python name (letters, digits, "
                               f"_): it names the exercise's folder, its module and the student's file")
    twice = sorted({i for i in order if order.count(i) > 1})
    if twice:
        raise ChapterError(f"{path}: exercise id(s) listed twice in exercises: {', '.join(twice)}")
    for ex_id in order:
        if not (folder / ex_id / WORDS).is_file():
            old = folder / f"{ex_id}.py"
            how = (f"move its module there (git mv {old.name} {ex_id}/{CODE}) and its words into {ex_id}/{WORDS}"
                   if old.is_file() else "copy another exercise's folder under this name, or remove it from "
                   "exercises")
            raise ChapterError(f"{path} lists exercise {ex_id!r}, but {folder / ex_id / WORDS} is missing: {how}")
    unlisted = sorted(p.parent.name for p in folder.glob(f"*/{WORDS}") if p.parent.name not in order)
    if unlisted:
        raise ChapterError(f"{folder / unlisted[0] / WORDS} is an exercise that {path} does not list: add "
                           f"\"{unlisted[0]}\" to its exercises (in the report's order), or move the folder out of "
                           f"the chapter")
    return order


def _words(folder: Path) -> dict:
    path = folder / WORDS
    try:
        return read_toml(path)
    except tomllib.TOMLDecodeError as exc:
        raise ChapterError(f"{path}: {exc}") from None


def _no_message_twice(exercises: list[ExerciseSpec]) -> None:
    """A message key means one sentence: two exercises may not both define it."""
    seen: dict[str, ExerciseSpec] = {}
    for ex in exercises:
        for key in ex.messages:
            if key in seen:
                first = seen[key]
                raise ChapterError(f"{ex.folder / WORDS}: message {key!r} is defined in {first.folder / WORDS} "
                                   f"too: give this exercise's messages keys of its own (rename it here and in "
                                   f"T(\"{key}\", ...) of {ex.folder / CODE})")
            seen[key] = ex


def _no_salt_twice(exercises: list[ExerciseSpec]) -> None:
    """Each exercise draws its hidden inputs from a stream of its own (a copied folder keeps its original's salt)."""
    seen: dict[int, ExerciseSpec] = {}
    for ex in exercises:
        first = seen.setdefault(ex.seed_salt, ex)
        if first is not ex:
            raise ChapterError(f"{ex.folder / WORDS}: seed_salt = {ex.seed_salt} is {first.id}'s too, so both would "
                               f"draw the same hidden inputs: give {ex.id} a seed_salt of its own (or none: it then "
                               f"comes from its id)")
