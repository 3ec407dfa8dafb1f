"""Chapter 4 in Jupyter, end to end: the generated notebook executed headless by nbclient
on a real ipykernel, each check() grading in the sandbox from inside it.

Three runs, shared by the tests (about 2 minutes in all on 2 cores):

* the notebook as generated, its check cells of ex01 and ex02 and the last one,
  ``check()``, kept (each check is a grading of its own, 5 to 10 seconds: the other six
  would add nothing the last one does not show): they say *not attempted*, score 0;
* every stub cell filled from the solutions: ``check()`` gives full marks, and so does
  ``grade`` on the saved notebook, check by check the same verdicts, which are those of
  ``grade solutions/ch4`` with the same seed; then, in the same kernel, a wrong ``piecewise``
  (a Python ``if`` on a traced value), a ``poly`` with a syntax error and a cell that
  raises, checked with ``check("ex02", "ex03")``: the failing check, what was seen and
  the hint inline, every message naming the cell;
* ``grade`` on a saved notebook with a function defined in two cells, and on one with a
  cell that raises at its top level (each a ``-k ex02`` grading of a few seconds).

The client sends each cell's id with its execute request, as JupyterLab does.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import nbformat
import pytest

from conftest import FULL

from grader.authoring.notebook import build
from grader.chapter import load_chapter

pytestmark = pytest.mark.slow
nbclient = pytest.importorskip("nbclient", reason="the notebook extra is not installed: pip install -e '.[notebook]'")
pytest.importorskip("ipykernel", reason="the notebook extra is not installed: pip install -e '.[notebook]'")

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions" / "ch4"
SEED = 4321

WRONG_PIECEWISE = """\
@jax.jit
def piecewise(x):
    if x > 0:
        return x * x
    return 0.5 * x
"""
BROKEN_POLY = "def poly(x, coeff):\n    return coeff * x **\n"
RAISING = "def reduce_along(x, axis):\n    return x.sum(axis)\n\nrows = 1 / 0\n"


class JupyterLabLikeClient(nbclient.NotebookClient):
    """nbclient, sending each cell's id in the execute request's metadata (``cellId``) as
    JupyterLab and VS Code do; the kernel hands it to IPython, and check() uses it to
    tell a re-run of a cell from another cell."""

    def __init__(self, nb, **kwargs):
        super().__init__(nb, **kwargs)
        self.on_cell_execute = self._before_cell
        self._cell_id = None

    def _before_cell(self, cell, cell_index) -> None:
        self._cell_id = cell.get("id")
        client = self.kc
        if getattr(client, "_sends_cell_ids", False):
            return

        def execute(code, silent=False, store_history=True, user_expressions=None, allow_stdin=None,
                    stop_on_error=True):
            content = {"code": code, "silent": silent, "store_history": store_history,
                       "user_expressions": user_expressions or {}, "allow_stdin": False,
                       "stop_on_error": stop_on_error}
            msg = client.session.msg("execute_request", content, metadata={"cellId": self._cell_id})
            client.shell_channel.send(msg)
            return msg["header"]["msg_id"]

        client.execute = execute
        client._sends_cell_ids = True


def execute(nb, folder: Path):
    """Run every cell of ``nb`` in a fresh kernel whose working folder is ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    JupyterLabLikeClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
                         ).execute()
    return nb


def result_of(cell) -> dict:
    """The displayed result of a check cell: its text and its HTML."""
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert not errors, errors[0].get("traceback")
    shown = [o for o in cell.outputs if o.output_type == "execute_result"]
    assert len(shown) == 1, cell.outputs
    return {"text": shown[0].data["text/plain"], "html": shown[0].data["text/html"]}


def flat(text: str) -> str:
    return " ".join(html.unescape(text).split())


@pytest.fixture(scope="module")
def ch4():
    return load_chapter("ch4")


# ------------------------------------------------------------------ the notebook as generated
@pytest.fixture(scope="module")
def stubs_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stubs-nb")
    nb = nbformat.read(str(ROOT / "exercises" / "ch4.ipynb"), as_version=4)
    kept = {"ex01-check", "ex02-check", "ch4-check"}
    nb.cells = [c for c in nb.cells if c.metadata["grader"]["role"] != "check" or c.id in kept]
    return execute(nb, folder), folder


