"""A new chapter without touching the core: ``grade dev new-chapter`` scaffolds one in a
folder of its own, and it grades end to end: full marks for its solution, zero for its
stub, the check that a wrong answer breaks fails (run in CI)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import mypy_cache

from grader.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    patcher = pytest.MonkeyPatch()
    patcher.setenv("GRADER_CHAPTERS", str(root / "chapters"))
    assert main(["dev", "new-chapter", "toy", "--root", str(root), "--lang", "en"]) == 0
    yield root
    patcher.undo()
    for name in [n for n in sys.modules if n.startswith("grader.chapters.toy")]:
        del sys.modules[name]


def _grade(path: Path, out: Path, *args: str) -> dict:
    assert main([str(path), "--report-dir", str(out), "--seed", "3", "--lang", "en", *args]) == 0
    return json.loads(next(out.glob("report*.json")).read_text(encoding="utf-8"))


def test_the_scaffold_writes_a_chapter_in_its_own_folder(course, capsys):
    for path in ("chapters/toy/chapter.toml", "chapters/toy/ex01_scale/exercise.toml",
                 "chapters/toy/ex01_scale/__init__.py", "solutions/toy/ex01_scale.py", "exercises/toy/ex01_scale.py",
                 "variants/toy/ex01_scale/adds_factor.py", "variants/toy/ex01_scale/alt_multiply.py"):
        assert (course / path).is_file(), path
    assert "NotImplementedError" in (course / "exercises/toy/ex01_scale.py").read_text(encoding="utf-8")
    assert main(["dev", "new-chapter", "toy", "--root", str(course)]) == 2  # never over an existing chapter
    assert "already has" in capsys.readouterr().err


def test_the_scaffolds_exercise_package_is_typed_and_keeps_the_contract(course):
    """The scaffold writes its exercise in the typed form: an Inputs TypedDict, inputs(rng) -> Inputs, a probe of
    ProbeContext[Inputs], checks of CheckContext[Inputs]; mypy finds nothing in it, and the grader's contract
    (grader.exercise_package) finds nothing missing."""
    import subprocess

    from grader import exercise_package
    from grader.chapter import load_chapter

    code = course / "chapters/toy/ex01_scale/__init__.py"
    text = code.read_text(encoding="utf-8")
    for typed in ("class Inputs(TypedDict):", "def inputs(rng: np.random.Generator) -> Inputs:",
                  "def probe(ctx: ProbeContext[Inputs]) -> None:", "ctx: CheckContext[Inputs]) -> dict:"):
        assert typed in text, typed
    assert exercise_package.problems(load_chapter("toy").exercises[0].package) == []
    pytest.importorskip("mypy")
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", mypy_cache(), "--config-file",
                           str(root / "pyproject.toml"), str(code)], cwd=root, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout


def test_a_course_chapter_names_the_folder_its_child_processes_import_it_from(course):
    """Chapter.import_folders: the folder holding the chapter's folder, for a chapter outside the
    grader; none for a built-in one (its modules are the grader's own)."""
    from grader.chapter import load_chapter

    assert load_chapter("toy").import_folders == [(course / "chapters").resolve()]
    assert load_chapter("ch4").import_folders == []


def test_its_solution_scores_full_marks_and_its_stub_zero(course, tmp_path):
    solution = _grade(course / "solutions" / "toy", tmp_path / "s")
    assert solution["chapter"] == "toy" and solution["score"] == solution["max_score"] == 10
    stub = _grade(course / "exercises" / "toy", tmp_path / "e")
    assert stub["score"] == 0 and stub["exercises"][0]["status"] == "not_attempted"


def test_a_wrong_answer_fails_its_check(course, tmp_path):
    wrong = tmp_path / "toy"
    wrong.mkdir()
    source = (course / "solutions/toy/ex01_scale.py").read_text(encoding="utf-8")
    (wrong / "ex01_scale.py").write_text(source.replace("return x * factor", "return x + factor"), encoding="utf-8")
    report = _grade(wrong, tmp_path / "w")
    checks = {c["id"]: c["status"] for c in report["exercises"][0]["checks"]}
    assert checks == {"scale.values": "failed", "scale.compiles": "skipped"}


#: the structural tests: each follows every chapter the grader finds
STRUCTURAL = ("tests/test_variants.py", "tests/test_record_keys.py", "tests/test_unit_hints.py",
              "tests/test_input_coverage.py", "tests/test_unit_stubs.py", "tests/test_unit_integrity.py")


def test_the_structural_tests_cover_a_new_chapter_with_no_test_file_edited(course):
    """A chapter made by ``grade dev new-chapter`` is on the structural tests at once: run with
    ``GRADER_CHAPTERS`` naming it (as CI would for a course's chapters), every one of them collects tests
    of the new chapter, its variants are graded and judged as their headers declare, and all pass."""
    import os
    import re
    import subprocess

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-k", "toy",
                           *STRUCTURAL], cwd=root, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "GRADER_CHAPTERS": str(course / "chapters")})
    passed = re.findall(r"^PASSED (\S+)", done.stdout, re.M)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    files = {p.split("::")[0] for p in passed}
    assert files == set(STRUCTURAL), f"no test of the new chapter in {set(STRUCTURAL) - files}"
    verdicts = sorted(p.split("[")[1].rstrip("]") for p in passed if "::test_variant_verdict[" in p)
    assert verdicts == [f"toy/ex01_scale/{name}" for name in
                        ("adds_factor", "alt_multiply", "static_factor", "sums_first")], verdicts
    print(f"\n{len(passed)} tests of the new chapter passed in {len(files)} files: {verdicts}")


