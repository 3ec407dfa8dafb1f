"""Every field of the grader's dataclasses is documented where it is declared (a ``#:``
comment above it), so that what a spec or a result holds, and every value a field can
take, is read in one place."""
from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parent.parent / "grader"


def _dataclass(node: ast.ClassDef) -> bool:
    return any((isinstance(d, ast.Name) and d.id == "dataclass")
               or (isinstance(d, ast.Call) and getattr(d.func, "id", "") == "dataclass") for d in node.decorator_list)


def test_every_dataclass_field_is_documented():
    undocumented = []
    for path in sorted(GRADER.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, ast.ClassDef) and _dataclass(node):
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign) and not lines[stmt.lineno - 2].strip().startswith("#:"):
                        undocumented.append(f"{path.relative_to(GRADER)}:{stmt.lineno} {node.name}."
                                            f"{ast.unparse(stmt.target)}")
    assert not undocumented, "fields without a #: comment above them: " + ", ".join(undocumented)
