"""Notebooks as students bring them: JAX tutorials (like public ones) with the chapter's answers added.

A student works through a tutorial and writes the chapter's answers in the same notebook.
The tutorial's cells ran in the student's kernel: they plot, time, assert the device they
ran on (a GPU), call an API of an older JAX (``b.device()``), import what the grader does
not have (matplotlib, seaborn, flax, torch), leave a tracer in a global (``g``), and some
are slow. None of that is the chapter's answer, and none of it may cost a point
(:mod:`grader.replay`: each exercise replays only what its functions need).

The fixtures in ``tests/fixtures/notebooks/`` are notebooks WE wrote: each reconstructs, in our
own short code and words, what a public JAX tutorial has that a student's kernel runs and the
grader cannot (nothing of the tutorials themselves is kept). Each names the notebook it is
modelled on in its metadata (``modelled_on``: repository, path, commit, and the cells of the
public notebook that hold each construct; every code cell names its model cell), and the
folder's README.md has the table:

* ``colab_gpu_like.ipynb``, modelled on jax-ml/jax ``tests/notebooks/colab_gpu.ipynb`` at
  d4d1518c: a shell escape, ``assert first.platform == "gpu"`` (run on a GPU), a 3000x3000
  product;
* ``jitting_like.ipynb``, modelled on jax-ml/jax ``docs/jax-101/02-jitting.ipynb`` at e70191bd
  (the last commit before it was replaced): ``%timeit``, cells that define a function and
  jit it saved with ``TracerBoolConversionError`` / ``ConcretizationTypeError`` outputs and
  later cells that use those functions, a cell never run, a million-element function, a
  slow jit-in-a-loop ``%timeit``;
* ``gotchas_like.ipynb``, modelled on jax-ml/jax ``docs/notebooks/Common_Gotchas_in_JAX.ipynb``
  at ee6cce56: ``remember`` (``global g``) leaves a tracer in ``g``, ``%xmode``, errors
  saved, a section whose counts start again;
* ``uvadlc_intro_like.ipynb``, modelled on the University of Amsterdam's deep learning course,
  phlippe/uvadlc_notebooks ``docs/tutorial_notebooks/JAX/tutorial2/Introduction_to_JAX.ipynb``
  at d8241aa0: numpy imported in one cell with matplotlib, seaborn and tqdm, ``b.device()`` (a
  method before JAX 0.4.27, a property since: jax-ml/jax CHANGELOG.md), flax,
  ``torch.utils.data``, ``jax.tree_map`` (removed in JAX 0.6.0).

Each is graded as saved (``grade``), with every exercise's answer (the reference
solutions, as the generated notebook's cells) added as cells run after the tutorial's. On
the grader before grader/replay.py (d242c0d) they score 0, 0, 78.5 and 0 of 80 (the first cell
that failed in the replayed module failed every exercise's import; the tracer in ``g``
failed ex01's purity); now each scores 80. About a minute in all.
"""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from conftest import FULL

from grader.authoring.notebook import build
from grader.chapter import load_chapter

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "notebooks"
SEED = 9173
TUTORIALS = ["colab_gpu_like.ipynb", "jitting_like.ipynb", "gotchas_like.ipynb", "uvadlc_intro_like.ipynb"]


def with_answers(nb, cells_after=()):
    """``nb`` with the chapter's answers added as cells run after its own (the generated notebook's
    cells, filled from the solutions: imports, one cell per function, the provided code), then
    ``cells_after``."""
    count = max([c.get("execution_count") or 0 for c in nb.cells if c.cell_type == "code"] + [0])
    answers = [c for c in build(load_chapter("ch4"), solved=True).cells
               if c.cell_type == "code" and c.metadata["grader"]["role"] in ("imports", "stub", "provided")]
    for source in [c.source for c in answers] + list(cells_after):
        count += 1
        nb.cells.append(nbformat.v4.new_code_cell(source, execution_count=count))
    return nb


def graded(tmp_path: Path, nb, name: str, **options) -> dict:
    from conftest import grade_to_dict

    path = tmp_path / name
    nbformat.write(nb, str(path))
    return grade_to_dict(path, seed=SEED, **options)


def failing(report: dict) -> dict:
    return {e["id"]: [(c["id"], c["message"]) for c in e["checks"] if c["status"] != "passed"]
            for e in report["exercises"] if e["score"] < e["max_score"]}


