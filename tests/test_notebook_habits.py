"""Jupyter habits, from the student's side: a notebook run as people run them, on a real kernel.

The notebook (ex02's three functions) has ``%time`` lines, ``!`` shell lines, a
``%%time`` cell that defines a graded function, a magic indented in a loop, a
``%timeit`` cell, a stray plotting cell (``matplotlib``, which the kernel has, from a
folder beside the notebook, and the grader does not), and ``piecewise`` defined twice.
Its cells are run out of order: the correct ``piecewise`` first, the wrong one (a Python
``if`` on a traced value) later, so the kernel holds the wrong one. Then ``check("ex02")``
in the notebook, and ``grade`` on the notebook as saved: never a crash, the same verdicts
check by check, and those of the kernel's state (``piecewise`` fails, the ``%%time`` and
the looped-magic cells' functions pass). About 30 seconds.
"""
from __future__ import annotations

import json

import nbformat
import pytest

from grader.cli import main

pytestmark = pytest.mark.slow
nbclient = pytest.importorskip("nbclient", reason="the notebook extra is not installed: pip install -e '.[notebook]'")
pytest.importorskip("ipykernel", reason="the notebook extra is not installed: pip install -e '.[notebook]'")

from test_notebook import JupyterLabLikeClient  # noqa: E402 - after the skips above

SEED = 2468
CELLS = [
    "from grader.notebook import check",                                                          # 0
    "!echo setting up\n%time 1 + 1",                                                            # 1
    "import jax\nimport jax.numpy as jnp",                                                       # 2
    "@jax.jit\ndef piecewise(x):\n    if x > 0:\n        return x * x\n    return 0.5 * x",       # 3: wrong
    "%%time\n@jax.jit\ndef normalize_if_positive(x):\n    s = jnp.sum(x)\n"
    "    return jnp.where(s > 0, x / jnp.where(s > 0, s, 1.0), x)",                                # 4: %%time
    "for _ in range(2):\n    %time jnp.ones(3).block_until_ready()\n\n@jax.jit\n"
    "def clip_by_norm(x, max_norm):\n    norm = jnp.sqrt(jnp.sum(x * x))\n"
    "    return jnp.where(norm > max_norm, x * (max_norm / jnp.where(norm > 0, norm, 1.0)), x)",   # 5: looped magic
    "%timeit clip_by_norm(jnp.ones(4), 1.0).block_until_ready()",                                 # 6
    "import matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot([1, 2, 3])",                    # 7: a stray plot
    "@jax.jit\ndef piecewise(x):\n    return jnp.where(x > 0, x * x, 0.5 * x)",                    # 8: right
    f'result = check("ex02", seed={SEED}, lang="en")\nresult',                                     # 9
]
#: the correct piecewise (cell 8) runs before the wrong one (cell 3): the kernel holds the wrong one
ORDER = [0, 1, 2, 8, 4, 5, 6, 7, 3, 9]
#: a matplotlib the kernel can import (it runs in this folder) and the grader cannot
FAKE_MATPLOTLIB = {"matplotlib/__init__.py": "", "matplotlib/pyplot.py": "def figure():\n    return object()\n\n"
                   "def plot(*args):\n    return []\n"}


def _verdicts(report: dict) -> list[tuple]:
    return [(c["id"], c["status"], c["points"]) for ex in report["exercises"] for c in ex["checks"]]


@pytest.fixture(scope="module")
def habits(tmp_path_factory):
    folder = tmp_path_factory.mktemp("habits")
    for name, text in FAKE_MATPLOTLIB.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# ch4 · ex02")] + [nbformat.v4.new_code_cell(c) for c in CELLS]
    client = JupyterLabLikeClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}})
    with client.setup_kernel():
        for index in ORDER:
            client.execute_cell(nb.cells[index + 1], index + 1)
    saved = folder / "ch4.ipynb"
    nbformat.write(nb, str(saved))
    return {"nb": nb, "folder": folder, "saved": saved}


def test_every_habit_runs_in_the_kernel_and_check_grades_without_a_crash(habits):
    nb = habits["nb"]
    errors = [(i, o.get("ename")) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
              for o in cell.outputs if o.output_type == "error"]
    assert errors == []  # every cell ran in the kernel, the plotting one included
    checked = json.loads((habits["folder"] / ".grade" / "kernel" / "report.partial.json").read_text(encoding="utf-8"))
    (ex02,) = checked["exercises"]
    statuses = {c["id"]: c["status"] for c in ex02["checks"]}
    assert statuses["piecewise.traceable"] == "failed"  # the kernel's piecewise: the one that ran last
    assert statuses["normalize_if_positive.values"] == "passed"  # defined in the %%time cell
    assert statuses["clip_by_norm.values"] == "passed"  # defined below a magic indented in a loop
    assert ex02["status"] == "partial" and ex02["error"] is None


def test_grade_on_the_saved_notebook_gives_the_same_verdicts_as_check_in_it(habits, capsys):
    out = habits["folder"] / "from-grade"
    assert main([str(habits["saved"]), "-k", "ex02", "--seed", str(SEED), "--lang", "en",
                 "--report-dir", str(out)]) == 0
    graded = json.loads((out / "report.partial.json").read_text(encoding="utf-8"))
    checked = json.loads((habits["folder"] / ".grade" / "kernel" / "report.partial.json").read_text(encoding="utf-8"))
    assert _verdicts(graded) == _verdicts(checked)
    assert graded["score"] == checked["score"] and graded["score"] > 0
    notes = " ".join(str(n) for ex in graded["exercises"] for n in ex.get("notes", []))
    assert "piecewise is defined in more than one cell" in notes
