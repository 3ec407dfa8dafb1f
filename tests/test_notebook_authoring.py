"""The generated student notebook (grader/authoring/notebook.py): the committed one is
what generation gives, it is deterministic, it is made of the same source as the .py
stubs (instructions in both languages, one cell per function, provided code locked, a
check cell per exercise), and generating it never destroys a student's work."""
from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from grader.authoring.notebook import build, chunks, notebook_path, planned, solution_code, text_of
from grader.authoring.stubs import StubsInTheWay, make_stub, sync
from grader.chapter import load_chapter
from grader.cli import main

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "exercises" / "ch4.ipynb"
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def ch4():
    return load_chapter("ch4")


@pytest.fixture(scope="module")
def nb(ch4):
    return nbformat.read(str(NOTEBOOK), as_version=4)


def _role(cell) -> str:
    return cell.metadata["grader"]["role"]


def _of(nb, exercise: str) -> list:
    return [c for c in nb.cells if c.metadata["grader"].get("exercise") == exercise]


def _normal(code: str) -> str:
    """Code with its blank lines dropped (cells are separated differently than a module's parts)."""
    return "\n".join(line for line in code.splitlines() if line.strip())


def test_the_committed_notebook_is_what_generation_gives(ch4):
    assert notebook_path(ch4) == NOTEBOOK
    assert sync([planned(ch4)], write=False) == [], "exercises/ch4.ipynb is out of date: run grade dev stubs"
    assert main(["dev", "stubs", "--check", "--lang", "en"]) == 0


def test_generation_is_deterministic_with_no_outputs_and_stable_ids(ch4, nb):
    assert text_of(build(ch4)) == text_of(build(ch4)) == NOTEBOOK.read_text(encoding="utf-8")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count is None and c.outputs == [] for c in code)
    ids = [c.id for c in nb.cells]
    assert len(set(ids)) == len(ids) and "ex02-piecewise" in ids and "ex06-provided" in ids
    nbformat.validate(nb)


def test_each_exercise_has_bilingual_instructions_one_cell_per_function_and_a_check_cell(ch4, nb):
    for ex in ch4.exercises:
        cells = _of(nb, ex.id)
        tag = ex.id.split("_")[0]
        assert _role(cells[0]) == "instructions" and cells[0].cell_type == "markdown"
        assert CJK.search(cells[0].source) and "English:" in cells[0].source and "中文：" in cells[0].source
        assert _role(cells[-1]) == "check" and cells[-1].source == f'check("{tag}")'
        assert cells[-1].metadata["editable"] is False and "check" in cells[-1].metadata["tags"]
        stubs = [c for c in cells if _role(c) == "stub"]
        for name in ex.functions:  # every graded function is written in exactly one cell, named after it
            defining = [c for c in stubs if re.search(rf"^(def {name}\(|{name} = )", c.source, re.M)]
            assert [c.id for c in defining] == [f"{tag}-{name}"], (ex.id, name)
    assert nb.cells[-1].source == "check()" and "from grader.notebook import check" in nb.cells[1].source


def test_provided_code_is_in_a_cell_marked_not_to_be_changed(nb):
    provided = [c for c in nb.cells if _role(c) == "provided"]
    assert [c.id for c in provided] == ["ex06-provided"]
    cell = provided[0]
    assert "DO NOT CHANGE" in cell.source and "请勿修改" in cell.source and "def heavy(" in cell.source
    assert cell.metadata["editable"] is False and cell.metadata["deletable"] is False


@pytest.mark.parametrize("solved", [False, True], ids=["stubs", "solutions"])
def test_the_cells_are_made_of_the_same_source_as_the_stubs(ch4, solved):
    """An exercise's code cells, one after the other, are its stub module (or its solution)
    without the docstring: the notebook and the .py files cannot tell different stories."""
    nb = build(ch4, solved=solved)
    for ex in ch4.exercises:
        source = (ch4.solutions / ex.filename).read_text(encoding="utf-8")
        module = solution_code(source) if solved else make_stub(source)
        docstring_end = module.index('"""', 3) + 3
        cells = [c.source for c in _of(nb, ex.id) if c.cell_type == "code" and _role(c) != "check"]
        assert _normal("\n".join(cells)) == _normal(module[docstring_end:]), ex.id


def test_a_solution_block_and_its_stub_stay_in_one_cell():
    source = ('"""doc"""\nimport jax\n\n\n# BEGIN SOLUTION\n@jax.jit\ndef core(x):\n    return x\n# END SOLUTION\n'
              "# BEGIN STUB\n#| # TODO: write core here\n# END STUB\n\n\ndef outer(x):\n    return core(x)\n")
    parts = chunks(source)
    assert [(p.role, p.name) for p in parts] == [("imports", "imports"), ("stub", "core"), ("stub", "outer")]
    assert make_stub(parts[1].text).strip() == "# TODO: write core here"
    assert solution_code(parts[1].text).startswith("@jax.jit\ndef core(x):")


def test_generating_the_notebook_never_destroys_work(tmp_path, ch4):
    stubs = tmp_path / "exercises" / "ch4"
    shutil.copytree(ch4.stubs, stubs, ignore=shutil.ignore_patterns(".grade"))
    chapter = dataclasses.replace(ch4, stubs=stubs)
    target = notebook_path(chapter)
    assert [(d.path, d.reason) for d in sync([planned(chapter)], write=True)] == [(target, "missing")]
    assert target.read_text(encoding="utf-8") == NOTEBOOK.read_text(encoding="utf-8")
    work = nbformat.read(str(target), as_version=4)
    work.cells[4].source = "def softmax_raw(x):\n    return x  # my answer"
    nbformat.write(work, str(target))
    mine = target.read_text(encoding="utf-8")
    with pytest.raises(StubsInTheWay) as stopped:
        sync([planned(chapter)], write=True)
    assert [d.path for d in stopped.value.diffs] == [target] and target.read_text(encoding="utf-8") == mine
    written = sync([planned(chapter)], write=True, force=True)
    assert written[0].backup.read_text(encoding="utf-8") == mine
    assert target.read_text(encoding="utf-8") == NOTEBOOK.read_text(encoding="utf-8")