def test_the_generated_notebook_runs_and_every_check_says_not_attempted(stubs_run, ch4):
    nb, folder = stubs_run
    checks = [c for c in nb.cells if c.metadata["grader"]["role"] == "check"]
    assert len(checks) == 3
    for cell, ex in zip(checks, ch4.exercises[:2]):
        shown = result_of(cell)
        assert re.search(rf"{ex.id}\s+0/{ex.max_score:g}\s+not attempted", shown["text"]), shown["text"]
        assert "not attempted" in shown["html"] and f"<b>{ex.id}</b> 0 / {ex.max_score:g}" in shown["html"]
    everything = result_of(checks[-1])
    assert f"Chapter 4: JIT basics: 0 / {FULL:g}" in everything["text"]
    for ex in ch4.exercises:
        assert re.search(rf"{ex.id}\s+0/{ex.max_score:g}\s+not attempted", everything["text"])
    kernel = folder / ".grade" / "kernel"  # check()'s own folder: apart from grade's on the folder or the notebook
    line = f"Report: {kernel / 'report.html'} (and {kernel / 'report.md'})"
    assert line in everything["text"] and html.escape(line, quote=False) in everything["html"]
    report = json.loads((folder / ".grade" / "kernel" / "report.json").read_text(encoding="utf-8"))
    assert report["score"] == 0 and not report["partial"]
    assert {e["status"] for e in report["exercises"]} == {"not_attempted"}


# ------------------------------------------------------------------ filled from the solutions
@pytest.fixture(scope="module")
def solved_run(tmp_path_factory, ch4):
    folder = tmp_path_factory.mktemp("solved-nb")
    nb = build(ch4, solved=True)
    nb.cells = [c for c in nb.cells if c.metadata["grader"]["role"] != "check"]
    filled = len(nb.cells)
    nb.cells += [nbformat.v4.new_code_cell(f"full = check(seed={SEED})\nfull"),
                 nbformat.v4.new_code_cell(f"assert full.passed and full.score == full.max_score == {FULL:g}, full"),
                 nbformat.v4.new_code_cell(WRONG_PIECEWISE), nbformat.v4.new_code_cell(BROKEN_POLY),
                 nbformat.v4.new_code_cell(RAISING),
                 nbformat.v4.new_code_cell(f'part = check("ex02", "ex03", seed={SEED})\npart'),
                 nbformat.v4.new_code_cell("part.score, part.max_score, part.exercises")]
    for cell in nb.cells[filled + 3:filled + 5]:
        cell.metadata["tags"] = ["raises-exception"]  # a syntax error, an exception: run on, as a student does
    execute(nb, folder)
    saved = folder / "ch4.ipynb"
    filled_only = nbformat.from_dict(nb)
    filled_only.cells = nb.cells[:filled]
    nbformat.write(filled_only, str(saved))
    return nb, filled, folder, saved


def _verdicts(report: dict) -> dict:
    return {e["id"]: (e["score"], e["status"], {c["id"]: c["status"] for c in e["checks"]})
            for e in report["exercises"]}


def test_filled_from_the_solutions_the_check_in_the_notebook_gives_full_marks(solved_run):
    nb, filled, folder, _ = solved_run
    shown = result_of(nb.cells[filled])
    assert f"Chapter 4: JIT basics: {FULL:g} / {FULL:g}" in shown["text"] and "All checks passed" in shown["text"]
    assert not [o for o in nb.cells[filled + 1].outputs if o.output_type == "error"]  # the assert on the score
    report = json.loads((folder / ".grade" / "kernel" / "report.json").read_text(encoding="utf-8"))
    assert report["seed"] == SEED and report["score"] == report["max_score"] == FULL
    assert report["submission"]["from"] == "kernel history"


def test_filled_notebook_scores_as_the_solutions_in_the_notebook_and_through_grade(solved_run):
    """Full marks in the notebook and through grade on the saved notebook, check by check the
    same verdicts; the solutions' folder gives them too with that seed (three of its
    exercises graded here, to keep the test short; every one is graded by
    tests/test_record_keys.py and grade dev validate)."""
    from conftest import grade_to_dict

    _, _, folder, saved = solved_run
    in_notebook = json.loads((folder / ".grade" / "kernel" / "report.json").read_text(encoding="utf-8"))
    saved_nb = grade_to_dict(saved, seed=SEED)
    assert saved_nb["submission"]["kind"] == "notebook" and saved_nb["score"] == saved_nb["max_score"] == FULL
    assert _verdicts(in_notebook) == _verdicts(saved_nb)
    solutions = _verdicts(grade_to_dict(SOLUTIONS, seed=SEED, exercises=("ex01", "ex02", "ex04")))
    assert solutions == {k: v for k, v in _verdicts(saved_nb).items() if k in solutions} and len(solutions) == 3


