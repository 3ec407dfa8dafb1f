"""The lines of the module made from a notebook, back to the cells: :class:`CellMap`, and how the
student knows a cell (:func:`cell_label`), so that every message names the cell, not a line of a
generated module."""
from __future__ import annotations

from typing import Any

from grader.i18n import T, Text


def cell_label(number: int, history: bool) -> Text:
    """``notebook cell 5`` (a saved notebook's fifth cell) or ``cell In [12]`` (a kernel's twelfth run)."""
    return T("notebook.run", count=number) if history else T("notebook.cell", number=number)


class CellMap:
    """Lines of the module made from a notebook, back to (cell number, line in the cell)."""

    def __init__(self, notebook: str, lines: list[tuple[int, int]], *, history: bool = False):
        #: the notebook's file name
        self.notebook = notebook
        self.lines = lines
        #: whether the cells are a kernel's runs (``In [12]``) rather than a saved notebook's
        self.history = history

    @property
    def name(self) -> Any:
        """How messages name the whole: the notebook's file name, or the cells a kernel ran."""
        return T("notebook.session") if self.history else self.notebook

    def cell_of(self, line: int) -> tuple[int, int] | None:
        if not self.lines or line < 1:
            return None
        return self.lines[min(line, len(self.lines)) - 1]

    def label(self, number: int) -> Text:
        """How the student knows cell ``number``."""
        return cell_label(number, self.history)

    def plain(self, number: int) -> str:
        """Cell ``number`` in a few language-free characters: ``cell 5``, ``In [12]``."""
        return f"In [{number}]" if self.history else f"cell {number}"

    def at(self, line: int) -> Text | None:
        """Line ``line`` of the module as ``notebook cell 5, line 3`` (``cell In [12], line 3``)."""
        place = self.cell_of(line)
        return None if place is None else T("notebook.at", cell=self.label(place[0]), line=place[1])

    def locate(self, where: str | None) -> Any:
        """``ex02_where.py:12`` (a line of the generated module) as the cell and its line;
        ``ex02_where.py`` (the module itself) as the notebook."""
        if not where:
            return "?"
        if where.endswith(".py"):
            return self.name
        try:
            line = int(where.rsplit(":", 1)[1])
        except (ValueError, IndexError):
            return where
        return self.at(line) or where
