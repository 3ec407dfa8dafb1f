"""Course releases and preview grading, in parts: the records and their key, the chapter's
release bar, what a preview report says, and the search for answers in a release.

The release built, installed and used end to end is tests/test_release.py.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pytest

from test_unit_chapter import chapter_toml, exercise_toml, write_chapter  # noqa: F401 - a fixture
from test_unit_render import catalog, report  # noqa: F401 - fixtures

from grader.authoring.answers import chapter_answers, helper_names
from grader.authoring.release import ReleaseError, leaks, readme_command
from grader.chapter import ChapterError, load_chapter
from grader.preview import FILENAME, ReferenceRecords, RecordsError, inputs_digest, release_records
from grader.report.render import render_markdown, render_terminal
from grader.results import report_to_dict

ROOT = Path(__file__).resolve().parent.parent
CH4 = load_chapter("ch4")


# ------------------------------------------------------------------ records
def _records(seed: int = 7) -> ReferenceRecords:
    ex = CH4.exercise("ex02_where")
    value = {"status": "ok", "function": "piecewise", "value": {"t": "array", "type": "jax.Array",
                                                                "value": np.arange(3, dtype=np.float32)}}
    from grader import wire

    return ReferenceRecords(chapter="ch4", seed=seed, environment={"jax": "0.0"}, exercises={ex.id: {
        "inputs_sha256": inputs_digest(ex.inputs(seed)), "observations": wire.encode({"piecewise/values/x": value})}})


def test_records_round_trip_and_answer_for_their_seed_and_inputs_only(tmp_path):
    path = tmp_path / FILENAME
    path.write_text(_records().to_json(), encoding="utf-8")
    records = ReferenceRecords.load(path)
    ex = CH4.exercise("ex02_where")
    outcome = records.outcome(ex.id, 7, ex.inputs(7))
    assert outcome.end == "done" and outcome.side == "reference"
    got = outcome.records["piecewise/values/x"]["value"]["value"]
    assert got.dtype == np.float32 and got.tolist() == [0, 1, 2]
    assert records.outcome(ex.id, 8, ex.inputs(8)) is None  # another seed
    assert records.outcome(ex.id, 7, ex.inputs(8)) is None  # other inputs under the public seed's name
    assert records.outcome("ex03_static_args", 7, {}) is None  # no record at all


def test_inputs_digest_sees_one_element():
    inputs = CH4.exercise("ex02_where").inputs(3)
    changed = CH4.exercise("ex02_where").inputs(3)
    changed["piecewise"]["mixed"][0, 0] += 1
    assert inputs_digest(inputs) == inputs_digest(CH4.exercise("ex02_where").inputs(3))
    assert inputs_digest(inputs) != inputs_digest(changed)


@pytest.mark.parametrize("text", ["not json", json.dumps({"schema": "other"}), json.dumps([1])])
def test_unusable_records_say_so(tmp_path, text):
    path = tmp_path / FILENAME
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RecordsError, match="build the release again"):
        ReferenceRecords.load(path)


def test_the_repository_grades_with_its_reference_not_with_records():
    assert release_records(CH4) is None  # the solutions are here: final grading


def test_a_release_chapter_without_solutions_grades_a_preview(tmp_path):
    import dataclasses

    folder = tmp_path / "ch4"
    folder.mkdir()
    (folder / FILENAME).write_text(_records(11).to_json(), encoding="utf-8")
    chapter = dataclasses.replace(CH4, folder=folder, solutions=tmp_path / "no-solutions")
    assert release_records(chapter).seed == 11
    other = dataclasses.replace(chapter, id="ch5")
    with pytest.raises(RecordsError, match="not ch5"):
        release_records(other)


# ------------------------------------------------------------------ the chapter's bar
def _with_bar(table: str) -> str:
    """chapter.toml with the instructor's bar for ex01_a (a table of chapter.toml, not of the exercise)."""
    return chapter_toml(toml_tail=f"[release_speedup_bar]\nex01_a = {table}")