def test_a_wrong_cell_shows_the_failing_check_its_evidence_and_hint_naming_the_cell(solved_run, ch4):
    nb, filled, _, _ = solved_run
    wrong = nb.cells[filled + 2]
    shown = result_of(nb.cells[filled + 5])
    html, text = flat(shown["html"]), flat(shown["text"])
    spec = next(c for c in ch4.exercise("ex02_where").checks if c.id == "piecewise.traceable")
    where = f"cell In [{wrong.execution_count}], line 3"  # the `if x > 0:` line of the wrong cell
    assert "✗ piecewise.traceable 0/0.5" in text and "piecewise.traceable" in html and "failed" in html
    for output in (html, text):
        assert f"fails at {where}: a Python if/while tests a traced value" in output
        assert flat(spec.hint.en) in output  # the hint, in full
        assert "ex02_where.py" not in output  # never a line of a generated module
    assert 'class="hint"' in shown["html"]
    score, max_score, exercises = eval(nb.cells[filled + 6].outputs[0].data["text/plain"])  # noqa: S307
    assert exercises["ex02_where"]["status"] == "partial" and score < max_score == 20


def test_cells_defined_twice_or_failed_when_run_are_named_in_the_notes(solved_run):
    nb, filled, _, _ = solved_run
    count = lambda i: nb.cells[i].execution_count  # noqa: E731
    piecewise_cell = next(c for c in nb.cells if c.get("id") == "ex02-piecewise")
    html = flat(result_of(nb.cells[filled + 5])["html"])
    assert (f"piecewise is defined in more than one cell (cell In [{piecewise_cell.execution_count}], then cell "
            f"In [{count(filled + 2)}]): the last one, cell In [{count(filled + 2)}], is the one graded") in html
    assert (f"cell In [{count(filled + 3)}], where poly is defined, is not graded: it had a syntax error when it "
            f"ran") in html
    assert (f"cell In [{count(filled + 4)}], where reduce_along is defined, is not graded: it raised "
            f"ZeroDivisionError when it ran") in html


def test_the_inline_result_reads_in_a_browser_as_in_the_notebook(solved_run, tmp_path):
    """The HTML under the check cell, in a page of its own, as headless Chromium shows it."""
    from browser import render

    from grader.report.html_parts import page

    nb, filled, _, _ = solved_run
    path = tmp_path / "check.html"
    path.write_text(page("check", result_of(nb.cells[filled + 5])["html"]), encoding="utf-8")
    shown = render(path, tmp_path / "check.png")
    for text in ("piecewise.traceable", "0 / 0.5", "failed", "Hint: Inside jit, x > 0 is a traced array",
                 f"cell In [{nb.cells[filled + 2].execution_count}], line 3", "Note: piecewise is defined",
                 "ex03_static_args 10 / 10 passed"):
        assert text in shown, text


# ------------------------------------------------------------------ grade on a saved notebook
def test_grade_on_a_saved_notebook_names_the_cell_of_a_function_defined_twice(tmp_path, ch4, capsys):
    from grader.cli import main

    nb = build(ch4, solved=True)
    index = next(i for i, c in enumerate(nb.cells) if c.get("id") == "ex02-clip_by_norm")
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(WRONG_PIECEWISE))
    path = tmp_path / "ch4.ipynb"
    nbformat.write(nb, str(path))
    assert main([str(path), "-k", "ex02", "--seed", str(SEED), "--lang", "en", "--report-dir",
                 str(tmp_path / "r")]) == 0
    out = flat(capsys.readouterr().out)
    first = next(i for i, c in enumerate(nb.cells, start=1) if c.get("id") == "ex02-piecewise")
    assert f"fails at notebook cell {index + 2}, line 3" in out
    assert (f"piecewise is defined in more than one cell (notebook cell {first}, then notebook cell {index + 2}): "
            f"the last one, notebook cell {index + 2}, is the one graded, as in the kernel") in out
    report = json.loads((tmp_path / "r" / "report.partial.json").read_text(encoding="utf-8"))
    assert report["exercises"][0]["notes"] and "ex02_where.py" not in json.dumps(report["exercises"])
    page = flat(re.sub(r"<[^>]+>", "", (tmp_path / "r" / "report.partial.html").read_text(encoding="utf-8")))
    assert f"Note: piecewise is defined in more than one cell (notebook cell {first}" in page


