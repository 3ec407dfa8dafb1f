"""An exercise folder: its words read into typed structures, joined to its code.

An exercise of a chapter is a folder named by its id (``ch4/ex03_static_args/``), listed in
order by its chapter's ``chapter.toml`` (see :mod:`grader.chapter`). It holds

* its code, a Python package: ``__init__.py`` (with any modules it needs beside it) holds
  its hidden inputs (``inputs(rng)``), what its child process records (``probe(ctx)``), its
  checks (declared with :func:`grader.checks.check`) and, for a timed exercise, its driver
  (``drive(sides, inputs, budget)``);
* its words, ``exercise.toml``, in English and Chinese: its title, section, functions and
  settings; a ``[[checks]]`` table per check (category, points, title, hint, its
  ``hint_layers`` and ``[checks.named_hints]``); its own feedback sentences, ``[messages."key"]``.

:func:`read_exercise` holds the two to each other: a check in one and not the other is
an error naming the file, the id and the fix; and the code to its contract,
:class:`grader.exercise_package.ExercisePackage` (a function missing or taking other arguments is an
error naming the file, what is wrong and the fix). Copying such a folder under another name
and listing it in ``chapter.toml`` adds an exercise.
"""
from __future__ import annotations

import importlib
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np

from grader import exercise_package
from grader.checks import CheckFn, declared_checks
from grader.child import quick_compile
from grader.i18n import LANGS, Bilingual, Text
from grader.results import CATEGORIES

#: the file of an exercise's words, in its folder
WORDS = "exercise.toml"
#: the module of an exercise's code, in its folder
CODE = "__init__.py"


class ChapterError(Exception):
    """A chapter folder, metadata file or exercise package that cannot be used; the message says why."""


@dataclass(frozen=True)
class CheckSpec:
    """One hidden check: its ``[[checks]]`` entry in ``exercise.toml`` joined to the function that judges it."""

    #: the check's id in its exercise (``piecewise.values``)
    id: str
    #: one of :data:`grader.results.CATEGORIES`: ``numeric``, ``compile``, ``purity``,
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
    #: hints for the different mistakes the check tells apart, by name (``Fail(hint=name)``)
    named_hints: dict[str, Bilingual] = field(default_factory=dict)
    #: the hint's further layers, shown one at a time by ``grade ... --hint CHECK``: after the
    #: nudge (``hint`` or a named hint), why it matters under ``jax.jit``, then a worked
    #: explanation of the concept (never the answer's code)
    hint_layers: tuple[Bilingual, ...] = ()
    #: the function that judges, ``(student, reference, ctx) -> measured`` (raises ``Fail``)
    function: CheckFn | None = None

    def resolve_hint(self, hint: str | Text | None) -> tuple[Bilingual | Text, str]:
        """The hint to show for ``Fail(hint=...)``, and its id for the report (``hint_id``).

        ``None`` is the check's own hint (id ``check``); a name, one of its named hints
        (id ``check:<name>``); a :class:`~grader.i18n.Text`, a hint of the grader's own
        (id: its message key).
        """
        if hint is None:
            return self.hint, "check"
        if isinstance(hint, str):
            if hint not in self.named_hints:
                raise KeyError(f"check {self.id} has no hint named {hint!r} in its exercise.toml's named_hints")
            return self.named_hints[hint], f"check:{hint}"
        return hint, getattr(hint, "key", "text")