def test_release_speedup_bar_is_read(write_chapter):  # noqa: F811
    chapter = write_chapter(chapter=_with_bar("{ f = 3 }"))
    assert chapter.exercises[0].release_speedup_bar == {"f": 3.0}
    assert CH4.exercise("ex06_speedup").release_speedup_bar.keys() == {"fast_heavy", "layer_norm"}


@pytest.mark.parametrize("table, message", [("{ g = 3 }", r"\[release_speedup_bar\] ex01_a names 'g', which is not "
                                                          r"one of the exercise's functions"),
                                            ("{ f = 1 }", "a speed-up above 1"),
                                            ("{ f = true }", "a speed-up above 1"),
                                            ("3", "must be a table of speed-ups by function")])
def test_a_wrong_release_speedup_bar_is_named(write_chapter, table, message):  # noqa: F811
    with pytest.raises(ChapterError, match=message):
        write_chapter(chapter=_with_bar(table))


def test_a_release_speedup_bar_of_no_exercise_is_named(write_chapter):  # noqa: F811
    with pytest.raises(ChapterError, match=r"\[release_speedup_bar\] names 'ex09_x', which is not one of the "
                                           r"chapter's exercises \(ex01_a\)"):
        write_chapter(chapter=chapter_toml(toml_tail="[release_speedup_bar]\nex09_x = { f = 3 }"))


def test_a_release_speedup_bar_in_the_exercise_points_to_chapter_toml(write_chapter):  # noqa: F811
    words = exercise_toml(second="f.more").replace('functions = ["f"]',
                                                   'functions = ["f"]\nrelease_speedup_bar = { f = 3 }')
    with pytest.raises(ChapterError, match=r"release_speedup_bar is the instructor's bar, set in chapter\.toml: move "
                                           r"it there as \[release_speedup_bar\] ex01_a = "):
        write_chapter(words)


# ------------------------------------------------------------------ a preview's report
def test_a_preview_says_so_first_and_marks_what_final_grading_decides(report, catalog):  # noqa: F811
    report.preview = True
    report.exercises[0].checks[0].checked = "final"
    for lang, first in (("en", "Preview (public seed 1234): Chapter 4"), ("zh", "预览（公开种子 1234）：第 4 章")):
        text = render_terminal(report, catalog, lang, width=100)
        assert text.startswith(first)
        md = render_markdown(report, catalog, lang)
        assert md.startswith(f"# {first}")
        data = report_to_dict(report, catalog, lang)
        assert data["preview"] is True and data["title"].startswith(first)
        assert [c["checked"] for c in data["exercises"][0]["checks"]] == ["final", "now"]
    en = render_terminal(report, catalog, "en", width=200)
    assert "public seed 1234. Final grading uses a secret seed" in en
    assert "Decided at final grading (a preview cannot judge them without the reference): ex01_jit_forms " \
           "softmax.values" in en
    assert "passed · decided at final grading" in render_markdown(report, catalog, "en")


def test_a_previews_html_page_says_so_and_draws_the_release_bar(report, catalog):  # noqa: F811
    """report.html too: the preview's notes, the label on what final grading decides, and in
    the speed-up chart the release's bar beside the student's gain (there is no reference's)."""
    from grader.report.page import render_html

    report.preview = True
    speedup = report.exercises[0].checks[0]
    speedup.category, speedup.checked = "speedup", "final"
    speedup.measured = {"student": {"speedup": 3.5}, "bar": 2.0, "bar_from": "release_speedup_bar"}
    for lang, note, label, bar in (("en", "public seed 1234. Final grading", "decided at final grading",
                                    "this release's bar"),
                                   ("zh", "公开种子 1234 的参考记录", "正式评测时判定", "本发布的标准")):
        page = html.unescape(render_html(report, catalog, lang))
        assert note in page and label in page and bar in page, lang
        assert ">3.5×</text>" in page and ">2×</text>" in page
    report.preview, speedup.checked = False, "now"
    speedup.measured = {"student": {"speedup": 3.5}, "reference": {"speedup": 5.0}, "bar": 3.0}
    page = html.unescape(render_html(report, catalog, "en"))
    assert "reference records" not in page and "this release's bar" not in page and ">5×</text>" in page


