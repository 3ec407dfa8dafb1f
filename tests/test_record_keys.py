"""The probe and the checks of each exercise name their records with one set of keys.

Each exercise package declares its record keys once (``KEYS``); its probe records under
them and its checks read under them. Grading the reference solutions (and the wrong
submissions that take the checks' failure paths) shows, for every exercise, that

* every key the probe recorded is one of its declared keys,
* every key a check read is one of its declared keys or the grader's own,
* every declared key is both recorded and read: none is dead, none is misspelt,

so that a mistyped key fails here, never in a student's report.
"""
from __future__ import annotations

import pytest

from conftest import VARIANTS, all_chapters, grade_to_dict, make_submission

import grader.verdicts
from grader.checks import ARRIVALS, NAMES, TIMING
from grader.primitives.timing import READY

pytestmark = pytest.mark.slow

CHAPTERS = all_chapters()
#: every chapter's exercises (the structural tests follow every chapter)
EXERCISES = [(c, ex) for c in CHAPTERS for ex in c.exercises]
IDS = [f"{c.id}/{ex.id}" for c, ex in EXERCISES]
#: wrong submissions whose checks read records a correct one never needs (failure diagnoses)
FAILURE_PATHS = {"ex06_speedup": ["edits_provided", "fast_heavy_callback", "fast_heavy_rejit"]}


def _selected(session) -> dict[str, set[str]]:
    """The exercises of each chapter that the run's selected tests of this file ask about (``-k toy`` in a
    sub-run of the suite: only the toy chapter's), by chapter id."""
    selected: dict[str, set[str]] = {}
    for item in session.items:
        if getattr(item, "module", None) is not None and item.module.__name__ == __name__ and hasattr(item, "callspec"):
            chapter, ex = item.callspec.params["chapter"], item.callspec.params["ex"]
            selected.setdefault(chapter.id, set()).add(ex.id)
    return selected


@pytest.fixture(scope="module")
def keys_seen(request, tmp_path_factory, monkeypatch_module):
    seen: dict[str, dict[str, set[str]]] = {f"{c.id}/{ex.id}": {"recorded": set(), "read": set(),
                                                                "read_correct": set(), "recorded_correct": set()}
                                            for c, ex in EXERCISES}
    original = grader.verdicts.run_checks
    correct = [True]

    def spy(ex, student, reference, ctx, termination):
        results = original(ex, student, reference, ctx, termination)
        entry = seen[f"{ex.package_name.split('.')[2]}/{ex.id}"]  # grader.chapters.<chapter>.<exercise>
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
    selected = _selected(request.session)
    for chapter in CHAPTERS:
        if chapter.id in selected:  # the exercises asked about, each graded in full
            grade_to_dict(chapter.solutions, seed=99, exercises=tuple(sorted(selected[chapter.id])))
    correct[0] = False
    for exercise, names in FAILURE_PATHS.items():
        if exercise not in selected.get("ch4", set()):
            continue
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


@pytest.mark.parametrize("chapter, ex", EXERCISES, ids=IDS)
def test_every_recorded_key_is_declared(keys_seen, chapter, ex):
    keys, exercise = ex.package.KEYS, f"{chapter.id}/{ex.id}"
    undeclared = sorted(k for k in keys_seen[exercise]["recorded"] if keys.kind_of(k) is None)
    assert not undeclared, f"{exercise} records under keys its KEYS does not declare: {undeclared}"


@pytest.mark.parametrize("chapter, ex", EXERCISES, ids=IDS)
def test_every_read_key_is_declared_and_recorded(keys_seen, chapter, ex):
    keys, exercise = ex.package.KEYS, f"{chapter.id}/{ex.id}"
    seen = keys_seen[exercise]
    unknown = sorted(k for k in seen["read"] if not _core(k) and keys.kind_of(k) is None)
    assert not unknown, f"{exercise}'s checks read keys its KEYS does not declare: {unknown}"
    never = sorted(k for k in seen["read_correct"] if k not in seen["recorded_correct"])
    assert not never, f"{exercise}'s checks read keys the probe never recorded for a correct submission: {never}"


@pytest.mark.parametrize("chapter, ex", EXERCISES, ids=IDS)
def test_every_declared_key_is_recorded_and_read(keys_seen, chapter, ex):
    keys, exercise = ex.package.KEYS, f"{chapter.id}/{ex.id}"
    seen = keys_seen[exercise]
    recorded = {keys.kind_of(k) for k in seen["recorded"]}
    read = {keys.kind_of(k) for k in seen["read"]}
    assert not sorted(set(keys.keys) - recorded), f"{exercise}: declared but never recorded"
    assert not sorted(set(keys.keys) - read), f"{exercise}: recorded but never read by a check"


WITH_REFERENCE_KEYS = [(c, ex) for c, ex in EXERCISES if ex.package.KEYS.reference is not None]


@pytest.mark.parametrize("chapter, ex", WITH_REFERENCE_KEYS, ids=[f"{c.id}/{ex.id}" for c, ex in WITH_REFERENCE_KEYS])
def test_the_reference_records_what_its_checks_read_from_it(keys_seen, chapter, ex):
    """``Keys(reference=...)``: the reference's job records those kinds only, and every one is read
    from it (a kind a check reads but the declaration leaves out would be an error in every report)."""
    keys, exercise = ex.package.KEYS, f"{chapter.id}/{ex.id}"
    seen = keys_seen[exercise]
    recorded = {keys.kind_of(k) for k in seen["reference_recorded"] if not _core(k)}
    read = {keys.kind_of(k) for k in seen["reference_read"] if not _core(k)}
    assert recorded == set(keys.reference), f"{exercise}: the reference recorded {sorted(map(str, recorded))}"
    assert read == set(keys.reference), f"{exercise}: the checks read {sorted(map(str, read))} from the reference"
