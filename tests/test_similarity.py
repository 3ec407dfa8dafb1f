"""Similar submissions across a class, seen the way JAX sees them (issue 46): a real batch with --similarity
(the programs traced in the sandbox, as every record) of a class built from the corpus of variants
(tests/similarity_class.py): 20 students written independently, 3 pairs copied and disguised, one pair that
shares only the stub."""
from __future__ import annotations

import csv
import json
from collections import defaultdict
from itertools import combinations

import pytest

import similarity_class as made

pytestmark = pytest.mark.slow

SEED = 17


def _class(tmp_path):
    """The class on disk, and who copied whom with which disguises."""
    students = made.independent(20)
    by_style = {(student, ex): styles[ex][0] for student, styles in students.items() for ex in made.EXERCISES}
    # the originals: one written the way each disguise applies to (a helper to inline, where() to select)
    inline_from = next(s for s in students if by_style[s, "ex02_where"] == "alt_select_cond")
    select_from = next(s for s in students if by_style[s, "ex02_where"] in ("clip_divides_first", "threshold_one")
                       and s != inline_from)
    rename_from = next(s for s in students if s not in (inline_from, select_from)
                       and by_style[s, "ex01_jit_forms"].startswith("alt_"))
    copies = {"c_renamed": (rename_from, ("renamed", "reordered")), "c_select": (select_from, ("select", "renamed")),
              "c_inlined": (inline_from, ("inlined", "reordered"))}
    folder = tmp_path / "class"
    for student, styles in students.items():
        made.write_student(folder / student, {ex: text for ex, (_, text) in styles.items()})
    for copier, (original, disguises) in copies.items():
        files = {}
        for ex in made.EXERCISES:
            text = students[original][ex][1]
            for disguise in disguises:
                text = made.DISGUISES[disguise](text)
            files[ex] = text
        made.write_student(folder / copier, files)
    # two students who left ex03 as the stub, and share no style of the other exercises
    stubbed = next((a, b) for a, b in combinations(sorted(students), 2)
                   if a not in (inline_from, select_from, rename_from) and b not in (inline_from, select_from,
                                                                                      rename_from)
                   and all(by_style[a, ex] != by_style[b, ex] for ex in made.EXERCISES))
    stub = (made.STUBS / "ex03_static_args.py").read_text(encoding="utf-8")
    for student in stubbed:
        (folder / student / "ex03_static_args.py").write_text(stub, encoding="utf-8")
    return folder, {tuple(sorted((original, copier))): disguises for copier, (original, disguises) in copies.items()}, \
        tuple(sorted(stubbed))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from grader.batch.run import BatchOptions, run_batch
    from grader.batch.similarity import similarity_report
    from grader.chapter import load_chapter

    tmp_path = tmp_path_factory.mktemp("similarity")
    folder, copied, stubbed = _class(tmp_path)
    out = tmp_path / "out"
    result = run_batch(folder, BatchOptions(chapter="ch4", out=out, exercises=("1", "2", "3"), seed=SEED, jobs=2,
                                            similarity=True, allow_weak_sandbox=True))
    everything = similarity_report(out, load_chapter("ch4"), threshold=0.0, seed=SEED)  # every pair, for ranking
    reported = similarity_report(out, load_chapter("ch4"), seed=SEED)  # as the instructor gets it
    return {"out": out, "result": result, "all": everything.pairs, "reported": reported, "copied": copied,
            "stubbed": stubbed}


def _by_pair(pairs) -> dict[tuple[str, str], dict[str, object]]:
    found: dict[tuple[str, str], dict[str, object]] = defaultdict(dict)
    for p in pairs:
        found[tuple(sorted(p.students))][p.exercise] = p
    return found


def test_the_copied_pairs_rank_above_every_independent_pair(graded):
    pairs = _by_pair(graded["all"])
    # a pair's likeness over the class's exercises: the mean of its exercises' scores
    mean = {pair: sum(p.score for p in found.values()) / len(made.EXERCISES) for pair, found in pairs.items()}
    copied = set(graded["copied"])
    independent = [score for pair, score in mean.items() if pair not in copied]
    lowest_copy = min(mean[pair] for pair in copied)
    assert lowest_copy > max(independent), (sorted(mean.items(), key=lambda kv: -kv[1])[:8], copied)
    # what each measure gave, pair by pair (the test's own record of them)
    for pair, disguises in graded["copied"].items():
        for ex, p in sorted(pairs[pair].items()):
            print(f"{'+'.join(disguises):18} {ex:18} source {p.source_score:.2f}  traced "
                  f"{'-' if p.trace_score is None else f'{p.trace_score:.2f}'}  score {p.score:.2f}")


