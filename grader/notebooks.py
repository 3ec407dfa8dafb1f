"""Reading a notebook: its code cells as one module, and the map from that module's
lines back to the cells (so that every message names the cell, not a generated line)."""
from __future__ import annotations

import ast
from pathlib import Path



class NotebookError(Exception):
    """The file is not a notebook nbformat can read; ``detail`` says why."""


def notebook_source(path: Path) -> tuple[str, list[tuple[int, int]]]:
    """The notebook's code cells as one module, with a line map back to the cells.

    IPython magics (``%`` and ``!`` lines, ``%%`` cells) are commented out: they are
    not Python, and nothing graded needs them.
    """
    import nbformat

    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as exc:  # noqa: BLE001 - nbformat raises many kinds
        raise NotebookError(f"{type(exc).__name__}: {exc}") from None
    lines: list[str] = []
    line_map: list[tuple[int, int]] = []
    for cell_number, cell in enumerate(nb.cells, start=1):  # numbered as they appear, markdown included
        if cell.get("cell_type") != "code":
            continue
        cell_lines = cell.get("source", "").splitlines()
        is_magic_cell = bool(cell_lines) and cell_lines[0].lstrip().startswith("%%")
        kept: list[str] = []
        for i, line in enumerate(cell_lines, start=1):
            stripped = line.lstrip()
            if is_magic_cell or (_looks_like_magic(stripped) and _starts_statement(kept)):
                line = line[: len(line) - len(stripped)] + "# " + stripped
            kept.append(line)
            lines.append(line)
            line_map.append((cell_number, i))
        lines.append("")
        line_map.append((cell_number, len(cell_lines) + 1))
    return "\n".join(lines) + "\n", line_map


def _looks_like_magic(stripped: str) -> bool:
    return stripped.startswith("%") or (stripped.startswith("!") and not stripped.startswith("!="))


def _starts_statement(previous: list[str]) -> bool:
    """Whether the next line begins a new statement (not inside brackets, a string or a ``\\``)."""
    import io
    import tokenize

    if not previous:
        return True
    try:
        for _ in tokenize.generate_tokens(io.StringIO("\n".join(previous) + "\n").readline):
            pass
    except tokenize.TokenError:  # EOF inside a bracket, a string or after a backslash
        return False
    except (SyntaxError, ValueError):  # an indentation problem: the next line still starts a statement
        return True
    return True




def defined_names(notebook: bytes) -> set[str]:
    """The top-level names (functions, classes, assignments) a notebook's code cells define;
    a cell that does not parse is skipped."""
    import json

    try:
        cells = json.loads(notebook.decode("utf-8")).get("cells", [])
    except (UnicodeDecodeError, ValueError, AttributeError):
        return set()
    names: set[str] = set()
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        lines = ["# " + line if _looks_like_magic(line.lstrip()) else line for line in source.splitlines()]
        try:
            tree = ast.parse("\n".join(lines))
        except (SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


class CellMap:
    """Lines of the module made from a notebook, back to (cell, line in the cell)."""

    def __init__(self, notebook: str, lines: list[tuple[int, int]]):
        self.notebook = notebook
        self.lines = lines

    def cell_of(self, line: int) -> tuple[int, int] | None:
        if not self.lines or line < 1:
            return None
        return self.lines[min(line, len(self.lines)) - 1]

    def locate(self, where: str | None) -> str:
        """``ex02_where.py:12`` (a line of the generated module) as ``notebook cell 5, line 3``."""
        if not where:
            return "?"
        try:
            cell, line = self.cell_of(int(where.rsplit(":", 1)[1])) or (None, None)
        except (ValueError, IndexError):
            return where
        return where if cell is None else f"notebook cell {cell}, line {line}"
