"""A saved notebook graded as the kernel ran it (issue "grading truth, third round"), on a real kernel.

Two habits that cost points before: a first cell whose last import fails (``import sklearn`` where it is
not installed: ModuleNotFoundError) was dropped whole, its ``import jax`` with it, so every later cell
lost ``jnp`` (4.5/80 for a notebook otherwise right); an answer cell that ends in
``assert jax.devices()[0].platform == "gpu"`` on a CPU was dropped whole too ("not attempted" for functions
that the kernel had). The kernel ran the statements before the one that raised: so does the grading
(the saved traceback names the line), and the report says what was not graded and why.
"""
from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from conftest import ROOT, SOLUTIONS

pytestmark = pytest.mark.slow
nbclient = pytest.importorskip("nbclient", reason="the notebook extra is not installed: pip install -e '.[notebook]'")
pytest.importorskip("ipykernel", reason="the notebook extra is not installed: pip install -e '.[notebook]'")


def _without_imports(path) -> str:
    """A solution module's code without its top-level imports (the notebook's first cell makes them)."""
    import ast

    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.split("\n")
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for i in range(node.lineno - 1, node.end_lineno):
                lines[i] = ""
    return "\n".join(lines)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """The notebook, run on a real kernel (errors allowed, as a student runs on), then saved."""
    folder = tmp_path_factory.mktemp("truth")
    cells = [
        "import jax\nimport jax.numpy as jnp\nimport no_such_module_like_sklearn",             # raises at line 3
        _without_imports(SOLUTIONS / "ex02_where.py") + '\nassert jax.devices()[0].platform == "gpu"',  # at the end
        _without_imports(SOLUTIONS / "ex01_jit_forms.py"),
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(folder)}}).execute()
    errors = [o.get("ename") for cell in nb.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == ["ModuleNotFoundError", "AssertionError"], errors
    path = folder / "ch4.ipynb"
    nbformat.write(nb, path)
    return path


def test_the_statements_before_the_one_that_raised_are_graded(ran):
    done = subprocess.run([sys.executable, "-m", "grader", str(ran), "-k", "1", "-k", "2", "--seed", "5", "--json",
                           "--lang", "en", "--report-dir", str(ran.parent / "out")], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    by_id = {e["id"]: e for e in report["exercises"]}
    # the kernel had jax, jnp and every function of ex01 and ex02: full marks, as check() in it would give
    assert (by_id["ex01_jit_forms"]["score"], by_id["ex02_where"]["score"]) == (10, 10), \
        [(c["id"], c["status"], c["message"]) for e in report["exercises"] for c in e["checks"]
         if c["status"] != "passed"]


def test_what_the_kernel_never_ran_is_still_not_graded(tmp_path):
    """A function defined after the statement that raised never existed in the kernel: not graded, and said."""
    from grader.cell_notes import cell_notes
    from grader.ipynb import saved_cells

    traceback = ["\x1b[0;31m---------------------------------------------------------------------------\x1b[0m",
                 "\x1b[0;31mZeroDivisionError\x1b[0m                         Traceback (most recent call last)",
                 "Cell \x1b[0;32mIn[4], line 3\x1b[0m\n\x1b[1;32m      1\x1b[0m \x1b[38;5;28;01mdef\x1b[39;00m "
                 "\x1b[38;5;21mpiecewise\x1b[39m(x): ...\n\x1b[0;32m----> 3\x1b[0m \x1b[38;5;241m1\x1b[39m"
                 "\x1b[38;5;241m/\x1b[39m\x1b[38;5;241m0\x1b[39m\n",
                 "\x1b[0;31mZeroDivisionError\x1b[0m: division by zero"]
    cell = nbformat.v4.new_code_cell("def piecewise(x):\n    return x\n1 / 0\ndef clip_by_norm(x, m):\n    return x",
                                     execution_count=4)
    cell.outputs = [nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="division by zero",
                                           traceback=traceback)]
    nb = nbformat.v4.new_notebook(cells=[cell])
    (read,) = saved_cells(nb)
    assert read.graded and read.raised_at == (3, 3, "ZeroDivisionError")
    assert read.code.split("\n")[:2] == ["def piecewise(x):", "    return x"]
    assert all(line.strip().startswith("#") for line in read.code.split("\n")[2:] if line.strip())
    notes = cell_notes([read], {"piecewise": "ex02_where", "clip_by_norm": "ex02_where"}).by_exercise
    (note,) = notes["ex02_where"]
    assert note.args["name"] == "clip_by_norm"
    assert dict(note.args["why"].args) == {"type": "ZeroDivisionError", "line": 3}