def test_each_disguise_is_seen_by_the_measure_that_sees_through_it(graded):
    """Renamed, reordered, ``where`` as ``select``, a helper inlined: one program to JAX, on every exercise of
    every copied pair (a program two students alone trace to scores its rarity as a whole); the source's
    fingerprints see through names and order, less through the rest."""
    pairs = _by_pair(graded["all"])
    for pair, disguises in graded["copied"].items():
        found = pairs[pair]
        assert set(found) == set(made.EXERCISES) and all(p.same_program for p in found.values()), \
            (disguises, {ex: (p.same_program, p.trace_score) for ex, p in found.items()})
        assert all(p.trace_score >= 0.8 or p.equals_reference for p in found.values()), disguises
        if disguises == ("renamed", "reordered"):
            assert max(p.source_score for p in found.values()) >= 0.5



def test_the_pair_that_shares_only_the_stub_is_not_reported(graded):
    reported = {(tuple(sorted(p.students)), p.exercise) for p in graded["reported"].pairs}
    assert (graded["stubbed"], "ex03_static_args") not in reported
    every = _by_pair(graded["all"])[graded["stubbed"]]
    assert every.get("ex03_static_args") is None or every["ex03_static_args"].score < 0.2


def test_students_equal_to_the_reference_are_said_to_be_so_not_copies(graded):
    flagged = [p for p in graded["all"] if p.equals_reference]
    assert flagged, "two students who wrote the solution's program"
    copied = set(graded["copied"])
    assert all(tuple(sorted(p.students)) not in copied or p.score <= p.source_score for p in flagged)


def test_the_instructor_gets_csv_and_html_and_no_student_gets_any(graded):
    out = graded["out"]
    rows = list(csv.DictReader((out / "similarity.csv").read_text(encoding="utf-8").splitlines()))
    assert rows and {"exercise", "student_a", "student_b", "score", "source_score", "trace_score"} <= set(rows[0])
    top = {tuple(sorted((r["student_a"], r["student_b"]))) for r in rows}
    assert set(graded["copied"]) <= top
    for pair in graded["copied"]:  # which functions: those that trace alike, those whose lines match
        found = [r for r in rows if tuple(sorted((r["student_a"], r["student_b"]))) == pair]
        assert any(r["functions_same_program"] for r in found) and all(r["functions_a"] for r in found), found
    page = (out / "similarity.html").read_text(encoding="utf-8")
    assert 'class="line match"' in page and all(name in page for pair in graded["copied"] for name in pair)
    for student_folder in (p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for file in student_folder.iterdir():
            assert "jaxpr" not in file.read_text(encoding="utf-8", errors="replace"), file
    kept = json.loads((out / ".similarity" / "programs" / "s00.json").read_text(encoding="utf-8"))
    assert set(kept) == set(made.EXERCISES) and kept["ex02_where"]["functions"]


def test_grade_similarity_ranks_a_graded_batch_again(graded, tmp_path):
    from click.testing import CliRunner

    from grader.cli import cli

    (graded["out"] / "similarity.csv").unlink()
    done = CliRunner().invoke(cli, ["similarity", str(graded["out"]), "--threshold", "0.6"])
    assert done.exit_code == 0, done.output
    assert "similarity.html" in done.output and (graded["out"] / "similarity.csv").is_file()
    done = CliRunner().invoke(cli, ["similarity", str(tmp_path)])
    assert done.exit_code == 2 and "manifest.json" in done.output and "Traceback" not in done.output


def test_the_page_shows_both_sides_of_a_copied_pair_with_the_lines_marked(graded):
    """In a real browser (Chromium through Playwright): the table's link opens the pair, its two submissions
    side by side, each half the page's width, the matching lines highlighted."""
    from browser import ARTIFACTS, page_in_browser

    pair = sorted(graded["copied"])[0]
    with page_in_browser(graded["out"] / "similarity.html", width=1200) as view:
        link = view.locator("a", has_text=f"{pair[0]} · {pair[1]}").first
        link.click()
        section = view.locator(f"section.pair:has(h3:text-is('{pair[0]}')):has(h3:text-is('{pair[1]}'))").first
        sides = section.locator("div.side").all()
        assert len(sides) == 2
        left, right = (side.bounding_box() for side in sides)
        assert left["x"] + left["width"] <= right["x"] + 1 and abs(left["width"] - right["width"]) < 0.2 * left["width"]
        marked = section.locator("span.line.match")
        assert marked.count() >= 4
        colour = marked.first.evaluate("e => getComputedStyle(e).backgroundColor")
        assert colour not in ("rgba(0, 0, 0, 0)", "transparent"), colour
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        section.screenshot(path=str(ARTIFACTS / "similarity-pair.png"))


def test_the_class_summary_lists_the_pairs_most_alike_with_links(graded):
    """The class summary (the instructor's) has the pairs most alike at its side, each a link into
    similarity.html; the seal covers the grades and the summary, not the similarity pages, which
    grade similarity writes again."""
    out = graded["out"]
    page = (out / "summary.html").read_text(encoding="utf-8")
    assert "Similar submissions" in page and "similarity.html#pair-" in page
    assert all(name in page for pair in graded["copied"] for name in pair)
    assert "Similar submissions" in (out / "summary.md").read_text(encoding="utf-8")
    sealed = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["exports"]
    assert "summary.html" in sealed and not [name for name in sealed if name.startswith("similarity")]
