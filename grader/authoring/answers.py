"""What of a chapter's solutions is the answer, so that it is kept out of what students get.

The answer is the code of a solution's SOLUTION blocks (see :mod:`grader.authoring.stubs`)
that its stub does not already show: every statement and expression of it at least
:data:`MIN_CODE` characters long without spaces (shorter ones, and an API's name alone,
are hints, not answers), and the helpers it defines at the top of the module. Hints are
held to it (``tests/test_unit_hints.py``) and so is a course release
(:mod:`grader.authoring.release`).
"""
from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

#: a piece of code this long (without spaces) is an answer, not the name of a tool
MIN_CODE = 16
_MARKER = re.compile(r"^\s*# (BEGIN|END) (SOLUTION|STUB)\s*$")


def normalised(text: str) -> str:
    """Code or prose without whitespace, quotes made alike and backticks dropped."""
    return re.sub(r"\s+", "", text).replace('"', "'").replace("`", "")


def solution_blocks(source: str) -> list[str]:
    """The text of every SOLUTION block, dedented."""
    blocks, current, state = [], [], "code"
    for line in source.splitlines():
        marker = _MARKER.match(line)
        if marker:
            if marker.group(1) == "END" and state == "SOLUTION":
                blocks.append(textwrap.dedent("\n".join(current)))
                current = []
            state = marker.group(2) if marker.group(1) == "BEGIN" else "code"
        elif state == "SOLUTION":
            current.append(line)
    return blocks


def _names_a_tool(node: ast.AST) -> bool:
    """``statistics.median``, ``time.perf_counter()``: naming an API is a hint, not an answer."""
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        node = node.func
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def code_pieces(block: str) -> set[str]:
    """Every statement and expression of a SOLUTION block, normalised, at least MIN_CODE long."""
    try:
        nodes = [n for n in ast.walk(ast.parse(block)) if isinstance(n, (ast.expr, ast.stmt))]
    except SyntaxError:  # a decorator alone, for example: the lines themselves
        return {normalised(line) for line in block.splitlines() if len(normalised(line)) >= MIN_CODE}
    return {normalised(ast.unparse(n)) for n in nodes
            if not _names_a_tool(n) and len(normalised(ast.unparse(n))) >= MIN_CODE}


def answer_pieces(solution: str, stub: str) -> set[str]:
    """The normalised pieces of ``solution``'s SOLUTION blocks that ``stub`` does not show."""
    shown = normalised(stub)
    return {piece for block in solution_blocks(solution) for piece in code_pieces(block) if piece not in shown}


def helper_names(solution: str, stub: str) -> set[str]:
    """Functions and classes a solution defines at the top of the module inside a SOLUTION
    block, that its stub does not define or name (a jitted core of the answer's own, say): an
    answer's helpers."""
    inside, state = set(), "code"
    for number, line in enumerate(solution.splitlines(), start=1):
        marker = _MARKER.match(line)
        if marker:
            state = marker.group(2) if marker.group(1) == "BEGIN" else "code"
        elif state == "SOLUTION":
            inside.add(number)
    try:
        tree = ast.parse(solution)
    except SyntaxError:
        return set()
    names = {node.name for node in tree.body if node.lineno in inside
             and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    return {name for name in names if not re.search(rf"\b{re.escape(name)}\b", stub)}


def chapter_answers(solutions: Path, stubs: Path) -> tuple[set[str], set[str]]:
    """Every answer piece and helper name of a chapter's solutions (against its stubs)."""
    pieces: set[str] = set()
    helpers: set[str] = set()
    for solution in sorted(Path(solutions).glob("*.py")):
        stub_file = Path(stubs) / solution.name
        stub = stub_file.read_text(encoding="utf-8") if stub_file.exists() else ""
        source = solution.read_text(encoding="utf-8")
        pieces |= answer_pieces(source, stub)
        helpers |= helper_names(source, stub)
    return pieces, helpers
