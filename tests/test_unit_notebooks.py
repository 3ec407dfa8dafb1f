"""Unit tests of grader/ipynb.py (a saved notebook and a kernel's history as one
module, cells named in messages, notes on the cells) and of how reports show notes.
Nothing is graded here; tests/test_notebook.py runs a real kernel."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from grader.cell_map import CellMap
from grader.cell_notes import cell_notes
from grader.chapter import load_chapter
from grader.i18n import T, grader_catalog
from grader.ipynb import Cell, Run, history_cells, module_of, read_cells
from grader.replay import notebook_modules
from grader.report.render import render_markdown, render_terminal
from grader.report.inline import SCOPE, render_inline
from grader.results import CheckResult, ExerciseResult, Report, report_to_dict
from grader.submission import load

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "ch4"
SETUP = "from grader.notebook import check"


@pytest.fixture(scope="module")
def ch4():
    return load_chapter("ch4")


def words(text, lang="en"):
    return grader_catalog().render(text, lang)


def functions(chapter) -> dict[str, str]:
    return {name: ex.id for ex in chapter.exercises for name in ex.functions}


# ------------------------------------------------------------------ a kernel's history
def test_a_rerun_replaces_the_earlier_run_and_tests_are_not_replayed():
    runs = [Run(1, SETUP), Run(2, "import jax.numpy as jnp"), Run(3, "def f(x):\n    return x"),
            Run(4, "f(jnp.ones(3))"), Run(5, "def f(x):\n    return jnp.abs(x)"), Run(6, 'check("ex02")')]
    cells = history_cells(runs)
    assert [c.number for c in cells] == [2, 5]  # the setup, the test call, the old f and the check are gone
    assert [words(c.label) for c in cells] == ["cell In [2]", "cell In [5]"]


def test_a_name_used_before_it_is_bound_again_keeps_its_run():
    runs = [Run(1, "import jax"), Run(2, "g = jax.jit(abs)"), Run(3, "import jax"), Run(4, "count = 1"),
            Run(5, "count += 1")]
    assert [c.number for c in history_cells(runs)] == [1, 2, 3, 4, 5]  # In [2] needs In [1]; += reads count


def test_runs_that_failed_are_not_replayed_and_say_why():
    runs = [Run(1, "def piecewise(x):\n    return x"), Run(2, "def piecewise(x):\n    return x +\n"),
            Run(3, "def clip_by_norm(x, m):\n    return x\nboom = 1 / 0", error="ZeroDivisionError")]
    cells = history_cells(runs)
    assert [(c.number, c.not_run) for c in cells] == [
        (1, None), (2, T("notebook.syntax_error")), (3, T("notebook.raised", type="ZeroDivisionError"))]
    source, _ = module_of(cells, "session.ipynb", history=True)
    assert "x +" not in source and "boom" not in source and "return x" in source


def test_with_cell_ids_only_the_last_run_of_a_cell_counts_and_other_cells_are_remembered():
    runs = [Run(1, "def piecewise(x):\n    return x", "a"), Run(2, "def piecewise(x):\n    return -x", "a"),
            Run(3, "def piecewise(x):\n    return 2 * x", "b")]
    cells = history_cells(runs)
    # In [1] is kept only to say that it was dropped (the cell ran again as In [2], with other code)
    assert [(c.number, c.superseded, c.rerun_as) for c in cells] == [(1, False, 2), (2, True, None), (3, False, None)]
    source, _ = module_of(cells, "s.ipynb", history=True)
    assert "2 * x" in source and "-x" not in source and "return x\n" not in source


def test_grader_statements_and_magics_are_commented_out_line_for_line():
    runs = [Run(1, "from grader.notebook import check as grade_it\nimport numpy as np"),
            Run(2, "%timeit np.ones(3)\nr = grade_it('ex02')\nassert r.passed\ny = np.ones(2)")]
    source, cells = module_of(history_cells(runs), "s.ipynb", history=True)
    lines = source.splitlines()
    assert lines[:2] == ["# from grader.notebook import check as grade_it", "import numpy as np"]
    assert lines[3:7] == ["pass  # %timeit np.ones(3)", "# r = grade_it('ex02')", "# assert r.passed", "y = np.ones(2)"]
    assert cells.cell_of(7) == (2, 4)


# ------------------------------------------------------------------ Jupyter habits
def test_magics_become_plain_python_line_for_line_and_blocks_stay_whole():
    from grader.magics import without_magics as _without_magics

    source = ("%matplotlib inline\n!pip install jax\nfor i in range(3):\n    %time piecewise(x)\n"
              "y = %time piecewise(x)\nfiles = !ls\nbest = %timeit -o piecewise(x)\nok = a != b")
    lines = _without_magics(source).split("\n")
    assert lines == ["pass  # %matplotlib inline", "pass  # !pip install jax", "for i in range(3):",
                     "    pass  # %time piecewise(x)", "y = piecewise(x)", "files = None  # !ls",
                     "best = None  # %timeit -o piecewise(x)", "ok = a != b"]
    compile("\n".join(lines), "cell", "exec")  # the indented magic no longer breaks its loop
    kept = _without_magics("%%time\ndef piecewise(x):\n    return x * 2").split("\n")
    assert kept == ["pass  # %%time", "def piecewise(x):", "    return x * 2"]  # %%time runs its body: kept
    assert _without_magics("%%timeit\npiecewise(x)").split("\n") == ["pass  # %%timeit", "# piecewise(x)"]
    assert _without_magics("%%bash\nrm -rf /").split("\n") == ["pass  # %%bash", "# rm -rf /"]


def _ran_notebook(cells: list[tuple[str, int | None, bool]]):
    """A saved notebook: (source, execution count, whether its output is an error) per code cell,
    behind a markdown cell."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# ch4")]
    for source, count, error in cells:
        cell = nbformat.v4.new_code_cell(source, execution_count=count)
        if error:
            cell.outputs = [nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="", traceback=[])]
        nb.cells.append(cell)
    return nb


