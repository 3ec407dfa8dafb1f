"""Every check fails the mistake it exists for, and only that check; correct answers
written differently from the reference score full marks.

Each file under ``variants/ch4/<exercise>/`` is one submission module whose header
declares the checks it must fail (``# expect-failed:``) and those that must be
skipped because of it (``# expect-skipped:``); every other check must pass. An empty
``expect-failed`` is a correct answer. ``# expect-hint: CHECK=HINT_ID`` names the hint
a failed check must show for this mistake (the check's own hint, ``check``, when not
named): every hint is checked against a variant that makes the mistake it names. Variants
are graded in rounds: one grading run takes one variant of every exercise, the rest of the
submission being the reference's.
"""
from __future__ import annotations

import re

import pytest

from conftest import exercise, load_variants, statuses

from grader.chapter import load_chapter

VARIANT_LIST = load_variants()
CHAPTER = load_chapter("ch4")


def _rounds() -> list[dict]:
    by_exercise: dict[str, list] = {}
    for v in VARIANT_LIST:
        by_exercise.setdefault(v.exercise, []).append(v)
    rounds = []
    for i in range(max(len(vs) for vs in by_exercise.values())):
        rounds.append({ex: vs[i] for ex, vs in by_exercise.items() if i < len(vs)})
    return rounds


def _graded(grade_cache, lang: str) -> dict:
    """Every variant's exercise as its report says it in ``lang`` (each round graded once, then
    rendered in every language asked for)."""
    results = {}
    for round_ in _rounds():
        report = grade_cache({ex: v.path for ex, v in round_.items()}, exercises=tuple(sorted(round_)),
                             seed=4242, lang=lang)
        for ex, v in round_.items():
            results[v.id] = exercise(report, ex)
    return results


@pytest.fixture(scope="module")
def verdicts(grade_cache):
    return _graded(grade_cache, "en")


@pytest.fixture(scope="module")
def verdicts_zh(grade_cache, verdicts):
    return _graded(grade_cache, "zh")


def test_every_check_has_a_variant_failing_it():
    failing = {(v.exercise, c) for v in VARIANT_LIST for c in v.failed}
    declared = {(ex.id, c.id) for ex in CHAPTER.exercises for c in ex.checks}
    covered_exercises = {v.exercise for v in VARIANT_LIST}
    missing = sorted(f"{e}/{c}" for e, c in declared - failing if e in covered_exercises)
    assert not missing, f"checks no wrong submission fails: {missing}"
    unknown = sorted(f"{e}/{c}" for e, c in failing - declared)
    assert not unknown, f"variants name unknown checks: {unknown}"


def test_every_named_hint_has_a_variant_that_triggers_it():
    """Each mistake-specific hint (chapter.toml's ``hints`` tables, the grader's ``hint.*``) is shown
    to a variant that makes that mistake: no hint exists that no test has checked."""
    from grader.i18n import grader_catalog

    expected = {(v.exercise, check, hint) for v in VARIANT_LIST for check, hint in v.hints.items()}
    named = {(ex.id, c.id, f"check:{name}") for ex in CHAPTER.exercises for c in ex.checks for name in c.named_hints}
    missing = sorted(f"{e}/{c} {h}" for e, c, h in named - expected)
    assert not missing, f"named hints no variant triggers: {missing}"
    grader_hints = {k for k in grader_catalog().keys() if k.startswith("hint.") and k != "hint.section_unknown"}
    untriggered = sorted(grader_hints - {h for _, _, h in expected})
    assert not untriggered, f"grader hints no variant triggers: {untriggered}"
    for v in VARIANT_LIST:
        assert set(v.hints) <= v.failed, f"{v.id}: a hint is declared for a check it does not fail"


def test_every_exercise_has_a_correct_alternative():
    alternatives = {v.exercise for v in VARIANT_LIST if not v.failed}
    assert alternatives == {v.exercise for v in VARIANT_LIST}


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANT_LIST, ids=[v.id for v in VARIANT_LIST])
def test_variant_verdict(variant, verdicts):
    ex = verdicts[variant.id]
    got = statuses(ex)
    failed = {c for c, s in got.items() if s == "failed"}
    skipped = {c for c, s in got.items() if s == "skipped"}
    other = {c: s for c, s in got.items() if s not in ("passed", "failed", "skipped")}
    detail = {c["id"]: c["message"] for c in ex["checks"] if c["status"] != "passed"}
    assert not other, f"unexpected statuses {other}: {detail}"
    assert failed == variant.failed, f"{variant.why}: {detail}"
    assert skipped == variant.skipped, f"{variant.why}: {detail}"
    if not variant.failed:
        assert ex["score"] == ex["max_score"] and ex["status"] == "passed"
    else:
        assert ex["status"] in ("partial", "failed")
        for check in ex["checks"]:
            if check["status"] == "failed":
                assert check["message"] and check["hint"], check
                expected_hint = variant.hints.get(check["id"], "check")
                assert check["hint_id"] == expected_hint, \
                    f"{variant.why}: {check['id']} shows hint {check['hint_id']} ({check['hint']}), " \
                    f"expected {expected_hint}"


#: a slot filled with a bare question mark: "softmax wraps ?", "(at ?)", "could not be timed: ?"
HOLE = re.compile(r"(?<![\w?？])[?？](?![\w?？])")
#: a template field left unfilled ("{where}"), or a message key with no template ("[call.raised] ...")
UNFILLED = re.compile(r"\{[A-Za-z_]\w*\}|^\[[\w.]+\] ")


def holes(ex: dict) -> list[str]:
    """The sentences of an exercise's report that show a placeholder instead of a value."""
    texts = [("error", ex.get("error") or ""), *(("note", n) for n in ex.get("notes", []))]
    for check in ex["checks"]:
        texts += [(f"{check['id']} message", check["message"] or ""), (f"{check['id']} hint", check["hint"] or "")]
    return [f"{where}: {text[:300]}" for where, text in texts
            if any(HOLE.search(part) or UNFILLED.search(part) for part in re.split(r"; |；", text))]


@pytest.mark.slow
def test_no_sentence_shows_a_placeholder(verdicts, verdicts_zh):
    """Every sentence the report of every variant (the correct alternatives included) says,
    in English and in Chinese, is filled in: no "?" where a name, a place or a reason belongs,
    no template field left as it was."""
    found = {f"{lang} {vid}": holes(ex) for lang, graded in (("en", verdicts), ("zh", verdicts_zh))
             for vid, ex in graded.items()}
    found = {k: v for k, v in found.items() if v}
    assert not found, "\n".join(f"{k}: {v}" for k, v in found.items())
