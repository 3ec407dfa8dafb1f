"""Unit tests of grader/submission.py: folders, zips, notebooks and the chapter they belong to."""
from __future__ import annotations

import re
import shutil
import zipfile
from pathlib import Path

import nbformat
import pytest

from grader.chapter import load_chapter
from grader.i18n import grader_catalog
from grader.ipynb import notebook_source
from grader.submission import SubmissionError, load, resolve_chapter

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "ch4"


@pytest.fixture(scope="module")
def ch4():
    return load_chapter("ch4")


@pytest.fixture
def folder(tmp_path, ch4) -> Path:
    """A copy of the chapter's reference files in a folder named ch4."""
    target = tmp_path / "sub" / "ch4"
    target.mkdir(parents=True)
    for ex in ch4.exercises:
        shutil.copy(SOLUTIONS / ex.filename, target / ex.filename)
    return target


def error_key(path: Path, chapter, tmp_path: Path) -> str:
    with pytest.raises(SubmissionError) as info:
        load(path, chapter, tmp_path / "scratch-err")
    return info.value.text.key


# ------------------------------------------------------------------ folders
def test_load_folder(folder, ch4, tmp_path):
    sub = load(folder, ch4, tmp_path / "scratch")
    assert sub.kind == "folder"
    assert sub.problems == {}
    assert sub.files == sorted(ex.filename for ex in ch4.exercises)
    assert sub.path == folder
    assert sub.module_dir != folder and sub.module_dir.is_relative_to(tmp_path / "scratch")
    for name in sub.files:
        assert (sub.module_dir / name).read_bytes() == (folder / name).read_bytes()
    assert len(sub.sha256) == 64
    assert sub.describe() == {"path": str(folder), "kind": "folder", "sha256": sub.sha256, "files": sub.files}