@dataclass(frozen=True)
class ExerciseSpec:
    """One exercise: what its ``exercise.toml`` says of it, and its code."""

    #: the exercise's id, its folder's name, also the student's module name (``ex02_where``)
    id: str
    #: its title, in both languages
    title: Bilingual
    #: the section of the course text it practises (a key of the chapter's ``sections``)
    section: str
    #: the module-level names the student writes
    functions: tuple[str, ...]
    #: its checks, in the order of ``exercise.toml`` (the report's order)
    checks: tuple[CheckSpec, ...]
    #: the exercise package: its code (inputs, probe, checks, driver), imported in the grader
    package: ModuleType
    #: the wall-clock limit for the student's job, in seconds
    timeout_s: float = 60.0
    #: the limit for importing the student's module (code at the top level of the file)
    import_timeout_s: float = 20.0
    #: timed exercises run alone, with the student's and the reference's processes alive
    #: together so that the driver can alternate between them
    timed: bool = False
    #: its jobs mostly sleep (a timing harness's instruments): a timed exercise may be timed beside it
    #: when the grading has two cores or more (:func:`grader.scheduling.run_all`)
    waits: bool = False
    #: how many jobs share the student's probe, side by side (each does its parts: the probe's
    #: ``ctx.does(i)``), for a probe that mostly waits; only where no reference runs
    parts: int = 1
    #: its checks measure the device (timings, speed-ups): where the device admits one process at a
    #: time (a TPU) its jobs take their turns there and the other exercises' jobs run on the CPU beside
    #: them (:mod:`grader.runner.devices`); by default, a timed exercise's or one with a ``harness`` or
    #: ``speedup`` check
    device: bool = False
    #: ``False`` when the checks judge against the grader's own measurements only
    needs_reference: bool = True
    #: mixed with the run's seed to draw this exercise's hidden inputs
    seed_salt: int = 0
    #: modules of the chapter the child imports before the student's (provided code)
    preload: tuple[str, ...] = ()
    #: run JAX's CPU client with synchronous dispatch in this exercise's jobs (timing)
    sync_cpu_dispatch: bool = False
    #: compile this exercise's programs with XLA's classic CPU emitters, unoptimized (a fifth of the
    #: CPU, the same values but for their last bits: :mod:`grader.child.quick_compile`); by default,
    #: unless the exercise times what it compiles
    quick_compile: bool = False
    #: compile quickly as above until the probe's timing begins (``ProbeContext.timing_begins``, which
    #: ``timing.serve_timing`` calls in any case), the default way from there on: a timed exercise whose
    #: untimed checks come first (ex06)
    quick_until_timed: bool = False
    #: the bar of a speed-up check: this fraction of the reference's gain (``speedup - 1``)
    speedup_fraction: float = 0.5
    #: a course release's preview has no reference to measure: the speed-up over the
    #: provided eager code each function must reach there, by function name (the
    #: instructor's bar, from the chapter's ``[release_speedup_bar]``; final grading uses
    #: ``speedup_fraction`` of the reference's gain)
    release_speedup_bar: dict[str, float] = field(default_factory=dict)
    #: where the chapter teaches each kind of JAX error (``tracer_bool``, ...; ``""``: any
    #: other exception), for hints about exceptions; from the chapter's ``[error_sections]``
    error_sections: dict[str, Bilingual] = field(default_factory=dict)
    #: the exercise's folder (its code and its ``exercise.toml``)
    folder: Path | None = None
    #: its own feedback sentences, by message key: ``{"en": ..., "zh": ...}``
    messages: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def student_module(self) -> str:
        """The student's module for this exercise (``ex02_where``)."""
        return self.id

    @property
    def filename(self) -> str:
        """The student's file for this exercise (``ex02_where.py``)."""
        return f"{self.id}.py"

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.checks)

    @property
    def package_name(self) -> str:
        """The import name of the exercise package, for the child process."""
        return self.package.__name__

    def inputs(self, seed: int) -> dict:
        """The hidden inputs of this exercise for a run's seed (the same for both sides)."""
        return self.package.inputs(np.random.default_rng([seed, self.seed_salt]))

    @property
    def driver(self) -> Callable | None:
        """The timing driver of a timed exercise (``drive(sides, inputs, budget)``), if any."""
        return getattr(self.package, "drive", None)


# ------------------------------------------------------------------ reading the folder
def bilingual(value: Any, where: str) -> Bilingual:
    if not isinstance(value, dict) or not isinstance(value.get("en"), str) or not isinstance(value.get("zh"), str):
        raise ChapterError(f"{where} needs both an 'en' and a 'zh' text")
    return Bilingual(en=value["en"], zh=value["zh"])


def need(table: dict, key: str, where: str, path: Path) -> Any:
    if key not in table:
        raise ChapterError(f"{path}: {where} has no {key!r}")
    return table[key]


#: the most jobs an exercise's student probe is shared by (``parts``)
MOST_PARTS = 4
#: an exercise's settings in its exercise.toml, and their types
_SETTINGS = {"timeout_s": float, "import_timeout_s": float, "timed": bool, "waits": bool, "parts": int,
             "reference": bool, "seed_salt": int, "preload": list, "sync_cpu_dispatch": bool,
             "speedup_fraction": float, "quick_compile": bool, "quick_until_timed": bool, "device": bool}
_EXERCISE_KEYS = {"title", "section", "functions", "checks", "messages", *_SETTINGS}
_CHECK_KEYS = {"id", "category", "points", "title", "hint", "named_hints", "hint_layers"}
#: a check's keys of an earlier layout, and what they are now
_RENAMED = {"hints": "[checks.named_hints]", "layers": "hint_layers"}