def test_validate_passes_on_the_new_chapter(course, capsys):
    assert main(["dev", "validate", "toy", "--seed", "4"]) == 0
    assert "✓ toy: valid" in capsys.readouterr().out


def test_adding_an_exercise_is_copying_a_folder(tmp_path, monkeypatch, capsys):
    """An exercise is a folder: copy one, rename it, list it in chapter.toml, then do what
    grade dev validate says, one line at a time, each naming the file to edit, until valid."""
    import shutil

    import grader.chapters

    root = tmp_path / "course"
    monkeypatch.setenv("GRADER_CHAPTERS", str(root / "chapters"))
    monkeypatch.setattr(grader.chapters, "__path__", list(grader.chapters.__path__))  # the course's folder, undone
    assert main(["dev", "new-chapter", "twice", "--root", str(root), "--lang", "en"]) == 0
    chapter = root / "chapters" / "twice"
    copy = chapter / "ex02_double"
    shutil.copytree(chapter / "ex01_scale", copy, ignore=shutil.ignore_patterns("__pycache__"))
    order = chapter / "chapter.toml"
    order.write_text(order.read_text(encoding="utf-8").replace('exercises = ["ex01_scale"]',
                                                               'exercises = ["ex01_scale", "ex02_double"]'),
                     encoding="utf-8")
    capsys.readouterr()

    def validate() -> str:
        _forget("grader.chapters.twice")
        code = main(["dev", "validate", "twice", "--seed", "4", "--lang", "en"])
        out = capsys.readouterr()
        return "" if code == 0 and "✓ twice: valid" in out.out else out.err

    # 1. the copy's messages have the original's keys: rename them, in its words and its code
    said = validate()
    assert f"{copy / 'exercise.toml'}: message 'twice.ex01.factors' is defined in " \
           f"{chapter / 'ex01_scale' / 'exercise.toml'} too" in said
    assert f"rename it here and in T(\"twice.ex01.factors\", ...) of {copy / '__init__.py'}" in said
    for name in ("exercise.toml", "__init__.py"):
        path = copy / name
        path.write_text(path.read_text(encoding="utf-8").replace("twice.ex01.", "twice.ex02."), encoding="utf-8")
    # 2. its reference solution
    solution = root / "solutions" / "twice" / "ex02_double.py"
    assert f"{solution} is missing: the reference solution of ex02_double" in validate()
    shutil.copy(root / "solutions" / "twice" / "ex01_scale.py", solution)
    # 3. its stub
    assert f"{root / 'exercises' / 'twice' / 'ex02_double.py'}: missing (run grade dev stubs)" in validate()
    assert main(["dev", "stubs", "twice"]) == 0
    # valid: the copy grades as an exercise of its own
    assert validate() == ""
    report = _grade(root / "solutions" / "twice", tmp_path / "r")
    assert [(e["id"], e["score"]) for e in report["exercises"]] == [("ex01_scale", 10), ("ex02_double", 10)]
    _forget("grader.chapters.twice")


def _forget(package: str) -> None:
    """A chapter's modules imported by an earlier run in this process (each load imports them anew)."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


def test_a_course_chapter_ships_its_folders_in_a_release_and_a_gradescope_bundle(course, tmp_path):
    """A chapter outside the grader (GRADER_CHAPTERS) goes into a course release and a
    Gradescope bundle whole: chapter.toml, each exercise's code and words; no solution in the
    release, the solutions beside the grader in the bundle."""
    import zipfile

    out = tmp_path / "release"
    assert main(["dev", "release", "toy", "--out", str(out), "--seed", "5", "--lang", "en"]) == 0
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    chapter = {"grader/chapters/toy/chapter.toml", "grader/chapters/toy/ex01_scale/__init__.py",
               "grader/chapters/toy/ex01_scale/exercise.toml"}
    assert chapter | {"grader/chapters/toy/reference-records.json", "exercises/toy/ex01_scale.py"} <= files
    assert not [f for f in files if "solutions" in f or "chapters/ch4" in f]
    templates = [f for f in files if f.startswith("grader/authoring/templates/")]
    assert templates and not [f for f in templates if f.endswith("/solution.py.tmpl") or "/variant-" in f], \
        "the scaffold's answers (toy's own) are in the release"
    bundle = tmp_path / "autograder.zip"
    assert main(["dev", "gradescope", "toy", "--out", str(bundle)]) == 0
    with zipfile.ZipFile(bundle) as zipped:
        names = set(zipped.namelist())
    assert chapter | {"solutions/toy/ex01_scale.py"} <= names


def test_an_authors_command_takes_the_one_chapter_or_asks_which(course, capsys, monkeypatch):
    """``grade dev stubs`` (validate, build, release, gradescope) without a chapter: the grader's one chapter;
    with two (here ch4 and toy), a one-line question naming them, never ch4 taken silently."""
    assert main(["dev", "stubs", "--check", "--lang", "en"]) == 2
    err = capsys.readouterr().err
    assert "which chapter? this grader has ch4, toy: name one" in err and "Traceback" not in err, err
    monkeypatch.delenv("GRADER_CHAPTERS")
    assert main(["dev", "stubs", "--check", "--lang", "en"]) == 0
    assert "ch4" in capsys.readouterr().out
