"""What the report tells about a notebook's cells (:func:`cell_notes`): a graded function defined in
more than one cell, a cell that failed when it ran, a run dropped because its cell ran again."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from grader.cell_map import cell_label
from grader.cell_names import defined_in_cell
from grader.i18n import T, Text
from grader.ipynb import Cell


@dataclass
class CellNotes:
    """What the report tells about a notebook's cells (:func:`cell_notes`)."""

    #: by exercise id: the notes on it
    by_exercise: dict[str, list[Text]] = field(default_factory=dict)
    #: a graded function whose last definition is in a cell not graded (a syntax error, an error
    #: before it, never run) while an earlier cell's definition is graded: name -> (that cell, why)
    lost: dict[str, tuple[Text, Text]] = field(default_factory=dict)


def cell_notes(cells: list[Cell], functions: dict[str, str]) -> CellNotes:
    """What the report tells about the cells; ``functions`` gives the exercise of each function
    the chapter grades.

    A graded function (or a helper it uses) defined in more than one cell: the last
    definition is the one graded, as in the kernel. A cell that defines a graded
    function but failed when it ran: that definition is not graded (one note per cell and
    reason, naming every such function). A run of a cell that defined a graded function,
    dropped because the same cell ran again with other code.
    """
    where: dict[str, list[Cell]] = {}
    failed: dict[str, list[Cell]] = {}
    final: dict[str, ast.AST | None] = {}
    found = CellNotes()
    notes = found.by_exercise
    for cell in cells:
        if cell.rerun_as is not None:
            for name in defined_in_cell(cell.source):
                if name in functions:
                    notes.setdefault(functions[name], []).append(
                        T("notebook.rerun", name=name, dropped=cell.label, last=cell_label(cell.rerun_as, True)))
            continue
        for name, node in defined_in_cell(cell.source).items():
            # a cell saved with an error: what it defines from the statement that raised on never ran
            lost = cell.raised_at is not None and (node is None or getattr(node, "lineno", 0) >= cell.raised_at[0])
            (failed if cell.not_run is not None or lost else where).setdefault(name, []).append(cell)
            if cell.not_run is None and not lost and not cell.superseded and (name in functions
                                                                               or isinstance(node, ast.FunctionDef)):
                final[name] = node
    used: dict[str, set[str]] = {}  # helper -> the exercises whose graded functions name it
    for name, exercise in functions.items():
        body = final.get(name)
        for n in ast.walk(body) if body is not None else ():
            if isinstance(n, ast.Name) and n.id != name:
                used.setdefault(n.id, set()).add(exercise)
    for name, defining in where.items():
        labels: list[Text] = []
        for cell in defining:
            if cell.label not in labels:
                labels.append(cell.label)
        exercises = {functions[name]} if name in functions else used.get(name, set())
        if len(labels) > 1 and name in final:
            for exercise in exercises:
                notes.setdefault(exercise, []).append(
                    T("notebook.redefined", name=name, earlier=labels[:-1], last=labels[-1]))
    grouped: dict[tuple[str, int], tuple[Cell, Text, list[str]]] = {}  # (exercise, cell) -> why, its names
    for name, failing in failed.items():
        last_good = where.get(name, [])
        cell = failing[-1]
        if last_good and last_good[-1].number > cell.number:
            continue
        raised = cell.raised_at or (0, 0, "")  # a cell in ``failed`` was not run or raised: one of the two is set
        why = cell.not_run if cell.not_run is not None else T("notebook.raised_at", type=raised[2], line=raised[1])
        if last_good and name in functions:
            found.lost[name] = (cell.label, why)
        for exercise in [functions[name]] if name in functions else sorted(used.get(name, ())):
            grouped.setdefault((exercise, cell.number), (cell, why, []))[2].append(name)
    for (exercise, _), (cell, why, names) in grouped.items():
        notes.setdefault(exercise, []).append(
            T("notebook.not_graded", name=names[0], cell=cell.label, why=why) if len(names) == 1 else
            T("notebook.not_graded_names", names=", ".join(names), cell=cell.label, why=why))
    return found

