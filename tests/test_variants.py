"""Every check fails the mistake it exists for, and only that check; correct answers
written differently from the reference score full marks: in every chapter the grader finds (built in,
or on ``GRADER_CHAPTERS``), from the variants its chapter.toml names (``variants``).

Each file under ``variants/<chapter>/<exercise>/`` is one submission module (or, headed ``# base:
solution``, the definitions it changes in the reference solution: ``grader.authoring.variants``) whose header
declares the checks it must fail (``# expect-failed:``) and those that must be
skipped because of it (``# expect-skipped:``; a check skipped because one it depends on failed or was skipped
follows from the mistake and need not be named); every other check must pass. An empty
``expect-failed`` is a correct answer. ``# expect-hint: CHECK=HINT_ID`` names the hint
a failed check must show for this mistake (the check's own hint, ``check``, when not
named): every hint is checked against a variant that makes the mistake it names. Variants
are graded in rounds: one grading run takes one variant of every exercise, the rest of the
submission being the reference's.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import exercise, statuses

from grader.authoring import variants
from grader.chapter import available_chapters, load_chapter

CHAPTERS = [load_chapter(c) for c in available_chapters()]
BY_ID = {c.id: c for c in CHAPTERS}
VARIANT_LIST = [v for chapter in CHAPTERS for v in variants.load(chapter)]
#: the chapters whose variants are graded here
GRADED = [c for c in CHAPTERS if any(v.chapter == c.id for v in VARIANT_LIST)]


def _rounds(chapter, asked: set[tuple[str, str]] | None = None) -> list[dict]:
    """The chapter's variants in rounds, one variant of each exercise a round; ``asked``: only these
    (``(chapter, variant id)``), where the run's tests ask for no more."""
    by_exercise: dict[str, list] = {}
    for v in VARIANT_LIST:
        if v.chapter == chapter.id and (asked is None or (v.chapter, v.id) in asked):
            by_exercise.setdefault(v.exercise, []).append(v)
    rounds = []
    for i in range(max((len(vs) for vs in by_exercise.values()), default=0)):
        rounds.append({ex: vs[i] for ex, vs in by_exercise.items() if i < len(vs)})
    return rounds


def _asked(session) -> set[tuple[str, str]] | None:
    """The variants the run's selected tests of this file grade (``-k ex02`` selects ex02's verdicts), by
    ``(chapter, variant id)``; ``None`` where one of them reads every variant of a chapter."""
    asked = set()
    for item in session.items:
        if Path(str(item.path)) != Path(__file__):
            continue
        if item.originalname == "test_no_sentence_shows_a_placeholder":
            return None
        if item.originalname == "test_variant_verdict":
            variant = item.callspec.params["variant"]
            asked.add((variant.chapter, variant.id))
    return asked


class _Graded(dict):
    """Every variant's exercise as its report says it in ``lang``, by ``(chapter, variant id)``: a chapter's
    rounds graded when one of its variants is first asked for (``-k toy`` grades toy's alone), each round
    once, then rendered in every language asked for. ``asked``: the variants the run's tests grade
    (:func:`_asked`): the rounds hold only these (a run of ``-k ex02`` grades ex02's variants alone)."""

    def __init__(self, grade_cache, lang: str, asked: set[tuple[str, str]] | None = None):
        super().__init__()
        self.grade_cache, self.lang, self.asked, self.done = grade_cache, lang, asked, set()

    def chapter(self, chapter) -> dict:
        if chapter.id not in self.done:
            self.done.add(chapter.id)
            for round_ in _rounds(chapter, self.asked):
                report = self.grade_cache({ex: v.source for ex, v in round_.items()},
                                          exercises=tuple(sorted(round_)), seed=4242, lang=self.lang,
                                          base=chapter.solutions)
                for ex, v in round_.items():
                    self[(v.chapter, v.id)] = exercise(report, ex)
        return {k: v for k, v in self.items() if k[0] == chapter.id}

    def __missing__(self, key):
        if key[0] in self.done:  # graded without it: a test the run's selection did not name
            raise KeyError(f"{key[1]} was not graded: the rounds held the variants of the selected tests only")
        self.chapter(next(c for c in GRADED if c.id == key[0]))
        return self[key]


@pytest.fixture(scope="module")
def verdicts(grade_cache, request):
    return _Graded(grade_cache, "en", _asked(request.session))


@pytest.fixture(scope="module")
def verdicts_zh(grade_cache, verdicts):
    return _Graded(grade_cache, "zh")


def test_the_built_in_chapter_is_graded_here():
    """ch4's variants are found from its chapter.toml (a test that found none would pass on nothing)."""
    assert "ch4" in [c.id for c in GRADED] and sum(v.chapter == "ch4" for v in VARIANT_LIST) >= 100