def test_sha256_is_stable_and_follows_content(folder, ch4, tmp_path):
    first = load(folder, ch4, tmp_path / "s1").sha256
    assert load(folder, ch4, tmp_path / "s2").sha256 == first
    path = folder / ch4.exercises[0].filename
    path.write_text(path.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert load(folder, ch4, tmp_path / "s3").sha256 != first


def test_report_folder_and_hidden_files_are_ignored(folder, ch4, tmp_path):
    (folder / ".grade").mkdir()
    (folder / ".grade" / "report.json").write_text("{}")
    (folder / ".hidden.py").write_text("import os\n")
    sub = load(folder, ch4, tmp_path / "scratch")
    assert ".hidden.py" not in sub.files
    assert not (sub.module_dir / ".hidden.py").exists()


def test_missing_exercise_file(folder, ch4, tmp_path):
    missing = ch4.exercises[1]
    (folder / missing.filename).unlink()
    sub = load(folder, ch4, tmp_path / "scratch")
    assert set(sub.problems) == {missing.id}
    assert sub.problems[missing.id].key == "job.file_missing"
    assert sub.problems[missing.id].args == {"file": missing.filename}


def test_syntax_error_names_the_line(folder, ch4, tmp_path):
    broken = ch4.exercises[2]
    (folder / broken.filename).write_text("import jax\n\n\ndef f(:\n    pass\n", encoding="utf-8")
    sub = load(folder, ch4, tmp_path / "scratch")
    assert set(sub.problems) == {broken.id}
    text = sub.problems[broken.id]
    assert text.key == "job.syntax_error"
    assert text.args["line"] == 4 and text.args["file"] == broken.filename
    assert text.args["message"]


def test_null_bytes_are_a_syntax_problem(folder, ch4, tmp_path):
    broken = ch4.exercises[0]
    (folder / broken.filename).write_bytes(b"x = 1\x00\n")
    sub = load(folder, ch4, tmp_path / "scratch")
    assert sub.problems[broken.id].key == "job.syntax_error"


def test_empty_folder(tmp_path, ch4):
    empty = tmp_path / "ch4"
    empty.mkdir()
    assert error_key(empty, ch4, tmp_path) == "error.empty"


def test_folder_with_unrelated_files(tmp_path, ch4):
    other = tmp_path / "ch4"
    other.mkdir()
    (other / "notes.txt").write_text("hello")
    (other / "homework.py").write_text("x = 1\n")
    assert error_key(other, ch4, tmp_path) == "error.no_exercise_files"


def test_folder_with_two_notebooks(tmp_path, ch4):
    other = tmp_path / "ch4"
    other.mkdir()
    for name in ("a.ipynb", "b.ipynb"):
        nbformat.write(nbformat.v4.new_notebook(), str(other / name))
    with pytest.raises(SubmissionError) as info:
        load(other, ch4, tmp_path / "scratch")
    assert info.value.text.key == "error.many_notebooks" and info.value.text.args["n"] == 2


def test_non_existent_path(tmp_path, ch4):
    assert error_key(tmp_path / "nowhere", ch4, tmp_path) == "error.no_such_path"


def test_text_file_is_not_a_submission(tmp_path, ch4):
    text = tmp_path / "answers.txt"
    text.write_text("print(1)\n")
    assert error_key(text, ch4, tmp_path) == "error.not_a_submission"


def test_submission_error_messages_render(tmp_path, ch4):
    with pytest.raises(SubmissionError) as info:
        load(tmp_path / "nowhere", ch4, tmp_path / "scratch")
    words = ch4.catalog.render(info.value.text, "en")
    assert str(tmp_path / "nowhere") in words and "\n" not in words
    assert "不存在" in ch4.catalog.render(info.value.text, "zh")


# ------------------------------------------------------------------ zips
def make_zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def solution_files(ch4, prefix: str = "") -> dict[str, bytes]:
    return {prefix + ex.filename: (SOLUTIONS / ex.filename).read_bytes() for ex in ch4.exercises}


@pytest.mark.parametrize("prefix", ["", "ch4/", "outer/ch4/"])
def test_zip_loads_with_or_without_top_folder(tmp_path, ch4, prefix):
    archive = make_zip(tmp_path / "ch4.zip", solution_files(ch4, prefix))
    sub = load(archive, ch4, tmp_path / "scratch")
    assert sub.kind == "zip+folder"
    assert sub.problems == {}
    assert sub.files == sorted(ex.filename for ex in ch4.exercises)
    assert sub.sha256 == load(archive, ch4, tmp_path / "scratch2").sha256


def test_zip_with_macos_metadata_loads(tmp_path, ch4):
    files = solution_files(ch4, "ch4/")
    files["__MACOSX/ch4/._ex01_jit_forms.py"] = b"\x00\x05binary"
    sub = load(make_zip(tmp_path / "ch4.zip", files), ch4, tmp_path / "scratch")
    assert sub.problems == {}


def test_zip_with_parent_path_is_rejected(tmp_path, ch4):
    files = solution_files(ch4)
    files["../evil.py"] = b"import os\n"
    archive = make_zip(tmp_path / "ch4.zip", files)
    scratch = tmp_path / "scratch"
    with pytest.raises(SubmissionError) as info:
        load(archive, ch4, scratch)
    assert info.value.text.key == "error.zip_path"
    assert info.value.text.args["name"] == "../evil.py"
    assert not (scratch / "evil.py").exists()


def test_zip_with_absolute_path_is_rejected(tmp_path, ch4):
    archive = tmp_path / "ch4.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        info = zipfile.ZipInfo("ex01_jit_forms.py")
        info.filename = "/tmp/evil.py"  # ZipInfo strips a leading slash from its argument
        handle.writestr(info, b"x = 1\n")
    assert error_key(archive, ch4, tmp_path) == "error.zip_path"


def test_zip_without_python_files(tmp_path, ch4):
    archive = make_zip(tmp_path / "ch4.zip", {"readme.txt": b"hi"})
    assert error_key(archive, ch4, tmp_path) == "error.empty_zip"


def test_broken_zip(tmp_path, ch4):
    archive = tmp_path / "ch4.zip"
    archive.write_bytes(b"PK\x03\x04 this is not a zip")
    assert error_key(archive, ch4, tmp_path) == "error.bad_zip"


# ------------------------------------------------------------------ notebooks
MAGIC_CELL = "x = 3\n%timeit x\n!pip list\n    %matplotlib inline"


def make_notebook(path: Path, ch4, extra_cells=()) -> tuple[Path, list[str]]:
    sources = [(SOLUTIONS / ex.filename).read_text(encoding="utf-8") for ex in ch4.exercises]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    nb.cells.append(nbformat.v4.new_markdown_cell("# Notes\n%not code, markdown"))
    nb.cells.append(nbformat.v4.new_code_cell(MAGIC_CELL))
    nb.cells.extend(nbformat.v4.new_code_cell(src) for src in extra_cells)
    nbformat.write(nb, str(path))
    return path, sources


def test_notebook_loads_with_magics_commented_out(tmp_path, ch4):
    path, sources = make_notebook(tmp_path / "ch4.ipynb", ch4)
    sub = load(path, ch4, tmp_path / "scratch")
    assert sub.kind == "notebook"
    assert sub.problems == {}
    assert sub.files == ["ch4.ipynb"]
    modules = {ex.id: (sub.module_dir / ex.filename).read_text(encoding="utf-8") for ex in ch4.exercises}
    assert len({len(m.splitlines()) for m in modules.values()}) == 1  # one line layout: the notebook's
    for ex in ch4.exercises:  # each exercise replays the definitions of its own functions, not the others'
        for function in ex.functions:
            defines = re.compile(rf"^(def {function}\(|{function} = )", re.M)
            assert defines.search(modules[ex.id]), (ex.id, function)
            assert [other.id for other in ch4.exercises if defines.search(modules[other.id])] == [ex.id]
    module, _ = notebook_source(path)  # the whole notebook, as read
    lines = module.splitlines()
    assert "# %timeit x" in lines and "# !pip list" in lines and "    # %matplotlib inline" in lines
    assert "x = 3" in lines and all("x = 3" not in m for m in modules.values())  # nothing graded needs x
    assert not any(line.lstrip().startswith(("%", "!")) for line in lines)
    assert "%not code" not in module  # markdown cells are not code


def test_notebook_line_map_points_back_to_cells(tmp_path, ch4):
    path, sources = make_notebook(tmp_path / "ch4.ipynb", ch4)
    module, line_map = notebook_source(path)
    lines = module.splitlines()
    assert len(line_map) == len(lines)
    magic_cell = len(sources) + 2  # cells are numbered as they appear, the markdown cell included
    index = lines.index("# %timeit x")
    assert line_map[index] == (magic_cell, 2)


def test_a_cell_with_a_syntax_error_costs_only_what_it_defines_and_is_named(tmp_path, ch4):
    """A cell that is not Python is not read: it costs nothing but its own names, and a note on the
    exercise of a graded function it defines names the cell and the line."""
    path, sources = make_notebook(tmp_path / "ch4.ipynb", ch4,
                                  extra_cells=["y = 1\nz = (\n", "def poly(x, coeff):\n    return (coeff *\n"])
    sub = load(path, ch4, tmp_path / "scratch")
    assert sub.problems == {}
    cell = len(sources) + 4  # after the markdown, the magic and the first broken cell
    assert [grader_catalog().render(n, "en") for n in sub.notes["ex03_static_args"]] == [
        f"notebook cell {cell}, where poly is defined, is not graded: it is not Python the grader can read "
        f"(line 2: '(' was never closed); fix it and run the cell again"]
    assert set(sub.notes) == {"ex03_static_args"}


def test_notebook_in_a_folder_is_found(tmp_path, ch4):
    target = tmp_path / "ch4"
    target.mkdir()
    make_notebook(target / "work.ipynb", ch4)
    sub = load(target, ch4, tmp_path / "scratch")
    assert sub.kind == "notebook" and sub.files == ["work.ipynb"]


def test_notebook_in_a_zip(tmp_path, ch4):
    path, _ = make_notebook(tmp_path / "work.ipynb", ch4)
    archive = make_zip(tmp_path / "ch4.zip", {"ch4/work.ipynb": path.read_bytes()})
    sub = load(archive, ch4, tmp_path / "scratch")
    assert sub.kind == "zip+notebook" and sub.problems == {}


def test_unreadable_notebook(tmp_path, ch4):
    path = tmp_path / "ch4.ipynb"
    path.write_text("{ not json")
    assert error_key(path, ch4, tmp_path) == "error.bad_notebook"


def test_notebook_continuation_lines_are_not_magics(tmp_path, ch4):
    cell = "same = (1\n        != 2)\nrest = (7\n        % 3)"
    compile(cell, "cell", "exec")  # valid Python
    path, _ = make_notebook(tmp_path / "ch4.ipynb", ch4, extra_cells=[cell])
    sub = load(path, ch4, tmp_path / "scratch")
    assert sub.problems == {}


# ------------------------------------------------------------------ the chapter
def test_resolve_chapter_from_folder_name(folder):
    assert resolve_chapter(folder, None).id == "ch4"


def test_resolve_chapter_from_file_names(tmp_path, folder):
    alice = tmp_path / "alice"
    shutil.copytree(folder, alice)
    assert resolve_chapter(alice, None).id == "ch4"


def test_resolve_chapter_from_notebook_name(tmp_path, ch4):
    path, _ = make_notebook(tmp_path / "ch4.ipynb", ch4)
    assert resolve_chapter(path, None).id == "ch4"


def test_resolve_chapter_requested(tmp_path, folder):
    alice = tmp_path / "alice"
    alice.mkdir()
    assert resolve_chapter(alice, "ch4").id == "ch4"


def test_resolve_chapter_unknown_requested(folder):
    with pytest.raises(SubmissionError) as info:
        resolve_chapter(folder, "ch99")
    assert info.value.text.key == "error.chapter"
    assert "ch99" in info.value.text.args["detail"]


def test_resolve_chapter_cannot_tell(tmp_path, two_chapters):
    bob = tmp_path / "bob"
    bob.mkdir()
    (bob / "homework.py").write_text("x = 1\n")
    with pytest.raises(SubmissionError) as info:
        resolve_chapter(bob, None)
    assert info.value.text.key == "error.which_chapter"
    assert info.value.text.args["name"] == "bob"


def test_resolve_chapter_with_one_chapter_installed_is_that_chapter(tmp_path):
    bob = tmp_path / "bob"
    bob.mkdir()
    (bob / "homework.py").write_text("x = 1\n")
    assert resolve_chapter(bob, None).id == "ch4"


def test_resolve_chapter_missing_path(tmp_path):
    with pytest.raises(SubmissionError) as info:
        resolve_chapter(tmp_path / "nowhere", None)
    assert info.value.text.key == "error.no_such_path"