def test_a_final_grading_is_no_preview(report, catalog):  # noqa: F811
    data = report_to_dict(report, catalog, "en")
    assert data["preview"] is False and not data["title"].startswith("Preview")
    assert {c["checked"] for e in data["exercises"] for c in e["checks"]} == {"now"}
    assert "reference records" not in render_terminal(report, catalog, "en", width=200)


# ------------------------------------------------------------------ answers in a release
def test_the_answers_of_chapter_4_are_known():
    pieces, helpers = chapter_answers(CH4.solutions, CH4.stubs)
    assert helpers == {"_mean_sq_core", "_layer_norm_float64"}
    assert "whilelength<n:length*=2" in pieces  # bucket_length's loop
    assert any("jaxprs_in_params(eqn.params)" in p for p in pieces)  # count_primitives' walk
    assert not any(p in "jnp.where(condition,if_true,if_false)" for p in pieces)  # a stub's words are no answer


def test_helper_names_leave_out_what_the_stub_defines():
    solution = ("def h(x):\n    # BEGIN SOLUTION\n    def inner(y):\n        return y\n    return inner(x)\n"
                "    # END SOLUTION\n    # BEGIN STUB\n    # END STUB\n"
                "# BEGIN SOLUTION\ndef f(x):\n    return x\ndef _g(x):\n    return x\n# END SOLUTION\n")
    assert helper_names(solution, "def f(x):\n    raise NotImplementedError\n") == {"_g"}  # not inner: a local


def test_leaks_finds_each_kind_of_answer(tmp_path):
    (tmp_path / "grader").mkdir()
    (tmp_path / "grader" / "ok.py").write_text("def scale(x):\n    return x\n", encoding="utf-8")
    assert leaks(tmp_path, CH4) == []
    (tmp_path / "grader" / "copy.py").write_bytes((CH4.solutions / "ex02_where.py").read_bytes())
    (tmp_path / "grader" / "helper.py").write_text("def _mean_sq_core(p, n):\n    pass\n", encoding="utf-8")
    (tmp_path / "grader" / "cached.pyc").write_bytes(b"\0")
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "notes.md").write_text("nothing\n", encoding="utf-8")
    (tmp_path / "grader" / FILENAME).write_text('{"name": "_layer_norm_float64"}', encoding="utf-8")
    found = "\n".join(leaks(tmp_path, CH4))
    assert "grader/copy.py: a copy of a solution" in found
    assert "grader/copy.py: holds solution code" in found
    assert "grader/helper.py: defines the solutions' helper _mean_sq_core" in found
    assert "grader/cached.pyc: a solution's or a compiled file" in found
    assert "solutions/notes.md" in found
    assert f"grader/{FILENAME}: names the solutions' helper _layer_norm_float64" in found


def test_the_grader_package_itself_holds_no_answer():
    """What a release copies of the grader: no piece of a solution, no helper defined."""
    found = [line for line in leaks(ROOT / "grader", CH4) if "__pycache__" not in line]
    assert found == []


def test_readme_command_is_the_first_bash_block():
    assert readme_command("# x\n\n```bash\npip install . && grade exercises/ch4\n```\n") == \
        "pip install . && grade exercises/ch4"
    with pytest.raises(ReleaseError):
        readme_command("no command here")


