"""Unit tests of grader/replay.py: which statements of a notebook an exercise replays.

Nothing is graded here: the modules are built from cells and read back; the slow tests
(tests/test_notebook_tutorials.py) grade notebooks built this way."""
from __future__ import annotations

import ast

from grader.cell_map import CellMap
from grader.ipynb import Cell
from grader.replay import Replay, name_cells, notebook_modules
from grader.i18n import T, grader_catalog


def kept(source: str, *roots: str) -> list[str]:
    """The non-blank lines of the module that ``roots`` need."""
    module = Replay.of(source).module_for(set(roots))
    assert len(module.split("\n")) == len(source.split("\n"))  # the notebook's line layout
    ast.parse(module)
    return [line for line in module.split("\n") if line.strip()]


def test_an_import_is_kept_alias_by_alias():
    source = "import jax, seaborn as sns\nfrom tqdm.auto import tqdm, trange\nimport numpy as np\n" \
             "def f(x):\n    return jax.numpy.abs(x) + np.pi"
    assert kept(source, "f") == ["import jax", "import numpy as np", "def f(x):", "    return jax.numpy.abs(x) + np.pi"]


def test_a_functions_locals_are_not_the_notebooks_globals():
    """A tutorial binds x everywhere; a function whose x is its parameter does not need those cells
    (Python's symbol table tells a function's locals from its globals)."""
    source = ("import jax.numpy as jnp\nx = jnp.arange(1000000)\nassert x.device.platform == 'gpu'\n"
              "scale = 2.0\ndef f(x):\n    y = x * scale\n    return [y for x in range(2)]")
    assert kept(source, "f") == ["scale = 2.0", "def f(x):", "    y = x * scale", "    return [y for x in range(2)]"]
    assert "import jax.numpy as jnp" in kept(source + "\ng = jnp.abs", "f", "g")


def test_the_last_unconditional_binding_wins_and_a_reading_one_keeps_the_earlier():
    source = "a = 1\na = 2\nb = 1\nb = b + 1\nif cond:\n    c = 1\nc = 0\nd = 1\nif cond:\n    d = 2"
    assert kept(source, "a", "b", "c", "d") == ["a = 2", "b = 1", "b = b + 1", "c = 0", "d = 1", "if cond:",
                                                "    d = 2"]


def test_a_change_to_a_kept_object_is_kept_but_a_modules_method_is_not():
    source = ("import jax\nimport numpy as np\ncache = {}\ncache['k'] = 1\nlog = []\nlog.append(2)\n"
              "jax.config.update('jax_enable_x64', True)\nnp.random.seed(0)\nprint(cache)\n"
              "f(cache).block_until_ready()\ndef f(x):\n    return cache[x] + log[0] + np.pi")
    assert kept(source, "f") == ["import numpy as np", "cache = {}", "cache['k'] = 1", "log = []", "log.append(2)",
                                 "def f(x):", "    return cache[x] + log[0] + np.pi"]


def test_a_call_of_a_function_that_assigns_a_global_changes_that_global():
    """A tutorial's demo of an impure function (tests/fixtures/notebooks/gotchas_like.ipynb): the call
    ``print(jit(keep)(2.0))`` sets ``g``; a function reading ``g`` needs that print replayed."""
    source = ("g = None\ndef keep(v):\n    global g\n    g = v\n    return v\nprint(jit(keep)(2.0))\nprint(g)\n"
              "def f(x):\n    return x + g")
    assert kept(source, "f") == ["g = None", "def keep(v):", "    global g", "    g = v", "    return v",
                                 "print(jit(keep)(2.0))", "def f(x):", "    return x + g"]


def test_a_submodule_import_is_kept_for_the_module_it_loads_into():
    source = "import jax.experimental.sparse\nimport jax\ndef f(x):\n    return jax.experimental.sparse.todense(x)"
    assert kept(source, "f") == ["import jax.experimental.sparse", "import jax", "def f(x):",
                                 "    return jax.experimental.sparse.todense(x)"]


def test_decorators_and_defaults_are_read_and_multi_line_statements_kept_whole():
    source = ("from functools import partial\nimport jax\nALPHA = (1.0 +\n         0.5)\n"
              "@partial(jax.jit, static_argnames=('n',))\ndef f(x, n, a=ALPHA):\n    return x * a * n\n"
              "other = 1; f2 = 3")
    assert kept(source, "f") == source.split("\n")[:7]
    assert kept(source, "f2") == ["other = 1; f2 = 3"]  # statements that share a line go together


def _cells(*sources: str) -> list[Cell]:
    return [Cell(n, s, s, history=True) for n, s in enumerate(sources, start=1)]


