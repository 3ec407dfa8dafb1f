"""Unit tests of grader/authoring/stubs.py: stubs generated from the reference solutions."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conftest import all_chapters

from grader.authoring.stubs import StubFormatError, StubsInTheWay, generate, make_stub
from grader.chapter import load_chapter

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "ch4"
STUBS = ROOT / "exercises" / "ch4"
SOLUTION_FILES = sorted(p.name for p in SOLUTIONS.glob("*.py"))
#: every chapter's solution files (the structural tests follow every chapter)
CHAPTERS = all_chapters()
FILES = [(c, p.name) for c in CHAPTERS for p in sorted(c.solutions.glob("*.py"))]
FILE_IDS = [f"{c.id}/{name}" for c, name in FILES]


def test_every_exercise_of_the_chapter_has_a_solution_and_a_stub():
    chapter = load_chapter("ch4")
    assert chapter.solutions == SOLUTIONS.resolve() and chapter.stubs == STUBS.resolve()
    assert sorted(p.name for p in STUBS.glob("*.py")) == SOLUTION_FILES
    assert {ex.filename for ex in chapter.exercises} <= set(SOLUTION_FILES)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.id for c in CHAPTERS])
def test_stubs_are_up_to_date(chapter):
    assert generate(chapter.solutions, chapter.stubs, write=False) == []


@pytest.mark.parametrize("chapter, name", FILES, ids=FILE_IDS)
def test_make_stub_reproduces_the_stub_file(chapter, name):
    stub = make_stub((chapter.solutions / name).read_text(encoding="utf-8"), filename=name)
    assert stub == (chapter.stubs / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("chapter, name", FILES, ids=FILE_IDS)
def test_stub_has_todo_and_chinese_and_raises(chapter, name):
    stub = (chapter.stubs / name).read_text(encoding="utf-8")
    assert "TODO" in stub
    assert re.search(r"[\u4e00-\u9fff]", stub)
    assert "NotImplementedError" in stub
    assert "BEGIN SOLUTION" not in stub and "#|" not in stub
    compile(stub, name, "exec")  # the stub is valid Python


def _solution_and_outside_lines(source: str) -> tuple[set[str], set[str]]:
    inside, outside, state = set(), set(), "code"
    for line in source.splitlines():
        marker = re.match(r"^\s*# (BEGIN|END) (SOLUTION|STUB)\s*$", line)
        if marker:
            state = marker.group(2).lower() if marker.group(1) == "BEGIN" else "code"
            continue
        text = line.strip()
        if not text:
            continue
        if state == "solution":
            inside.add(text)
        elif state == "code":
            outside.add(text)
    return inside, outside


@pytest.mark.parametrize("chapter, name", FILES, ids=FILE_IDS)
def test_stub_holds_no_solution_line(chapter, name):
    source = (chapter.solutions / name).read_text(encoding="utf-8")
    inside, outside = _solution_and_outside_lines(source)
    assert inside, f"{name} has no SOLUTION block"
    leaked = {line for line in (chapter.stubs / name).read_text(encoding="utf-8").splitlines()
              if line.strip() in inside - outside}
    assert leaked == set()


def test_generate_writes_missing_stubs_and_keeps_edited_ones(tmp_path):
    solutions = tmp_path / "solutions"
    shutil.copytree(SOLUTIONS, solutions, ignore=shutil.ignore_patterns(".grade"))
    stubs = tmp_path / "exercises"
    shutil.copytree(STUBS, stubs, ignore=shutil.ignore_patterns(".grade"))
    (stubs / SOLUTION_FILES[0]).unlink()
    (stubs / SOLUTION_FILES[1]).write_text("# old\n", encoding="utf-8")  # not a git checkout: someone's work
    diffs = generate(solutions, stubs, write=False)
    assert [(d.name, d.reason, d.edited) for d in diffs] == [(SOLUTION_FILES[0], "missing", False),
                                                             (SOLUTION_FILES[1], "differs", True)]
    assert not (stubs / SOLUTION_FILES[0]).exists()  # write=False only reports
    with pytest.raises(StubsInTheWay) as info:
        generate(solutions, stubs, write=True)
    assert [d.name for d in info.value.diffs] == [SOLUTION_FILES[1]]
    assert not (stubs / SOLUTION_FILES[0]).exists()  # nothing at all was written
    written = generate(solutions, stubs, write=True, force=True)
    assert len(written) == 2 and written[0].backup is None
    assert written[1].backup.read_text(encoding="utf-8") == "# old\n"
    assert written[1].backup.parent == stubs and written[1].backup.name.startswith(SOLUTION_FILES[1] + ".bak-")
    assert generate(solutions, stubs, write=False) == []
    assert (stubs / SOLUTION_FILES[1]).read_text(encoding="utf-8") == (STUBS / SOLUTION_FILES[1]).read_text(
        encoding="utf-8")


# ------------------------------------------------------------------ the format
GOOD = """\
def f(x):
    # BEGIN SOLUTION
    return x + 1
    # END SOLUTION
    # BEGIN STUB
    #| # TODO: add one
    #|
    #| raise NotImplementedError("f")
    # END STUB


y = 2
"""


def test_make_stub_on_a_small_module():
    assert make_stub(GOOD) == ('def f(x):\n    # TODO: add one\n\n    raise NotImplementedError("f")\n'
                               "\n\ny = 2\n")


def test_blank_line_between_solution_and_stub_is_allowed():
    source = GOOD.replace("    # END SOLUTION\n", "    # END SOLUTION\n\n")
    assert "return x + 1" not in make_stub(source)


def test_empty_stub_block_is_allowed():
    source = "x = 1\n# BEGIN SOLUTION\ny = 2\n# END SOLUTION\n# BEGIN STUB\n# END STUB\n"
    assert make_stub(source) == "x = 1\n"


@pytest.mark.parametrize("source, message", [
    ("x = 1\n# END SOLUTION\n", "unexpected '# END SOLUTION'"),
    ("x = 1\n# END STUB\n", "unexpected '# END STUB'"),
    ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION\ny = 2\n", "must be followed by a STUB block"),
    ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n", "has no STUB block"),
    ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n# BEGIN SOLUTION\ny = 1\n# END SOLUTION\n", "has no STUB block"),
    ("# BEGIN STUB\n#| x = 1\n# END STUB\n", "must follow a SOLUTION block"),
    ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n# BEGIN STUB\nraise NotImplementedError\n# END STUB\n",
     "must start with '#|'"),
    ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n# BEGIN STUB\n#|raise NotImplementedError\n# END STUB\n",
     "must start with '#|'"),
    ("# BEGIN SOLUTION\nx = 1\n", "ends inside a SOLUTION block"),
    ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n# BEGIN STUB\n#| pass\n", "ends inside a STUB block"),
    ("# BEGIN SOLUTION\n# BEGIN SOLUTION\n", "unexpected '# BEGIN SOLUTION'"),
])
def test_format_errors(source, message):
    with pytest.raises(StubFormatError, match=re.escape(message)):
        make_stub(source, filename="sol.py")


def test_format_error_names_file_and_line():
    with pytest.raises(StubFormatError, match=r"^sol\.py:3: "):
        make_stub("a = 1\nb = 2\n# END SOLUTION\n", filename="sol.py")


def test_generate_reports_a_format_error(tmp_path):
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    (solutions / "ex01.py").write_text("# BEGIN SOLUTION\nx = 1\n", encoding="utf-8")
    with pytest.raises(StubFormatError, match="ex01.py"):
        generate(solutions, tmp_path / "exercises", write=True)
    assert not (tmp_path / "exercises" / "ex01.py").exists()