@pytest.mark.parametrize("with_notebook", [True, False])
def test_a_release_takes_the_chapters_notebook_when_there_is_one(tmp_path, with_notebook):
    import dataclasses
    import shutil

    import nbformat

    from grader.authoring.release import _write

    exercises = tmp_path / "repo" / "exercises"
    shutil.copytree(CH4.stubs, exercises / "ch4", ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "def bucket_length(n):\n    raise NotImplementedError('ex04: bucket_length')\n")])
    if with_notebook:
        nbformat.write(notebook, exercises / "ch4.ipynb")
    chapter = dataclasses.replace(CH4, stubs=exercises / "ch4")
    root = tmp_path / "release"
    root.mkdir()
    written = _write(chapter, root, _records())
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert ("grade exercises/ch4.ipynb" in readme) is with_notebook
    assert readme.count("exercises/ch4.ipynb") == (4 if with_notebook else 0)  # in Chinese and in English
    assert leaks(root, chapter) == []
    if not with_notebook:
        assert written is None
        return
    assert written == root / "exercises" / "ch4.ipynb"
    assert written.read_bytes() == (exercises / "ch4.ipynb").read_bytes()
    notebook.cells.append(nbformat.v4.new_code_cell(
        "def bucket_length(n):\n    length = 8\n    while length < n:\n        length *= 2\n    return length\n"))
    nbformat.write(notebook, written)
    assert any("exercises/ch4.ipynb: holds solution code" in line for line in leaks(root, chapter))


# ------------------------------------------------------------------ grade dev release, refusing
def test_release_refuses_a_folder_in_use_in_one_line(tmp_path, capsys):
    from grader.cli import main

    (tmp_path / "mine.txt").write_text("work\n", encoding="utf-8")
    assert main(["dev", "release", "ch4", "--out", str(tmp_path), "--lang", "en"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not an empty folder" in err and "nothing was written" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_release_needs_the_reference_solutions(tmp_path):
    import dataclasses

    from grader.authoring.release import build

    with pytest.raises(ReleaseError, match="built from the full course repository"):
        build(dataclasses.replace(CH4, solutions=tmp_path / "none"), tmp_path / "out", seed=1)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ what a wheel ships
def _shipped(package: Path, pyproject_text: str) -> set[Path]:
    """The data files a wheel of ``package`` holds, as setuptools picks them: each pattern of
    ``[tool.setuptools.package-data] grader`` is joined to the package's folder and expanded with
    ``glob(..., recursive=True)`` (setuptools/command/build_py.py, build_py.find_data_files)."""
    import glob
    import tomllib

    patterns = tomllib.loads(pyproject_text)["tool"]["setuptools"]["package-data"]["grader"]
    return {Path(p) for pattern in patterns for p in glob.glob(str(package / pattern), recursive=True)
            if Path(p).is_file()}


def _data_files(package: Path) -> set[Path]:
    """Every file of the package that is not Python code (nor Python's own bytecode)."""
    return {p for p in package.rglob("*") if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts}


def test_the_graders_wheel_ships_every_exercise_folders_words():
    """A chapter's exercises are folders: their exercise.toml files are package data too
    (a wheel built without them grades nothing: the chapter does not load)."""
    package = ROOT / "grader"
    missing = sorted(str(p.relative_to(ROOT)) for p in _data_files(package)
                     - _shipped(package, (ROOT / "pyproject.toml").read_text(encoding="utf-8")))
    assert missing == []
    assert package / "chapters" / "ch4" / "ex03_static_args" / "exercise.toml" in _data_files(package)


def test_a_release_ships_its_chapters_folders(tmp_path):
    """The release's own pyproject.toml ships what copy_package copied: the chapter's file, each
    exercise's words and the reference's records (tests/test_release.py installs one for real)."""
    from grader.authoring.release import copy_package, pyproject

    package = copy_package(CH4, tmp_path)
    (package / "chapters" / "ch4" / FILENAME).write_text("{}", encoding="utf-8")
    text = pyproject(CH4, kind="release", about="a test", description="a test", jax="0.4.30", jaxlib="0.4.30")
    wanted = _data_files(package / "chapters") | _data_files(package / "messages")  # (not the authors' tools)
    assert sorted(str(p.relative_to(tmp_path)) for p in wanted - _shipped(package, text)) == []
    assert {p.parent.name for p in package.glob("chapters/ch4/*/exercise.toml")} == {ex.id for ex in CH4.exercises}