@pytest.mark.parametrize("name", TUTORIALS)
def test_a_tutorial_like_notebook_with_the_answers_added_scores_full_marks(tmp_path, name):
    nb = nbformat.read(str(FIXTURES / name), as_version=4)
    model = nb.metadata["modelled_on"]  # the public notebook it reconstructs, for a reader to compare
    assert model["repository"] and model["path"] and len(model["commit"]) == 40 and model["constructs"]
    printed = {line.strip() for c in nb.cells if c.cell_type == "code" for o in c.outputs
               if o.output_type == "stream" for line in o.text.splitlines() if len(line.strip()) > 8}
    report = graded(tmp_path, with_answers(nb), name)
    assert report["score"] == report["max_score"] == FULL, failing(report)
    assert report["submission"]["cells"]["not_replayed"]  # the tutorial's cells: none replayed for nothing
    shown = "\n".join(e["output"] for e in report["exercises"])  # what "Your code printed" would show
    assert printed and not [line for line in printed if line in shown]


def test_the_gotchas_tracer_in_a_global_is_not_ex01s_leak_and_its_cells_are_listed(tmp_path, capsys):
    """A Common Gotchas-like ``remember`` (``global g``) leaves a tracer in ``g`` when its cell runs. Even
    when the exercise's module needs that cell (here softmax_raw reads ``g``, as a tutorial's
    helper might), softmax_raw's purity counts only what its calls do: the tracer was there
    before them (grader/primitives/purity.py: ``find_tracers(since=tracers_left(...))``)."""
    nb = nbformat.read(str(FIXTURES / "gotchas_like.ipynb"), as_version=4)
    gotcha = next(i for i, c in enumerate(nb.cells, start=1) if "    global g\n" in c.source)
    softmax_raw = ("import jax.numpy as jnp\n\ndef softmax_raw(x):\n"
                   "    shifted = x - jnp.max(x, axis=-1, keepdims=True)"
                   "\n    e = jnp.exp(shifted)\n    return e / jnp.sum(e, axis=-1, keepdims=True) + 0 * (g is None)")
    nb = with_answers(nb, [softmax_raw])
    report = graded(tmp_path, nb, "gotchas.ipynb", exercises=("ex01",))
    checks = {c["id"]: c for c in report["exercises"][0]["checks"]}
    assert checks["softmax_raw.pure"]["status"] == "passed", checks["softmax_raw.pure"]
    assert f"cell {gotcha}" in report["submission"]["cells"]["replayed"]  # g's cell was replayed, with its tracer
    assert report["score"] == 10


def test_ipython_only_syntax_in_exploration_cells_costs_nothing(tmp_path):
    """A correct notebook whose exploration cells use IPython's syntax (help, shell, magics
    assigned, ``display``) and read what those gave (``t.best``, ``len(files)``): full marks.
    The cells are saved as a kernel would leave them (the grader reads no outputs of these)."""
    exploration = ["import jax\nimport jax.numpy as jnp\njax.jit?", "??jnp.where", "files = !ls\nlen(files)",
                   "x = jnp.linspace(-2, 2, 64)\nt = %timeit -o -n 3 -r 1 piecewise(x).block_until_ready()\n"
                   "print(t.best)", "display(piecewise(x))\nsoftmax?"]
    report = graded(tmp_path, with_answers(nbformat.v4.new_notebook(), exploration), "ch4.ipynb")
    assert report["score"] == report["max_score"] == FULL, failing(report)


def test_a_slow_tutorial_cell_costs_no_exercise_its_time_limit(tmp_path):
    """A cell that takes longer than an exercise's import limit (20 s; a tutorial's benchmark
    under load) is not replayed when no graded function needs it: the grading is quick."""
    import time

    slow = ("import time\nstarted = time.time()\nwhile time.time() - started < 40:\n    pass\n"
            "waited = time.time() - started")
    t0 = time.monotonic()
    report = graded(tmp_path, with_answers(nbformat.v4.new_notebook(), [slow]), "ch4.ipynb",
                    exercises=("ex01", "ex02", "ex03"))
    assert report["score"] == report["max_score"] == 30, failing(report)
    assert time.monotonic() - t0 < 40  # the 40 s cell ran in no exercise's process
    assert json.dumps(report).count("hung") == 0
