#!/usr/bin/env python3
"""The grader's structure in numbers, for a closing note or a review: import circles and imports of a higher
layer (counting those under ``if TYPE_CHECKING:`` too, which tests/test_layers.py lets through), bare ``dict``
annotations and returns, ``Any``, ``TypedDict`` classes, functions over 60 lines, modules over 450 lines.

    python scripts/structure_counts.py            # the counts
    python scripts/structure_counts.py --list     # and what each count is made of
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import test_layers as layers  # noqa: E402 - the layers are written once, in the test


def _all_imports(name: str, path: Path) -> set[str]:
    """What ``name`` imports, the imports for types only included."""
    source = path.read_text(encoding="utf-8").replace("if TYPE_CHECKING:", "if True:")
    return layers._imports(name, path, source)


def _is_bare_dict(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Name) and node.id == "dict" or (
        isinstance(node, ast.Constant) and node.value == "dict")


def counts() -> dict[str, list[str]]:
    graph = {name: _all_imports(name, path) for name, path in layers.MODULES.items()}
    found: dict[str, list[str]] = {
        "import circles (types included)": [" <-> ".join(c) for c in layers.circles(graph)],
        "imports of a higher layer (types included)": layers.upward_imports(graph),
        "functions returning a bare dict": [], "bare dict annotations (arguments, fields)": [],
        "Any": [], "TypedDict classes": [], "functions over 60 lines": [], "modules over 450 lines": [],
    }
    for name, path in sorted(layers.MODULES.items()):
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n") + 1
        if lines > 450:
            found["modules over 450 lines"].append(f"{name}: {lines}")
        tree = ast.parse(text)
        for node in ast.walk(tree):
            where = f"{name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if _is_bare_dict(node.returns):
                    found["functions returning a bare dict"].append(f"{where} {node.name}")
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > 60:
                    found["functions over 60 lines"].append(f"{where} {node.name}: {size}")
                for arg in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]:
                    if _is_bare_dict(arg.annotation):
                        found["bare dict annotations (arguments, fields)"].append(f"{where} {node.name}({arg.arg})")
            elif isinstance(node, ast.AnnAssign) and _is_bare_dict(node.annotation):
                found["bare dict annotations (arguments, fields)"].append(where)
            elif isinstance(node, ast.Name) and node.id == "Any":
                found["Any"].append(where)
            elif isinstance(node, ast.ClassDef) and any(getattr(b, "id", None) == "TypedDict" for b in node.bases):
                found["TypedDict classes"].append(f"{where} {node.name}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="list what each count is made of")
    args = parser.parse_args()
    for what, items in counts().items():
        print(f"{len(items):5d}  {what}")
        if args.list:
            for item in items:
                print(f"         {item}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
