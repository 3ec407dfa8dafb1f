"""A chapter's variants: the wrong answers (and the differently right ones) its tests grade, each declaring
its verdict, and most of them written as what they change in the reference solution.

A variant is ``<chapter's variants folder>/<exercise>/<name>.py`` (``variants`` in chapter.toml) whose
header declares the checks it must fail (``# expect-failed: a, b``; empty: a correct answer), those skipped
because of it (``# expect-skipped:``), the hint each failed check shows (``# expect-hint: check=hint``) and
why (``# why: ...``). ``tests/test_variants.py`` grades every chapter's variants.

A variant file whose header says ``# base: solution`` holds only the module-level statements it changes
(a function, a class, a constant) and any imports they need. :func:`splice` makes the submission module
from it: the solution's own text, each statement defining a name the patch defines replaced by the
patch's statement (its decorators and the comments just above it with it), statements defining new names
put before the first one replaced, the patch's imports after the solution's. The rest of the solution,
its docstring, imports and other functions, stays as it is, so a variant states its mistake and nothing
else, and follows the solution when the solution changes.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grader.chapter import Chapter

#: the header line of a variant written as a patch of the solution
PATCH_HEADER = "# base: solution"


class PatchError(ValueError):
    """The patch cannot be applied; the message names the file and the statement."""


def defined_names(node: ast.stmt) -> set[str]:
    """The module-level names a statement defines (none for an import or an expression)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    names = set()
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                names.add(sub.id)
    return names


def _span(node: ast.stmt, lines: list[str]) -> tuple[int, int]:
    """0-based [start, end) of a statement's lines: its decorators, and the comment lines just above it (a
    variant's header lines excepted)."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
    while first > 0 and lines[first - 1].lstrip().startswith("#") and not _is_header(lines[first - 1]):
        first -= 1
    return first, node.end_lineno or node.lineno


def _is_header(line: str) -> bool:
    return line.startswith(("# expect-", "# why:", "#      ", PATCH_HEADER))


def is_patch(text: str) -> bool:
    """Whether a variant's header (its leading comment lines) says ``# base: solution``."""
    for line in text.splitlines():
        if not line.startswith("#"):
            return False
        if line.strip() == PATCH_HEADER:
            return True
    return False


def splice(solution: str, patch: str, *, name: str = "variant") -> str:
    """The solution's text with the patch's definitions in place of its own (see the module's docstring)."""
    sol_tree, patch_tree = ast.parse(solution), ast.parse(patch, filename=name)
    sol_lines, patch_lines = solution.splitlines(), patch.splitlines()
    imports, replacing, new = [], {}, []
    for node in patch_tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append("\n".join(patch_lines[node.lineno - 1:node.end_lineno]))
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring: the solution's stays
        names = defined_names(node)
        if not names:
            raise PatchError(f"{name}:{node.lineno}: a patch holds definitions and imports only "
                             f"(this statement defines no name)")
        start, end = _span(node, patch_lines)
        text = "\n".join(patch_lines[start:end])
        hits = [i for i, s in enumerate(sol_tree.body) if defined_names(s) & names]
        if hits:
            for i in hits:
                replacing[i] = text if i == hits[0] else ""
        else:
            new.append(text)
    if not replacing and not new:
        raise PatchError(f"{name}: the patch changes nothing in the solution")
    out: list[str] = []
    cursor = 0
    insert_at = min(replacing) if replacing else None
    last_import = max((i for i, s in enumerate(sol_tree.body) if isinstance(s, (ast.Import, ast.ImportFrom))),
                      default=None)
    if last_import is None:
        out.extend(imports)
        imports = []
    for i, node in enumerate(sol_tree.body):
        start, end = _span(node, sol_lines)
        out.extend(sol_lines[cursor:start])
        if i == insert_at:
            out.extend(text + "\n" for text in new)
            new = []
        if i not in replacing:
            out.extend(sol_lines[start:end])
        elif replacing[i]:
            out.append(replacing[i])
        if i == last_import:
            out.extend(imports)
        cursor = end
    out.extend(sol_lines[cursor:])
    out.extend("\n" + text for text in new)  # only new names: after the solution
    return "\n".join(out) + "\n"


@dataclass
class Variant:
    """A submission module with its expected verdict, declared in its header comments."""

    #: the chapter's id
    chapter: str
    #: the exercise it is a student module of (its folder's name)
    exercise: str
    #: its name (the file's stem): what it does wrong, or ``alt_...`` for a correct answer written otherwise
    name: str
    #: its file
    path: Path
    #: the reference solution's folder (a patch is spliced into its module of the exercise)
    solutions: Path
    #: the checks it must fail (``# expect-failed:``; none: a correct answer)
    failed: set[str] = field(default_factory=set)
    #: the checks it must leave skipped (``# expect-skipped:``)
    skipped: set[str] = field(default_factory=set)
    #: why it is wrong, or how it is right (``# why:``)
    why: str = ""
    #: the hint each failed check must show (``hint_id`` in the report); ``check`` when not named
    hints: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.exercise}/{self.name}"

    @property
    def source(self) -> str:
        """The student module this variant is: the file itself, or the solution with the patch spliced in."""
        return module_text(self.path, self.solutions / f"{self.exercise}.py")


def module_text(path: Path, solution: Path) -> str:
    """The module a variant file stands for (a patch spliced into ``solution``, else the file's own text)."""
    text = path.read_text(encoding="utf-8")
    if not is_patch(text):
        return text
    return splice(solution.read_text(encoding="utf-8"), text, name=str(path))


def _header_set(text: str, key: str) -> set[str]:
    match = re.search(rf"^# {key}:(.*)$", text, re.M)
    if not match:
        return set()
    return {part.strip() for part in match.group(1).split(",") if part.strip()}


def load(chapter: "Chapter") -> list[Variant]:
    """Every variant of ``chapter`` (none when it names no variants folder)."""
    if chapter.variants is None or not chapter.variants.is_dir():
        return []
    found = []
    for path in sorted(chapter.variants.glob("*/*.py")):
        text = path.read_text(encoding="utf-8")
        if "# expect-failed:" not in text:
            raise ValueError(f"{path}: no '# expect-failed:' header")
        why = re.search(r"^# why:(.*)$", text, re.M)
        hints = dict(item.split("=", 1) for item in _header_set(text, "expect-hint"))
        found.append(Variant(chapter.id, path.parent.name, path.stem, path, chapter.solutions,
                             _header_set(text, "expect-failed"), _header_set(text, "expect-skipped"),
                             why.group(1).strip() if why else "",
                             {k.strip(): v.strip() for k, v in hints.items()}))
    return found