def read_exercise(folder: Path, data: dict, chapter_id: str, sections: dict, error_sections: dict,
                  release_bar: dict) -> ExerciseSpec:
    """The exercise of ``folder`` from its words (``data``, its ``exercise.toml`` read) and its code.

    ``release_bar`` is the chapter's ``[release_speedup_bar]`` entry for this exercise.
    """
    ex_id, path = folder.name, folder / WORDS
    where = f"{path}: exercise {ex_id}"
    _nothing_misplaced(data, ex_id, path)
    unknown = sorted(set(data) - _EXERCISE_KEYS)
    if unknown:
        raise ChapterError(f"{where}: unknown setting(s) {', '.join(unknown)} (known: {', '.join(sorted(_SETTINGS))})")
    for key, kind in _SETTINGS.items():
        if key in data and not (isinstance(data[key], kind) or kind is float and type(data[key]) is int):
            raise ChapterError(f"{where}: {key} must be a {kind.__name__}, not {data[key]!r}")
    parts = data.get("parts", 1)
    if isinstance(parts, bool) or not 1 <= parts <= MOST_PARTS or parts > 1 and data.get("reference", True):
        raise ChapterError(f"{where}: parts = {parts} must be 1 to {MOST_PARTS}, and more than 1 only with "
                           f"reference = false (a reference's run is one job)")
    section = str(need(data, "section", f"exercise {ex_id}", path))
    if section not in sections:
        raise ChapterError(f"{where}: section {section!r} is not among the chapter's sections "
                           f"(chapter.toml's [sections]: {', '.join(sections)})")
    module = _exercise_module(chapter_id, folder)
    _satisfies_contract(module, folder, bool(data.get("timed", False)))
    functions = declared_checks(module)
    raw_checks = need(data, "checks", f"exercise {ex_id}", path)
    checks = [_check(c, ex_id, functions, folder, where, path) for c in raw_checks]
    ids = [c.id for c in checks]
    if len(set(ids)) != len(ids):
        raise ChapterError(f"{where}: two checks share an id")
    for extra in sorted(set(functions) - set(ids)):
        raise ChapterError(f"check {extra!r} is declared in {folder / CODE} but {path} has no entry for it: add a "
                           f"[[checks]] table with id = \"{extra}\", its category, points, title and hint")
    for c in checks:
        for dep in c.depends:
            if dep not in ids or ids.index(dep) >= ids.index(c.id):
                raise ChapterError(f"{folder / CODE}: check {c.id} depends on {dep!r}, which must be an earlier "
                                   f"check of {ex_id} in {path.name}")
    return ExerciseSpec(
        id=ex_id,
        title=bilingual(need(data, "title", f"exercise {ex_id}", path), f"{where} title"),
        section=section,
        functions=tuple(need(data, "functions", f"exercise {ex_id}", path)),
        checks=tuple(checks),
        package=module,
        timeout_s=float(data.get("timeout_s", 60)),
        import_timeout_s=float(data.get("import_timeout_s", 20)),
        timed=bool(data.get("timed", False)),
        waits=bool(data.get("waits", False)),
        parts=int(parts),
        device=bool(data.get("device", bool(data.get("timed", False))
                             or bool({"harness", "speedup"} & {c.category for c in checks}))),
        needs_reference=bool(data.get("reference", True)),
        seed_salt=int(data.get("seed_salt", zlib.crc32(ex_id.encode()))),
        preload=tuple(data.get("preload", ())),
        sync_cpu_dispatch=bool(data.get("sync_cpu_dispatch", False)),
        quick_compile=quick_compile.setting(data, bool(data.get("timed", False)), {c.category for c in checks}),
        quick_until_timed=bool(data.get("quick_until_timed", False)),
        speedup_fraction=float(data.get("speedup_fraction", 0.5)),
        release_speedup_bar=_speedup_bars(release_bar, data, folder),
        error_sections={"": sections[section], **error_sections},
        folder=folder,
        messages=_messages(data.get("messages", {}), path),
    )


def _nothing_misplaced(data: dict, ex_id: str, path: Path) -> None:
    """What an exercise.toml may not hold: its id (the folder's name), the instructor's bar (chapter.toml's)."""
    misplaced = {
        "id": f"an exercise's id is its folder's name ({ex_id}): remove id = {data.get('id')!r} (to rename the "
              f"exercise, rename its folder and its entry in chapter.toml's exercises)",
        "release_speedup_bar": f"release_speedup_bar is the instructor's bar, set in chapter.toml: move it there as "
                               f"[release_speedup_bar] {ex_id} = {{ ... }}",
    }
    for key in sorted(set(misplaced) & set(data)):
        raise ChapterError(f"{path}: {misplaced[key]}")


