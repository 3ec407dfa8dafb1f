"""Hints in layers, for a learner alone with the chapter.

A failed check shows a nudge (its hint, or the named hint of the mistake seen). ``grade
PATH --hint CHECK`` shows the next layer each time it is run, from the check's
``layers`` in its exercise's ``exercise.toml``: why it matters under ``jax.jit``, then a worked
explanation of the concept, never the answer. How far a learner has gone is kept in
``hints.json`` beside the reports, so the next layer is the next one, run after run.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from grader.chapter import Chapter, CheckSpec, ExerciseSpec, UnknownExercise
from grader.i18n import Bilingual, T, Text, TextError

STATE_FILE = "hints.json"


class HintError(TextError):
    """The check asked for cannot be found; ``text`` says why in the user's words."""


@dataclass
class Layer:
    """One layer of a check's hint, as ``--hint`` shows it."""

    #: ``ex02_where/piecewise.values``
    key: str
    #: the exercise
    exercise: ExerciseSpec
    #: the check
    check: CheckSpec
    #: which layer this is (1: the nudge)
    number: int
    #: how many layers the check's hint has
    total: int
    #: the text of the layer
    text: Bilingual | Text
    #: the check's status in the last report (``None``: not graded yet)
    status: str | None


def find_check(chapter: Chapter, wanted: str) -> tuple[ExerciseSpec, CheckSpec]:
    """The check named ``wanted``: ``piecewise.values`` (when one exercise has it),
    ``ex02/compiles``, ``ex02_where/compiles`` or ``2/compiles``."""
    exercise_part, _, check_part = wanted.strip().rpartition("/")
    try:
        exercises = chapter.select([exercise_part]) if exercise_part else list(chapter.exercises)
    except UnknownExercise as exc:
        raise HintError(T("error.unknown_exercise", item=exc.item, chapter=exc.chapter, known=exc.known)) from None
    found = [(ex, c) for ex in exercises for c in ex.checks if c.id == check_part]
    if len(found) == 1:
        return found[0]
    if found:  # the same check id in several exercises: name those
        raise HintError(T("hint_layers.ambiguous", check=wanted,
                          known=", ".join(f"{ex.id.split('_')[0]}/{c.id}" for ex, c in found)))
    known = ", ".join(f"{ex.id.split('_')[0]}/{c.id}" for ex in exercises for c in ex.checks) if exercise_part \
        else ", ".join(ex.id for ex in exercises)
    raise HintError(T("hint_layers.unknown_check", check=wanted, known=known))


def next_layer(chapter: Chapter, wanted: str, report_dir: Path) -> Layer:
    """The next layer of ``wanted``'s hint for this learner, and remember that it was shown."""
    ex, check = find_check(chapter, wanted)
    key = f"{ex.id}/{check.id}"
    state_path = report_dir / STATE_FILE
    state = _read(state_path)
    layers = _layers(check, _last_result(report_dir, ex.id, check.id))
    shown = min(int(state.get(key, 1)) + 1, len(layers))  # the nudge (layer 1) came with the report
    state[key] = shown
    _write(state_path, state)
    status = (_last_result(report_dir, ex.id, check.id) or {}).get("status")
    return Layer(key, ex, check, shown, len(layers), layers[shown - 1], status)


def _layers(check: CheckSpec, last: dict | None) -> list[Bilingual | Text]:
    """The nudge the learner saw (the named hint of their last failure, else the check's own), then the layers."""
    nudge: Bilingual | Text = check.hint
    hint_id = (last or {}).get("hint_id", "")
    if hint_id.startswith("check:") and hint_id[6:] in check.named_hints:
        nudge = check.named_hints[hint_id[6:]]
    return [nudge, *check.hint_layers]


def _last_result(report_dir: Path, exercise: str, check: str) -> dict | None:
    """The check's entry in the newest report in ``report_dir`` that graded it."""
    reports = sorted((p for p in (report_dir / "report.json", report_dir / "report.partial.json") if p.exists()),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    for path in reports:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for ex in data.get("exercises", []):
            if ex.get("id") == exercise:
                return next((c for c in ex.get("checks", []) if c.get("id") == check), None)
    return None


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write(path: Path, state: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only folder: the layer is shown anyway, the next run starts again