def test_a_saved_notebook_is_read_in_the_order_its_cells_last_ran():
    from grader.ipynb import saved_cells

    nb = _ran_notebook([("def piecewise(x):\n    return -x", 5, False),      # cell 2, run last: counts
                 ("import jax.numpy as jnp", 1, False),                  # cell 3
                 ("def piecewise(x):\n    return x * 2", 2, False),   # cell 4, run before cell 2
                 ("rows = 1 / 0", 3, True),                             # cell 5, raised when it ran
                 ("def poly(x, coeff):\n    return x", None, False),   # cell 6, never run
                 ("import matplotlib.pyplot as plt\nplt.plot([1, 2])", 4, False)])  # cell 7, a stray plot
    cells = saved_cells(nb)
    assert [c.number for c in cells] == [6, 3, 4, 5, 7, 2]  # the never-run one first (count 0), then as they ran
    why = {c.number: words(c.not_run) if c.not_run is not None else None for c in cells}
    assert why[6] == "it was never run (the notebook's other cells were)"
    assert why[5] == "it raised ZeroDivisionError when it ran"
    assert why[2] is why[3] is why[4] is why[7] is None  # the plot is read; nothing graded needs it (grader.replay)
    source, _ = module_of(cells, "ch4.ipynb")
    assert source.index("return x * 2") < source.index("return -x")  # the later run wins, as in the kernel
    assert "1 / 0" not in source and "return x\n" not in source
    made = notebook_modules(cells, "ch4.ipynb", history=False,
                            functions={"ex02_where": ("piecewise",)})
    assert "matplotlib" not in made.modules["ex02_where"] and "return -x" in made.modules["ex02_where"]
    assert made.not_replayed == [3, 4, 7]  # jnp unused by the last piecewise; the earlier one; the plot


