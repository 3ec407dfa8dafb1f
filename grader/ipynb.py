"""Reading a notebook for grading: its code cells, and those to grade as one module with the
map of its lines back to the cells (so that every message names the cell, not a line of
a generated module).

Two kinds of ``.ipynb`` are read:

* a **saved notebook**: every code cell in the order they appear, each named by its
  place, ``notebook cell 5`` (markdown cells counted);
* the **cells a kernel ran**, written by :func:`grader.notebook.check` (its metadata
  has ``grader.history``): one cell per run in the kernel's history, in the order they
  ran, each named as Jupyter shows it, ``cell In [12]``. The kernel holds what those
  runs left behind, so the runs that no longer matter are dropped: a run of a cell that
  was run again later (when the front end says which cell ran; the report names a
  dropped run that defined a graded function), a run that defines no name (a test, a
  print), and a run every name of which a later run defines again. A run that raised
  or did not parse when it ran is not replayed; the report says so.

A saved notebook whose cells were run is read as the kernel had it: its code cells in
the order they last ran (their ``In [n]``), a cell never run left out, a cell whose
saved output is an error (or whose code is not Python even with its magics made
Python) not replayed. Which of the rest each exercise replays is :mod:`grader.replay`'s.

IPython's magics are not the student's code: :mod:`grader.magics` makes them plain
Python, line for line. The grader's own statements (``from grader.notebook import check``, ``check("ex02")``)
are commented out (:mod:`grader.cell_names` tells them). Every change keeps the cell's lines where they were.
The module's lines lead back to the cells through :class:`grader.cell_map.CellMap`; what the report tells about
the cells is :mod:`grader.cell_notes`'.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.cell_map import CellMap, cell_label
from grader.cell_names import bound_again, bound_names, is_grader_statement, names_of_grader, source_text, used_names
from grader.i18n import T, Text
from grader.magics import commented, parse, without_magics


class NotebookError(Exception):
    """The file is not a notebook nbformat can read; ``detail`` says why."""


@dataclass
class Cell:
    """One code cell of a saved notebook, or one run of a cell in a kernel."""

    #: its number: its place in a saved notebook (markdown cells counted), its
    #: execution count (``In [12]``) for a run
    number: int
    #: its code as written (magics included)
    source: str
    #: its code as graded: magics and the grader's statements commented out, line for line
    code: str = ""
    #: True for a run in a kernel's history, False for a cell of a saved notebook
    history: bool = False
    #: why its code is not graded (it raised, or had a syntax error, when it ran); ``None``: graded
    not_run: Text | None = None
    #: a run of a cell whose every name a later cell defines again before any use: not
    #: replayed, but still a definition the report mentions (the later one wins)
    superseded: bool = False
    #: a run of a cell that ran again later, as ``In [rerun_as]``, with other code: not
    #: replayed (the cell's last run counts), but the report says which run was dropped
    rerun_as: int | None = None
    #: a cell saved with an error whose traceback names its line: ``(first line of the statement that
    #: raised, the line, the error's type)``; its statements before that one ran in the kernel and are graded,
    #: the rest is commented out of :attr:`code`
    raised_at: tuple[int, int, str] | None = None

    @property
    def graded(self) -> bool:
        """Whether its code is part of the module graded."""
        return self.not_run is None and not self.superseded and self.rerun_as is None

    @property
    def label(self) -> Text:
        """How the student knows it: ``notebook cell 5``, or ``cell In [12]`` for a run."""
        return cell_label(self.number, self.history)


# ------------------------------------------------------------------ reading
def read_cells(path: Path) -> tuple[list[Cell], bool]:
    """The cells of the notebook at ``path`` to grade, in order (see the module's docstring),
    and whether they are the runs of a kernel's history."""
    text = path.read_text(encoding="utf-8")
    nb = _version_4(text)
    if nb is None:  # another version (converted), or not a notebook: nbformat reads it, or says what is wrong
        import nbformat

        try:
            nb = nbformat.reads(text, as_version=4)
        except Exception as exc:  # noqa: BLE001 - nbformat raises many kinds
            raise NotebookError(f"{type(exc).__name__}: {exc}") from None
    if (nb.metadata.get("grader") or {}).get("history"):
        return history_cells([_run_of(cell) for cell in nb.cells if cell.get("cell_type") == "code"]), True
    return saved_cells(nb), False


class _Notebook:
    """A notebook of nbformat 4 as its JSON has it: ``cells`` (dicts), ``metadata`` (a dict)."""

    def __init__(self, cells: list, metadata: dict):
        self.cells, self.metadata = cells, metadata


def _version_4(text: str) -> _Notebook | None:
    """The notebook ``text`` holds, where it is plainly of nbformat 4 (a front end's, or
    :func:`grader.notebook.check`'s history), read as JSON; else ``None``. What is read of it (each code cell's
    source, outputs, execution count and metadata) is what nbformat would give: ``nbformat.reads``
    (``nbformat/__init__.py``) parses the JSON, converts nothing within version 4, and only logs what its schema
    finds invalid; ``nbformat/v4/rwbase.py`` ``rejoin_lines`` joins a source written as a list of lines, which
    :func:`~grader.cell_names.source_text` joins alike (of the outputs, only their type, error name and
    traceback list are read here). A 4.0-4.4 notebook whose cells carry ids (front ends write them whatever the
    minor version says) is read the same. Importing nbformat costs 2 seconds of CPU where ``jsonschema`` is
    installed with its format checkers (``rfc3987_syntax`` builds 38 Lark parsers as it is imported): a grading
    of a notebook, a ``check()``, paid that twice over the grading itself."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("nbformat") != 4:
        return None
    cells, metadata = data.get("cells"), data.get("metadata", {})
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells) or not isinstance(metadata, dict):
        return None
    return _Notebook(cells, metadata)


def saved_cells(nb: Any) -> list[Cell]:
    """A saved notebook's code cells, as the kernel had them when it was saved: when its cells were
    run, in the order they last ran (a cell never run, or whose output is an error, is not graded);
    never run at all (Restart and Clear), in their order on the page."""
    code = [(number, cell) for number, cell in enumerate(nb.cells, start=1) if cell.get("cell_type") == "code"]
    grader_names = names_of_grader(source_text(cell.get("source", "")) for _, cell in code)
    ran = any(isinstance(cell.get("execution_count"), int) for _, cell in code)
    cells = []
    for number, cell in code:
        source = source_text(cell.get("source", ""))
        made = Cell(number, source, _python(source, grader_names))
        failed = next((o.get("ename") or "Exception" for o in cell.get("outputs") or []
                       if o.get("output_type") == "error"), None)
        if ran and not isinstance(cell.get("execution_count"), int) and source.strip():
            made.not_run = T("notebook.never_run")
        elif failed and failed != "SyntaxError" and _ran_until(made, cell.get("outputs") or [], failed):
            pass  # graded up to the statement that raised, as the kernel ran it
        elif failed:
            made.not_run = T("notebook.syntax_error") if failed == "SyntaxError" else T("notebook.raised", type=failed)
        else:
            made.not_run = _unreadable(made.code)
        cells.append(made)
    if ran:
        cells.sort(key=lambda c: (code[[n for n, _ in code].index(c.number)][1].get("execution_count") or 0))
    return cells


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: the frame of the cell itself in IPython's traceback: ``Cell In[3], line 2`` (IPython 8), or
#: ``<ipython-input-3-...> in <module>`` followed by ``----> 2 ...`` (IPython 7 and before)
_CELL_FRAME = re.compile(r"Cell In\[\d*\], line (\d+)|<ipython-input-[^>]*> in <module>[^\n]*\n(?:.*\n)*?-+> ?(\d+)")


def raising_line(outputs: list) -> int | None:
    """The line of a saved cell whose top-level statement raised, as its saved traceback names it (the
    outermost frame of the cell: the statement the kernel was running), else ``None``."""
    for output in outputs:
        if output.get("output_type") != "error":
            continue
        text = _ANSI.sub("", "\n".join(str(line) for line in output.get("traceback") or []))
        found = _CELL_FRAME.search(text)
        if found:
            return int(found.group(1) or found.group(2))
    return None


def _ran_until(cell: Cell, outputs: list, error: str) -> bool:
    """Keep of ``cell`` (saved with ``error``) the top-level statements before the one that raised, as the
    kernel ran them: that statement and those after it are commented out (same lines). ``False`` where its
    traceback names no line of it, or its code does not parse (then it is not graded at all)."""
    line = raising_line(outputs)
    tree = parse(cell.code)
    if line is None or tree is None:
        return False
    statement = next((node for node in tree.body if node.lineno <= line <= (node.end_lineno or node.lineno)), None)
    if statement is None:
        return False
    first = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])
    lines = cell.code.split("\n")
    for i in range(first - 1, len(lines)):
        if lines[i].strip():
            lines[i] = commented(lines[i])
    cell.code = "\n".join(lines)
    cell.raised_at = (first, line, error)
    return True


def _unreadable(code: str) -> Text | None:
    """Why a cell's code (magics made Python) cannot be read here: a syntax error, with its line."""
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return T("notebook.not_python", line=exc.lineno or "?", message=exc.msg)
    except ValueError as exc:  # a null byte
        return T("notebook.not_python", line="?", message=str(exc))
    return None


@dataclass(frozen=True)
class Run:
    """One execution in a kernel's history, as :func:`grader.notebook.check` writes it."""

    #: its execution count (``In [12]``)
    count: int
    #: the code that ran
    source: str
    #: the front end's id of the cell that ran it, when it sends one (JupyterLab does)
    cell_id: str | None = None
    #: the exception it raised when it ran (``NameError``, ``SyntaxError``), ``None``: it ran through
    error: str | None = None


def _run_of(cell: Any) -> Run:
    meta = (cell.get("metadata") or {}).get("grader") or {}
    count = meta.get("run")
    cell_id, error = meta.get("cell_id"), meta.get("error")
    return Run(count if isinstance(count, int) else 0, source_text(cell.get("source", "")),
               cell_id if isinstance(cell_id, str) else None, error if isinstance(error, str) else None)


def history_cells(runs: list[Run]) -> list[Cell]:
    """The runs of a kernel's history still to replay, as cells, and those that failed when they ran.

    A run is replayed unless a later run of the same cell replaced it, it binds no name,
    or every name it binds is bound again by a later replayed run before any replayed
    run in between uses it (then, when the front end said which cell ran, it is kept as
    a ``superseded`` cell: another cell's definition won). A failed run (it raised, or did
    not parse) is kept as a cell that is not graded, so that the report can say why a
    name it defines is missing.
    """
    latest = {run.cell_id: run for run in runs if run.cell_id}
    grader_names = names_of_grader(run.source for run in runs)
    dropped = [Cell(run.count, run.source, _python(run.source, grader_names), history=True,
                    rerun_as=latest[run.cell_id].count) for run in runs
               if run.cell_id and latest[run.cell_id] is not run and latest[run.cell_id].source != run.source]
    runs = [run for run in runs if not run.cell_id or latest[run.cell_id] is run]
    cells: list[Cell] = []
    replayed: list[tuple[set[str], set[str]]] = []  # (binds, uses) of the replayed runs after this one, in order
    for run in reversed(runs):
        code = _python(run.source, grader_names)
        tree = parse(code)
        failed = run.error or ("SyntaxError" if tree is None else None)
        why = (T("notebook.syntax_error") if failed == "SyntaxError" else T("notebook.raised", type=failed)) \
            if failed else None
        if why is not None or tree is None:
            cells.append(Cell(run.count, run.source, code, history=True, not_run=why))
            continue
        names = bound_names(tree)
        if names and not all(bound_again(name, replayed) for name in names):
            cells.append(Cell(run.count, run.source, code, history=True))
            replayed.insert(0, (names, used_names(tree)))
        elif names and run.cell_id:
            cells.append(Cell(run.count, run.source, code, history=True, superseded=True))
    return sorted(cells + dropped, key=lambda cell: cell.number)


# ------------------------------------------------------------------ one module
def notebook_source(path: Path) -> tuple[str, list[tuple[int, int]]]:
    """The notebook's code cells as one module, with a line map back to (cell number, line)."""
    cells, history = read_cells(path)
    source, cell_map = module_of(cells, path.name, history=history)
    return source, cell_map.lines


def module_of(cells: list[Cell], name: str, *, history: bool = False) -> tuple[str, CellMap]:
    """The graded cells' code as one module (magics and the grader's statements commented
    out, line for line) and the map of its lines back to the cells; ``name`` is the
    notebook's file name, ``history`` whether the cells are a kernel's runs."""
    lines: list[str] = []
    line_map: list[tuple[int, int]] = []
    for cell in cells:
        if not cell.graded:
            continue
        cell_lines = cell.code.splitlines()
        lines += cell_lines
        line_map += [(cell.number, i) for i in range(1, len(cell_lines) + 1)]
        lines.append("")
        line_map.append((cell.number, len(cell_lines) + 1))
    return "\n".join(lines) + "\n", CellMap(name, line_map, history=history)


def _python(source: str, grader_names: set[str]) -> str:
    """``source`` with its magics, then its grader statements, commented out (same lines)."""
    kept = without_magics(source).split("\n")
    tree = parse("\n".join(kept))
    if tree is not None:
        for node in tree.body:
            if is_grader_statement(node, grader_names):
                for i in range(node.lineno - 1, node.end_lineno or node.lineno):
                    kept[i] = commented(kept[i])
    return "\n".join(kept)


