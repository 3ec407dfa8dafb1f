"""The probe and the checks of each exercise name their records with one set of keys.

Each exercise module declares its record keys once (``KEYS``); its probe records under
them and its checks read under them. Grading the reference solutions (and the wrong
submissions that take the checks' failure paths) shows, for every exercise, that

* every key the probe recorded is one of its declared keys,
* every key a check read is one of its declared keys or the grader's own,
* every declared key is both recorded and read: none is dead, none is misspelt,

so that a mistyped key fails here, never in a student's report.
"""
from __future__ import annotations

import pytest

from conftest import SOLUTIONS, VARIANTS, grade_to_dict, make_submission

import grader.verdicts
from grader.chapter import load_chapter
from grader.checks import ARRIVALS, NAMES, TIMING
from grader.primitives.timing import READY

pytestmark = pytest.mark.slow

CHAPTER = load_chapter("ch4")
#: wrong submissions whose checks read records a correct one never needs (failure diagnoses)
FAILURE_PATHS = {"ex06_speedup": ["edits_provided", "fast_heavy_callback", "fast_heavy_rejit"]}


@pytest.fixture(scope="module")
def keys_seen(tmp_path_factory, monkeypatch_module):
    seen: dict[str, dict[str, set[str]]] = {ex.id: {"recorded": set(), "read": set(), "read_correct": set(),
                                                    "recorded_correct": set()} for ex in CHAPTER.exercises}
    original = grader.verdicts.run_checks
    correct = [True]

    def spy(ex, student, reference, ctx, termination):
        results = original(ex, student, reference, ctx, termination)
        entry = seen[ex.id]
        entry.setdefault("reference_recorded", set()).update(reference.data)
        entry.setdefault("reference_read", set()).update(reference.read)
        for side in (student, reference):
            entry["recorded"] |= {k for k in side.data if not _core(k)}
            entry["read"] |= side.read
            if correct[0]:
                entry["recorded_correct"] |= set(side.data)
                entry["read_correct"] |= side.read
        return results

    monkeypatch_module.setattr(grader.verdicts, "run_checks", spy)
    grade_to_dict(SOLUTIONS, seed=99)
    correct[0] = False
    for exercise, names in FAILURE_PATHS.items():
        for name in names:
            path = make_submission(tmp_path_factory.mktemp(name), {exercise: VARIANTS / exercise / f"{name}.py"})
            grade_to_dict(path, seed=99, exercises=(exercise,))
    return seen


@pytest.fixture(scope="module")
def monkeypatch_module():
    patcher = pytest.MonkeyPatch()
    yield patcher
    patcher.undo()


def _core(key: str) -> bool:
    """Records of the grader's own (names, arrivals, timings) and of a primitive's protocol (timing's ready)."""
    return key in (ARRIVALS, TIMING, READY) or NAMES.matches(key)


@pytest.mark.parametrize("exercise", [ex.id for ex in CHAPTER.exercises])
def test_every_recorded_key_is_declared(keys_seen, exercise):
    keys = CHAPTER.exercise(exercise).package.KEYS
    undeclared = sorted(k for k in keys_seen[exercise]["recorded"] if keys.kind_of(k) is None)
    assert not undeclared, f"{exercise} records under keys its KEYS does not declare: {undeclared}"


@pytest.mark.parametrize("exercise", [ex.id for ex in CHAPTER.exercises])
def test_every_read_key_is_declared_and_recorded(keys_seen, exercise):
    keys = CHAPTER.exercise(exercise).package.KEYS
    seen = keys_seen[exercise]
    unknown = sorted(k for k in seen["read"] if not _core(k) and keys.kind_of(k) is None)
    assert not unknown, f"{exercise}'s checks read keys its KEYS does not declare: {unknown}"
    never = sorted(k for k in seen["read_correct"] if k not in seen["recorded_correct"])
    assert not never, f"{exercise}'s checks read keys the probe never recorded for a correct submission: {never}"


@pytest.mark.parametrize("exercise", [ex.id for ex in CHAPTER.exercises])
def test_every_declared_key_is_recorded_and_read(keys_seen, exercise):
    keys = CHAPTER.exercise(exercise).package.KEYS
    seen = keys_seen[exercise]
    recorded = {keys.kind_of(k) for k in seen["recorded"]}
    read = {keys.kind_of(k) for k in seen["read"]}
    assert not sorted(set(keys.keys) - recorded), f"{exercise}: declared but never recorded"
    assert not sorted(set(keys.keys) - read), f"{exercise}: recorded but never read by a check"


@pytest.mark.parametrize("exercise", [ex.id for ex in CHAPTER.exercises if ex.package.KEYS.reference is not None])
def test_the_reference_records_what_its_checks_read_from_it(keys_seen, exercise):
    """``Keys(reference=...)``: the reference's job records those kinds only, and every one is read
    from it (a kind a check reads but the declaration leaves out would be an error in every report)."""
    keys = CHAPTER.exercise(exercise).package.KEYS
    seen = keys_seen[exercise]
    recorded = {keys.kind_of(k) for k in seen["reference_recorded"] if not _core(k)}
    read = {keys.kind_of(k) for k in seen["reference_read"] if not _core(k)}
    assert recorded == set(keys.reference), f"{exercise}: the reference recorded {sorted(map(str, recorded))}"
    assert read == set(keys.reference), f"{exercise}: the checks read {sorted(map(str, read))} from the reference"