def test_grade_on_a_saved_notebook_names_a_statement_that_raises_and_grades_the_rest(tmp_path, ch4, capsys):
    """A cell's statement that raises when the grader runs it is skipped and named; it costs only
    what needs its names (here piecewise, which reads rows), not the cell's other statements
    (scale) nor the rest of the notebook."""
    from grader.cli import main

    nb = build(ch4, solved=True)
    index = next(i for i, c in enumerate(nb.cells) if c.get("id") == "ex02-clip_by_norm")
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell("scale = 2\nrows = 1 / 0\n"))
    nb.cells.insert(index + 2, nbformat.v4.new_code_cell(
        "@jax.jit\ndef piecewise(x):\n    return jnp.where(x > 0, x * x, 0.5 * x) * scale / 2 + 0 * rows\n"))
    path = tmp_path / "ch4.ipynb"
    nbformat.write(nb, str(path))
    assert main([str(path), "-k", "ex02", "--seed", str(SEED), "--lang", "en", "--report-dir",
                 str(tmp_path / "r")]) == 0
    out = flat(capsys.readouterr().out)
    assert (f"notebook cell {index + 2}, line 2 raised ZeroDivisionError when the grader ran it (division by "
            f"zero): that statement is skipped") in out
    report = json.loads((tmp_path / "r" / "report.partial.json").read_text(encoding="utf-8"))
    checks = {c["id"]: c for c in report["exercises"][0]["checks"]}
    traceable = checks["piecewise.traceable"]["message"]
    assert "NameError" in traceable and "rows" in traceable
    assert f"notebook cell {index + 3}, line 3" in traceable
    assert checks["clip_by_norm.values"]["status"] == checks["normalize_if_positive.values"]["status"] == "passed"
    assert "ex02_where.py" not in json.dumps(report)


def test_exercises_whose_cells_never_ran_are_not_attempted_said_once(tmp_path, ch4):
    """A student who has done only ex02 (the generated notebook, ex02's cells filled and run, the
    others never run): every other exercise is "not attempted", once, with nothing else: no
    check runs for it, so no "is not defined", no hint, no numbers, nothing printed."""
    from conftest import grade_report, rendered
    from grader.report.render import render_terminal

    nb = nbformat.read(str(ROOT / "exercises" / "ch4.ipynb"), as_version=4)
    solved = {cell.id: cell.source for cell in build(ch4, solved=True).cells}
    for count, cell_id in enumerate(["ch4-setup", "ex02-imports", "ex02-piecewise", "ex02-normalize_if_positive",
                                     "ex02-clip_by_norm"], start=1):
        cell = next(c for c in nb.cells if c.id == cell_id)
        cell.source, cell.execution_count = solved[cell_id], count
    path = tmp_path / "ch4.ipynb"
    nbformat.write(nb, str(path))
    graded = grade_report(path, seed=SEED)  # one grading: its JSON and its terminal text
    report = rendered(graded)
    assert report["score"] == 10
    for ex in report["exercises"]:
        if ex["id"] == "ex02_where":
            assert ex["status"] == "passed"
            continue
        assert ex["status"] == "not_attempted" and not ex["output"] and not ex["notes"], ex
        assert {(c["status"], c["hint"], json.dumps(c["measured"])) for c in ex["checks"]} == {
            ("not_attempted", "", "{}")}  # no hint (rendered as "")
    text = render_terminal(graded, ch4.catalog, "en", width=100)
    for ex in ch4.exercises:
        if ex.id != "ex02_where":
            assert len(re.findall(rf"{ex.id} +0/10 +not attempted", text)) == 1, text
    for words in ("is not defined", "Hint", "Measured", "NotImplementedError", "process ended", "printed"):
        assert words not in text, (words, text)
