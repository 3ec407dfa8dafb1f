"""The names a notebook's cells bind and use, and which of them are the grader's own: what
:mod:`grader.ipynb` reads to decide which runs of a kernel's history still matter and which
statements to comment out, and what a chapter is told from (:func:`defined_names`).

A statement that imports the grader (``from grader.notebook import check``) or uses what was
imported from it (``check("ex02")``, ``result = check("ex02")``) is the grader's, not the student's.
"""
from __future__ import annotations

import ast
import json
import re
from typing import Any

from grader.magics import parse, without_magics

#: the module the in-notebook API lives in; statements that use it are the grader's, not the student's
GRADER_PACKAGE = "grader"


def is_grader_module(name: str | None) -> bool:
    return name is not None and (name == GRADER_PACKAGE or name.startswith(GRADER_PACKAGE + "."))


def names_of_grader(sources) -> set[str]:
    """The names the cells import from the grader (``check``, ``grader``, an alias), and the
    names bound from those (``result = check("ex02")``)."""
    trees = [tree for tree in (parse(without_magics(source)) for source in sources) if tree is not None]
    names: set[str] = set()
    while True:
        found = set(names)
        for node in (node for tree in trees for node in tree.body):
            if isinstance(node, ast.ImportFrom) and is_grader_module(node.module):
                found |= {alias.asname or alias.name for alias in node.names}
            elif isinstance(node, ast.Import):
                found |= {(alias.asname or alias.name).split(".")[0] for alias in node.names
                          if is_grader_module(alias.name)}
            elif is_grader_statement(node, found):
                found |= bound_names(ast.Module(body=[node], type_ignores=[]))
        if found == names:
            return names
        names = found


def is_grader_statement(node: ast.stmt, grader_names: set[str]) -> bool:
    """An import of the grader, or a statement that uses what was imported from it."""
    if isinstance(node, ast.ImportFrom):
        return is_grader_module(node.module)
    if isinstance(node, ast.Import):
        return any(is_grader_module(alias.name) for alias in node.names)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    return any(isinstance(n, ast.Name) and n.id in grader_names for n in ast.walk(node))


def bound_names(tree: ast.Module) -> set[str]:
    """The names a module's top level binds (inside ``if``/``try``/``with``/loops too)."""
    names: set[str] = set()

    def targets(node: ast.AST) -> None:
        names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    targets(target)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
                targets(node.target)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars)
            for key in ("body", "orelse", "finalbody"):
                visit(getattr(node, key, None) or [])
            for handler in getattr(node, "handlers", None) or []:
                visit(handler.body)

    visit(tree.body)
    return names


_DEFINES = re.compile(r"^(?:async\s+def|def|class)\s+(\w+)|^(\w+)\s*(?::[^=]*)?=(?!=)", re.M)


def defined_in_cell(source: str) -> dict[str, ast.AST | None]:
    """The names a cell defines at its top level, each with its definition (``None`` when
    the cell does not parse and the name is read off its lines)."""
    tree = parse(without_magics(source))
    if tree is None:
        return {m.group(1) or m.group(2): None for m in _DEFINES.finditer(source)}
    found: dict[str, ast.AST | None] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    found[target.id] = node
    return found


def bound_again(name: str, later: list[tuple[set[str], set[str]]]) -> bool:
    """Whether a later run binds ``name`` again before any run uses it."""
    for binds, uses in later:
        if name in uses:
            return False
        if name in binds:
            return True
    return False


def used_names(tree: ast.Module) -> set[str]:
    """Every name a run reads (anywhere in it, function bodies included: a conservative guess)."""
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}
    return used | {n.target.id for n in ast.walk(tree) if isinstance(n, ast.AugAssign)
                   and isinstance(n.target, ast.Name)}


def source_text(source: Any) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def defined_names(notebook: bytes) -> set[str]:
    """The top-level names (functions, classes, assignments) a notebook's code cells define;
    a cell that does not parse is skipped."""
    try:
        cells = json.loads(notebook.decode("utf-8")).get("cells", [])
    except (UnicodeDecodeError, ValueError, AttributeError):
        return set()
    names: set[str] = set()
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            defined = defined_in_cell(source_text(cell.get("source", "")))
            names |= {name for name, node in defined.items() if node is not None}
    return names