@pytest.mark.parametrize("chapter", GRADED, ids=[c.id for c in GRADED])
def test_every_check_has_a_variant_failing_it(chapter):
    failing = {(v.exercise, c) for v in VARIANT_LIST if v.chapter == chapter.id for c in v.failed}
    declared = {(ex.id, c.id) for ex in chapter.exercises for c in ex.checks}
    missing = sorted(f"{e}/{c}" for e, c in declared - failing)
    assert not missing, f"checks no wrong submission fails: {missing}"
    unknown = sorted(f"{e}/{c}" for e, c in failing - declared)
    assert not unknown, f"variants name unknown checks: {unknown}"


@pytest.mark.parametrize("chapter", GRADED, ids=[c.id for c in GRADED])
def test_every_named_hint_has_a_variant_that_triggers_it(chapter):
    """Each mistake-specific hint (chapter.toml's ``hints`` tables, the grader's ``hint.*``) is shown
    to a variant that makes that mistake: no hint exists that no test has checked."""
    from grader.i18n import grader_catalog

    mine = [v for v in VARIANT_LIST if v.chapter == chapter.id]
    expected = {(v.exercise, check, hint) for v in mine for check, hint in v.hints.items()}
    named = {(ex.id, c.id, f"check:{name}") for ex in chapter.exercises for c in ex.checks for name in c.named_hints}
    missing = sorted(f"{e}/{c} {h}" for e, c, h in named - expected)
    assert not missing, f"named hints no variant triggers: {missing}"
    if chapter.id == "ch4":  # the grader's own hints are shown to ch4's mistakes
        grader_hints = {k for k in grader_catalog().keys() if k.startswith("hint.") and k != "hint.section_unknown"}
        untriggered = sorted(grader_hints - {h for _, _, h in expected})
        assert not untriggered, f"grader hints no variant triggers: {untriggered}"
    for v in mine:
        assert set(v.hints) <= v.failed, f"{v.id}: a hint is declared for a check it does not fail"


@pytest.mark.parametrize("chapter", GRADED, ids=[c.id for c in GRADED])
def test_every_exercise_has_a_correct_alternative(chapter):
    alternatives = {v.exercise for v in VARIANT_LIST if v.chapter == chapter.id and not v.failed}
    assert alternatives == {ex.id for ex in chapter.exercises}


@pytest.mark.parametrize("variant", VARIANT_LIST, ids=[f"{v.chapter}/{v.id}" for v in VARIANT_LIST])
def test_a_variant_is_a_module_of_its_exercise(variant):
    """What a variant stands for parses, defines every function its exercise grades (a patch cannot drop
    one: the solution's stays), and, written as a patch, differs from the solution it is spliced into."""
    import ast

    source = variant.source
    tree = ast.parse(source)
    assert variant.exercise in {ex.id for ex in BY_ID[variant.chapter].exercises}, variant.path
    if variants.is_patch(variant.path.read_text(encoding="utf-8")):
        solution = (variant.solutions / f"{variant.exercise}.py").read_text(encoding="utf-8")
        assert ast.dump(tree) != ast.dump(ast.parse(solution)), f"{variant.path}: the patch changes nothing"
        defined = set().union(*(variants.defined_names(n) for n in tree.body))
        graded = set(BY_ID[variant.chapter].exercise(variant.exercise).functions)
        assert graded <= defined, f"{variant.path}: {sorted(graded - defined)} missing"


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANT_LIST, ids=[f"{v.chapter}/{v.id}" for v in VARIANT_LIST])
def test_variant_verdict(variant, verdicts):
    ex = verdicts[(variant.chapter, variant.id)]
    got = statuses(ex)
    failed = {c for c, s in got.items() if s == "failed"}
    skipped = {c for c, s in got.items() if s == "skipped"}
    other = {c: s for c, s in got.items() if s not in ("passed", "failed", "skipped")}
    detail = {c["id"]: c["message"] for c in ex["checks"] if c["status"] != "passed"}
    assert not other, f"unexpected statuses {other}: {detail}"
    assert failed == variant.failed, f"{variant.why}: {detail}"
    # a check skipped because a check it depends on failed (or was skipped) follows from the declared mistake: a
    # check added later that depends on one this variant fails is skipped here with no header to edit
    depends = {c.id: set(c.depends) for c in BY_ID[variant.chapter].exercise(variant.exercise).checks}
    unexplained = {c for c in skipped - variant.skipped if not depends.get(c, set()) & (failed | skipped)}
    assert variant.skipped <= skipped and not unexplained, f"{variant.why}: {detail}"
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
@pytest.mark.parametrize("chapter", GRADED, ids=[c.id for c in GRADED])
def test_no_sentence_shows_a_placeholder(chapter, verdicts, verdicts_zh):
    """Every sentence the report of every variant (the correct alternatives included) says,
    in English and in Chinese, is filled in: no "?" where a name, a place or a reason belongs,
    no template field left as it was."""
    found = {f"{lang} {chapter.id}/{vid}": holes(ex) for lang, graded in (("en", verdicts), ("zh", verdicts_zh))
             for (_, vid), ex in graded.chapter(chapter).items()}
    found = {k: v for k, v in found.items() if v}
    assert not found, "\n".join(f"{k}: {v}" for k, v in found.items())
