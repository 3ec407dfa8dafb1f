"""IPython's syntax in a notebook cell, made plain Python line for line.

Magics are not the student's code: a ``%`` or ``!`` line becomes ``pass`` (so that an
indented one leaves its block whole), ``y = %time f(x)`` runs ``f(x)`` as the kernel did,
``y = !ls`` gives ``None``; the body of a ``%%time``, ``%%capture`` or ``%%prun`` cell runs
as the kernel ran it, and any other ``%%`` cell is commented out. Every change keeps the
cell's lines where they were, so messages still name the student's lines.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize


#: cell magics whose body IPython runs as Python in the kernel's namespace (it defines what it defines)
RUNNING_CELL_MAGICS = ("time", "capture", "prun")
#: ``y = %time f(x)``: an assignment from a line magic (or ``y = !ls``)
_ASSIGNED_MAGIC = re.compile(r"^(?P<lhs>\s*[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*)"
                             r"(?P<magic>%{1,2}\w+|!)(?P<rest>.*)$")


def without_magics(source: str) -> str:
    """``source`` with its IPython magics made plain Python, line for line (see the module). A magic
    line becomes ``pass`` where a block needs a statement, a comment where ``pass`` would not parse
    (a stray indented magic at the top level, as IPython allows)."""
    as_pass = _magics_replaced(source, _as_pass)
    return as_pass if parse(as_pass) is not None else _magics_replaced(source, commented)


def _magics_replaced(source: str, replace) -> str:
    cell_lines = source.splitlines()
    first = cell_lines[0].lstrip() if cell_lines else ""
    cell_magic = first[2:].split(maxsplit=1)[0] if first.startswith("%%") and len(first) > 2 else None
    kept: list[str] = []
    for i, line in enumerate(cell_lines):
        stripped = line.lstrip()
        if cell_magic is not None and (i == 0 or cell_magic not in RUNNING_CELL_MAGICS):
            line = commented(line) if i else replace(line)
        elif _looks_like_magic(stripped) and _starts_statement(kept):
            line = replace(line)
        elif _starts_statement(kept) and (assigned := _ASSIGNED_MAGIC.match(line)):
            magic, rest = assigned["magic"], assigned["rest"]
            value = rest.strip() if magic in ("%time", "%prun") and rest.strip() else f"None  # {magic}{rest}"
            line = assigned["lhs"] + value
        kept.append(line)
    return "\n".join(kept)


def _as_pass(line: str) -> str:
    """A magic line as ``pass``, at its indentation (a block it stands in stays whole), the magic kept as a comment."""
    stripped = line.lstrip()
    return line[: len(line) - len(stripped)] + "pass  # " + stripped


def commented(line: str) -> str:
    stripped = line.lstrip()
    return line if stripped.startswith("#") else line[: len(line) - len(stripped)] + "# " + stripped


def _looks_like_magic(stripped: str) -> bool:
    return stripped.startswith("%") or (stripped.startswith("!") and not stripped.startswith("!="))


def _starts_statement(previous: list[str]) -> bool:
    """Whether the next line begins a new statement (not inside brackets, a string or a ``\\``)."""
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


def parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None