def _speedup_bars(table: Any, data: dict, folder: Path) -> dict[str, float]:
    """The chapter's ``release_speedup_bar`` for this exercise: a speed-up above 1 for functions of it."""
    ex_id = folder.name
    where = f"{folder.parent / 'chapter.toml'}: [release_speedup_bar] {ex_id}"
    if not isinstance(table, dict):
        raise ChapterError(f"{where} must be a table of speed-ups by function, {ex_id} = {{ name = 2.0 }}")
    for name, bar in table.items():
        if name not in data.get("functions", ()):
            raise ChapterError(f"{where} names {name!r}, which is not one of the exercise's functions")
        if isinstance(bar, bool) or not isinstance(bar, (int, float)) or not bar > 1:
            raise ChapterError(f"{where}: {name} must be a speed-up above 1, not {bar!r}")
    return {str(name): float(bar) for name, bar in table.items()}


def _messages(table: Any, path: Path) -> dict[str, dict[str, str]]:
    """The exercise's ``[messages."key"]`` tables, each with its text in every language."""
    if not isinstance(table, dict):
        raise ChapterError(f"{path}: messages must be tables, [messages.\"key\"] with en and zh")
    out = {}
    for key, langs in table.items():
        if not isinstance(langs, dict) or not all(isinstance(langs.get(lang), str) for lang in LANGS):
            raise ChapterError(f"{path}: message {key!r} needs an 'en' and a 'zh' text: [messages.\"{key}\"] "
                               f"en = \"...\" zh = \"...\"")
        out[str(key)] = {lang: langs[lang] for lang in LANGS}
    return out


def _exercise_module(chapter_id: str, folder: Path) -> ModuleType:
    file = folder / CODE
    if not file.exists():
        raise ChapterError(f"{file} is missing: an exercise's folder holds its code there, with its inputs(rng), "
                           f"probe(ctx) and checks (copy another exercise's folder to start from)")
    try:
        module = importlib.import_module(f"grader.chapters.{chapter_id}.{folder.name}")
    except Exception as exc:  # noqa: BLE001 - an author's module that does not import
        raise ChapterError(f"{file} does not import: {type(exc).__name__}: {exc}") from None
    return module


def _satisfies_contract(module: ModuleType, folder: Path, timed: bool) -> None:
    """The exercise package holds what :class:`grader.exercise_package.ExercisePackage` asks (and a timed one's
    driver), each function taking its arguments: else the first thing wrong, naming the file and the fix."""
    for problem in exercise_package.problems(module, timed=timed):
        raise ChapterError(f"{folder / CODE} {problem}")


def _check(c: dict, ex_id: str, functions: dict, folder: Path, where: str, path: Path) -> CheckSpec:
    cid = need(c, "id", f"a check of {ex_id}", path)
    if "depends" in c:
        raise ChapterError(f"{where}: check {cid} has 'depends' in {path.name}; it sits on the function: "
                           f"@check(\"{cid}\", depends=(...)) in {folder / CODE}")
    for old in sorted(set(c) & set(_RENAMED)):
        raise ChapterError(f"{where}: check {cid} has {old!r}, which is now {_RENAMED[old]}: rename it there")
    unknown = sorted(set(c) - _CHECK_KEYS)
    if unknown:
        raise ChapterError(f"{where}: check {cid} has unknown key(s) {', '.join(unknown)}")
    if cid not in functions:
        raise ChapterError(f"check {cid!r} of {ex_id} is in {path} but not declared: add @check(\"{cid}\") to its "
                           f"function in {folder / CODE}")
    category = need(c, "category", f"check {cid}", path)
    if category not in CATEGORIES:
        raise ChapterError(f"{where}: check {cid} has category {category!r}; use one of {', '.join(CATEGORIES)}")
    points = need(c, "points", f"check {cid}", path)
    if isinstance(points, bool) or not isinstance(points, (int, float)) or not 0 < points < float("inf"):
        raise ChapterError(f"{where}: check {cid} must carry positive points (a number), not {points!r}")
    function = functions[cid]
    return CheckSpec(
        id=cid,
        category=category,
        points=float(points),
        title=bilingual(need(c, "title", f"check {cid}", path), f"{where}: check {cid} title"),
        hint=bilingual(need(c, "hint", f"check {cid}", path), f"{where}: check {cid} hint"),
        depends=tuple(function.check_depends),
        named_hints={str(name): bilingual(text, f"{where}: check {cid} hint {name!r}")
                     for name, text in c.get("named_hints", {}).items()},
        hint_layers=tuple(bilingual(text, f"{where}: check {cid} hint layer {i + 2}")
                          for i, text in enumerate(c.get("hint_layers", ()))),
        function=function,
    )