def test_a_notebook_never_run_is_read_in_page_order_whole():
    from grader.ipynb import saved_cells

    cells = saved_cells(_ran_notebook([("def piecewise(x):\n    return -x", None, False),
                                ("def piecewise(x):\n    return x * 2", None, False)]))
    assert [(c.number, c.not_run) for c in cells] == [(2, None), (3, None)]


def test_a_kernels_run_that_imports_a_module_the_grader_lacks_is_not_replayed_when_nothing_needs_it():
    runs = [Run(1, "import matplotlib.pyplot as plt\nimport jax.numpy as jnp"),
            Run(2, "def piecewise(x):\n    return jnp.abs(x)"), Run(3, "fig = plt.figure()\nplt.plot([1])")]
    made = notebook_modules(history_cells(runs), "s.ipynb", history=True,
                            functions={"ex02_where": ("piecewise",)})
    lines = [line for line in made.modules["ex02_where"].splitlines() if line]
    assert lines == ["import jax.numpy as jnp", "def piecewise(x):", "    return jnp.abs(x)"]
    assert made.replayed == [1, 2] and made.not_replayed == [3]


# ------------------------------------------------------------------ naming the cells
def test_a_line_of_the_module_reads_as_its_cell_in_both_languages():
    saved = CellMap("ch4.ipynb", [(3, 1), (3, 2), (3, 3)])
    assert words(saved.locate("ex02_where.py:2")) == "notebook cell 3, line 2"
    assert words(saved.locate("ex02_where.py:2"), "zh") == "笔记本第 3 个单元格第 2 行"
    assert saved.locate("ex02_where.py") == "ch4.ipynb"  # the module itself is the notebook
    ran = CellMap("session.ipynb", [(12, 1), (12, 2)], history=True)
    assert words(ran.locate("ex02_where.py:2")) == "cell In [12], line 2"
    assert words(ran.locate("ex02_where.py")) == "the cells you ran"
    assert ran.locate(None) == "?" and ran.plain(12) == "In [12]"


def test_a_missing_function_names_the_notebook_not_a_generated_module(tmp_path, ch4):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import jax\n\n@jax.jit\ndef piecewise(x):\n    return x")]
    nbformat.write(nb, str(tmp_path / "ch4.ipynb"))
    sub = load(tmp_path / "ch4.ipynb", ch4, tmp_path / "scratch")
    message = T("call.missing", name="clip_by_norm", file="ex02_where.py")
    from grader.verdicts import _located

    assert words(_located(message, sub.locate)) == "clip_by_norm is not defined in ch4.ipynb"