def test_each_exercise_gets_its_own_module_and_an_exercise_no_cell_defines_is_untouched():
    cells = _cells("import jax\nimport seaborn as sns", "sns.set()\nassert jax.devices()[0].platform == 'gpu'",
                   "@jax.jit\ndef piecewise(x):\n    return x", "def poly(x, coeff):\n    return coeff * x",
                   "piecewise(1.0)\nplot = sns.lineplot([1])")
    made = notebook_modules(cells, "s.ipynb", history=True,
                            functions={"ex02": ("piecewise",), "ex03": ("poly",), "ex01": ("softmax",)})
    assert made.untouched == {"ex01"} and set(made.modules) == {"ex02", "ex03"}
    assert [line for line in made.modules["ex02"].split("\n") if line] == [
        "import jax", "@jax.jit", "def piecewise(x):", "    return x"]
    assert [line for line in made.modules["ex03"].split("\n") if line] == ["def poly(x, coeff):",
                                                                         "    return coeff * x"]
    assert made.replayed == [1, 3, 4] and made.not_replayed == [2, 5] and made.defined_in == {"piecewise": 3, "poly": 4}


def test_a_failed_check_names_the_cell_of_the_function_it_is_about():
    from grader.results import CheckResult, ExerciseResult

    def check(id_, message, status="failed"):
        return CheckResult(id=id_, title="t", category="numeric", points=0, max_points=1, status=status,
                           message=message)

    located = T("call.raised", function="poly", type="NameError", message="", where=T("notebook.at", cell="c", line=2))
    result = ExerciseResult(id="ex01", title="t", section="1", checks=[
        check("softmax.values", [T("numeric.values", what="softmax_raw(x: f32[4,9]) [big]", bad=1, total=2,
                                   max_abs=1.0, max_rel=1.0, rtol=0, atol=0, first="")]),
        check("poly.values", located), check("softmax.jitted", T("check.passed"), status="passed")])
    name_cells(result, {"softmax_raw": 7, "softmax": 8, "poly": 3}, CellMap("s.ipynb", [], history=True))
    text = grader_catalog().render(result.checks[0].message, "en")
    assert text.endswith("(softmax_raw from cell In [7])")  # the function the message names, not the check's id
    assert result.checks[1].message is located  # a message that names a cell already is left as it is
    assert result.checks[2].message == T("check.passed")


def test_a_later_definition_in_a_cell_not_graded_is_named_with_the_one_graded_and_the_hint_fixes_it():
    """A cell with a syntax error after a cell that defined the function plainly (issue "grading truth,
    third round"): the kernel still has the earlier function, so the grading checks it; before, the check
    read "not jitted: put @jax.jit ..." with no word of the cell the student last wrote."""
    from grader.cell_notes import cell_notes
    from grader.results import CheckResult, ExerciseResult

    broken = ("def softmax_raw(x):\n    return x\nsoftmax = jax.jit(softmax_raw)\n"
              "@jax.jit\ndef log_softmax(x)\n    return x")
    cells = [Cell(1, "def log_softmax(x):\n    return x", "def log_softmax(x):\n    return x"),
             Cell(2, broken, broken, not_run=T("notebook.syntax_error"))]
    found = cell_notes(cells, {"softmax_raw": "ex01", "softmax": "ex01", "log_softmax": "ex01"})
    # one note for the cell, naming each function it would have defined
    assert [grader_catalog().render(n, "en") for n in found.by_exercise["ex01"]] == [
        "notebook cell 2, where softmax_raw, softmax, log_softmax are defined, is not graded: it had a syntax "
        "error when it ran; fix it and run the cell again"]
    assert set(found.lost) == {"log_softmax"}  # the only one with an earlier definition that is graded
    result = ExerciseResult(id="ex01", title="t", section="1", checks=[CheckResult(
        id="log_softmax.jitted", title="t", category="jit", points=0, max_points=1, status="failed",
        message=T("structure.not_jitted", name="log_softmax", type="builtins.function"), hint="Put @jax.jit ...")])
    name_cells(result, {"log_softmax": 1}, CellMap("s.ipynb", []), found.lost)
    check = result.checks[0]
    assert grader_catalog().render(check.message, "en").endswith(
        "(log_softmax from notebook cell 1: its later definition in notebook cell 2 is not graded, it had a "
        "syntax error when it ran)")
    assert check.hint_id == "notebook.fix_lost" and "修正notebook" not in grader_catalog().render(check.hint, "zh")
    assert grader_catalog().render(check.hint, "en").startswith("Fix notebook cell 2 and run it again")
    # without a later lost definition: the plain cell name and the check's own hint
    result.checks[0].message, result.checks[0].hint, result.checks[0].hint_id = T("check.passed"), "own", "check"
    name_cells(result, {"log_softmax": 1}, CellMap("s.ipynb", []), {})
    assert result.checks[0].hint == "own"


def test_not_replayed_lists_cells_in_page_order_and_never_an_empty_one():
    """A saved notebook's last empty cell (never run: no execution count) sorted first in run order and
    was listed first among the cells "not replayed"; an empty cell is nothing to replay."""
    cells = [Cell(5, "", ""), Cell(1, "import jax", "import jax"), Cell(4, "print('hi')", "print('hi')"),
             Cell(3, "# only a comment", "# only a comment"), Cell(2, "def poly(x, c):\n    return c * x",
                                                                  "def poly(x, c):\n    return c * x")]
    made = notebook_modules(cells, "s.ipynb", history=False, functions={"ex03": ("poly",)})
    assert made.replayed == [2] and made.not_replayed == [1, 4]