# ------------------------------------------------------------------ notes
def _saved(tmp_path: Path, sources: list[str]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# ch4")] + [nbformat.v4.new_code_cell(s) for s in sources]
    path = tmp_path / "ch4.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_a_function_defined_in_two_cells_is_noted_on_its_exercise(tmp_path, ch4):
    ex02 = (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8")
    path = _saved(tmp_path, [ex02, "@jax.jit\ndef piecewise(x):\n    return jnp.where(x > 0, x * x, x / 2)"])
    sub = load(path, ch4, tmp_path / "scratch")
    assert list(sub.notes) == ["ex02_where"]
    assert [words(n) for n in sub.notes["ex02_where"]] == [
        "piecewise is defined in more than one cell (notebook cell 2, then notebook cell 3): the last one, "
        "notebook cell 3, is the one graded, as in the kernel"]
    assert "在多个单元格中定义" in words(sub.notes["ex02_where"][0], "zh")


def test_a_helper_defined_twice_is_noted_on_the_exercise_that_uses_it(ch4):
    cells = [Cell(1, "def _core(x):\n    return x"), Cell(2, "def masked_mean_sq(x):\n    return _core(x)"),
             Cell(3, "def _core(x):\n    return 2 * x"), Cell(4, "def unused(x):\n    return x"),
             Cell(5, "def unused(x):\n    return 1")]
    notes = cell_notes(cells, functions(ch4)).by_exercise
    assert list(notes) == ["ex04_cache_keys"] and "_core is defined in more than one cell" in words(notes[
        "ex04_cache_keys"][0])


def test_a_failed_run_of_a_graded_function_is_noted_unless_a_later_run_defines_it(ch4):
    cells = history_cells([Run(3, "def poly(x, c):\n    return c * x **\n"),
                           Run(4, "def reduce_along(x, axis):\n    return x\nz = 1 / 0", error="ZeroDivisionError"),
                           Run(5, "def reduce_along(x, axis):\n    return x.sum(axis)")])
    notes = cell_notes(cells, functions(ch4)).by_exercise
    assert [words(n) for n in notes["ex03_static_args"]] == [
        "cell In [3], where poly is defined, is not graded: it had a syntax error when it ran; fix it and run "
        "the cell again"]


def test_the_generated_notebooks_own_cells_grade_nothing_in_the_sandbox(tmp_path, ch4):
    """The setup and check cells of a saved notebook are the grader's: commented out."""
    path = _saved(tmp_path, [SETUP, "x = 1", 'check("ex02")', "result = check()\nassert result.passed"])
    cells, history = read_cells(path)
    source, _ = module_of(cells, path.name)
    assert not history
    assert [line for line in source.splitlines() if line and not line.startswith("#")] == ["x = 1"]


# ------------------------------------------------------------------ reports show the notes
@pytest.fixture(scope="module")
def noted_report() -> Report:
    check = CheckResult(id="piecewise.values", title=T("ui.check"), category="numeric", points=0, max_points=1.5,
                        status="failed", message=T("notebook.at", cell=T("notebook.run", count=7), line=3),
                        hint=T("ui.hint"), measured={"cases": 4})
    ex = ExerciseResult(id="ex02_where", title=T("ui.exercise"), section="1", checks=[check], status="failed",
                        notes=[T("notebook.redefined", name="piecewise", earlier=[T("notebook.run", count=3)],
                                 last=T("notebook.run", count=7))])
    return Report(chapter="ch4", chapter_title=T("ui.check"), seed=1, started_at="2025-01-01T00:00:00+00:00",
                  duration_s=1.0, submission={"path": "s.ipynb", "kind": "notebook", "from": "kernel history"},
                  environment={}, exercises=[ex])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_reports_show_the_notes(noted_report, lang):
    catalog = grader_catalog()
    note = words(noted_report.exercises[0].notes[0], lang)
    assert report_to_dict(noted_report, catalog, lang)["exercises"][0]["notes"] == [note]
    assert note in render_markdown(noted_report, catalog, lang)
    terminal = " ".join(render_terminal(noted_report, catalog, lang, width=400).split())
    assert note in terminal and words(T("ui.note"), lang) in terminal
    assert words(T("notebook.next_cells", exercise="ex02_where"), lang) in terminal  # not a file to open


def test_the_inline_fragment_is_scoped_and_shows_check_seen_hint_and_numbers(noted_report):
    fragment = render_inline(noted_report, grader_catalog(), "en", footer=["Report: r.md"])
    assert fragment.startswith(f'<div class="{SCOPE}"><style>')
    style = fragment.split("<style>")[1].split("</style>")[0]
    rules = [rule.split("{")[0].strip() for rule in style.split("}") if "{" in rule]
    assert rules and all(selector.strip().startswith(f".{SCOPE}") for rule in rules for selector in rule.split(","))
    for text in ("piecewise.values", "cell In [7], line 3", "Hint", "Measured", "cases", "Report: r.md",
                 "0 / 1.5", "piecewise is defined in more than one cell"):
        assert text in fragment.replace("&quot;", '"'), text


def test_a_history_notebook_is_read_as_runs(tmp_path):
    from grader.notebook import write_session

    path = tmp_path / "session.ipynb"
    write_session(path, [Run(1, SETUP), Run(2, "def f(x):\n    return x", "cell-a"),
                         Run(3, "def g(:", error="SyntaxError")])
    assert json.loads(path.read_text(encoding="utf-8"))["metadata"]["grader"] == {"history": True}
    cells, history = read_cells(path)
    assert history and [(c.number, c.not_run is None) for c in cells] == [(2, True), (3, False)]


def test_a_notebook_of_version_4_is_read_as_nbformat_reads_it_without_importing_nbformat(tmp_path, monkeypatch):
    """grader.ipynb reads a notebook of nbformat 4 as JSON (importing nbformat costs 2 s of CPU where jsonschema's
    format checkers are installed: nbformat.json_compat imports jsonschema, whose _format imports rfc3987_syntax,
    which builds 38 Lark parsers as it is imported); the cells it grades are those read through nbformat
    (``nbformat/__init__.py`` ``reads``: the JSON parsed, nothing converted within version 4, the schema's findings
    only logged; ``nbformat/v4/rwbase.py`` ``rejoin_lines``: a source's list of lines joined), for saved notebooks
    with outputs, errors and sources as lists of lines, one of 4.4 with ids, and a kernel's history; what check()
    writes is a notebook nbformat's own ``validate`` accepts."""
    import subprocess
    import sys

    from grader import ipynb
    from grader.notebook import write_session

    fixtures = sorted((Path(__file__).parent / "fixtures" / "notebooks").glob("*.ipynb"))
    older = json.loads(fixtures[0].read_text(encoding="utf-8"))
    older["nbformat_minor"] = 4  # a front end's 4.4 that writes ids all the same
    (tmp_path / "older.ipynb").write_text(json.dumps(older), encoding="utf-8")
    history = tmp_path / "session.ipynb"
    write_session(history, [Run(1, SETUP), Run(2, "def f(x):\n    return x", "cell-a"),
                            Run(3, "def g(:", error="SyntaxError"), Run(4, "def f(x):\n    return 2 * x", "cell-a")])
    nbformat.validate(nbformat.read(str(history), as_version=4))  # what check() writes is a valid notebook
    paths = [*fixtures, Path(__file__).parent.parent / "exercises" / "ch4.ipynb", tmp_path / "older.ipynb", history]
    read = [read_cells(path) for path in paths]
    monkeypatch.setattr(ipynb, "_version_4", lambda text: None)  # every one through nbformat, as before
    assert read == [read_cells(path) for path in paths]
    assert any(c.not_run is not None for cells, _ in read for c in cells) and read[-1][1]
    code = (f"import sys; from pathlib import Path; from grader.ipynb import read_cells\n"
            f"for p in {[str(p) for p in paths]!r}: read_cells(Path(p))\n"
            "print(sorted(m for m in ('nbformat', 'jsonschema') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:]


# ------------------------------------------------------------------ check() without grading anything
def test_check_outside_a_kernel_says_so_in_one_line():
    from grader.notebook import check

    result = check("ex02", lang="zh")
    assert result.error == words(T("notebook.not_in_kernel"), "zh") and "\n" not in result.error
    assert repr(result) == result.error and result.error in result._repr_html_() and not result.passed
    assert check(lang="fr").error == "check(lang='fr'): the language is one of en, zh"


def test_an_unknown_exercise_is_one_line_not_a_traceback(tmp_path):
    from grader.notebook import _grade_order, write_session

    session = tmp_path / "session.ipynb"
    write_session(session, [Run(1, "import jax")])
    result = _grade_order({"session": str(session), "exercises": ["ex99"], "lang": "en", "chapter": None,
                           "report_dir": str(tmp_path), "seed": 1, "timeout_s": 60, "notebook": None})
    assert result.error and "ex99" in result.error and "\n" not in result.error
    assert result.score == 0 and not (tmp_path / "report.partial.json").exists()
