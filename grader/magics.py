"""IPython's syntax in a notebook cell, made plain Python line for line.

IPython turns a cell into Python before running it (``IPython/core/inputtransformer2.py``,
``TransformerManager.transform_cell``); this module recognises what it recognises, and
where it does:

* ``leading_indent``: a cell indented as a whole is dedented;
* ``cell_magic``: a first line (after blank ones) ``%%name`` makes the whole cell a cell
  magic, unless it is ``%%name?`` (help, below);
* ``EscapedCommand``: a logical line whose first token is one of ``! ? % , ; /`` (and
  ``!!``, ``??``): a shell command, help, a line magic or an auto-call; it runs with the
  lines it continues with a trailing ``\\``;
* ``HelpEnd``: a logical line ending in ``?`` or ``??`` (``jax.jit?``, ``x = foo??``):
  help on a name, the whole line (an assignment in it included);
* ``MagicAssign`` and ``SystemAssign``: ``y = %magic args`` and ``y = !cmd``, the first
  ``=`` not inside brackets (not ``+=``, not ``==``).

Magics are not the student's code. A help, shell or magic line becomes ``pass`` (so that
an indented one leaves its block whole), or a comment where ``pass`` would not parse (an
indented magic at the top level); ``y = %time f(x)`` runs ``f(x)`` as the kernel did (``%time``
returns the value of its expression), any other ``y = %magic ...`` or ``y = !cmd`` gives
``None``; the body of a ``%%time``, ``%%capture`` or ``%%prun`` cell runs as the kernel ran it,
and any other ``%%`` cell is commented out. Every change keeps the cell's lines where they
were, so messages still name the student's lines.
"""
from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize


#: cell magics whose body IPython runs as Python in the kernel's namespace (it defines what it defines)
RUNNING_CELL_MAGICS = ("time", "capture", "prun")
#: ``EscapedCommand``: the escapes IPython recognises as a logical line's first token (ESCAPE_SINGLES)
ESCAPES = ("!", "?", "%", ",", ";", "/")
#: what follows the ``=`` of ``y = %time f(x)`` or ``y = !ls``: a line magic or a shell command
_MAGIC_VALUE = re.compile(r"^(?P<magic>%{1,2}[A-Za-z_]\w*|!)(?P<rest>.*)$")
#: ``HelpEnd``: IPython's ``_help_end_re``, a name (dotted, or indexed by an integer) and ``?``/``??``
_HELP_END = re.compile(r"(%{0,2}(?!\d)[\w*]+(\.(?!\d)[\w*]+|\[-?[0-9]+\])*)(\?\??)$")


def without_magics(source: str) -> str:
    """``source`` with its IPython syntax made plain Python, line for line (see the module). A magic
    line becomes ``pass`` where a block needs a statement, a comment where ``pass`` would not parse
    (a stray indented magic at the top level, as IPython allows)."""
    source = _dedented(source)
    as_pass = _magics_replaced(source, _as_pass)
    return as_pass if parse(as_pass) is not None else _magics_replaced(source, commented)


def _dedented(source: str) -> str:
    """IPython's ``leading_indent``: a cell whose lines are all indented, dedented (same lines)."""
    return textwrap.dedent(source) if source[:1] in (" ", "\t") else source


def _magics_replaced(source: str, replace) -> str:
    cell_lines = source.splitlines()
    start = next((i for i, line in enumerate(cell_lines) if line.strip()), 0)  # IPython's leading_empty_lines
    first = cell_lines[start].lstrip() if cell_lines else ""
    cell_magic = first[2:].split(maxsplit=1)[0] if first.startswith("%%") and len(first) > 2 \
        and not re.match(r"%%\w+\?", first) else None
    kept: list[str] = []
    continued = False  # the line before was an escaped command ending with a backslash
    for i, line in enumerate(cell_lines):
        stripped = line.lstrip()
        if cell_magic is not None and i >= start and (i == start or cell_magic not in RUNNING_CELL_MAGICS):
            line = replace(line) if i == start else commented(line)
        elif continued:
            line = commented(line)
        # what the line is first (a few string tests), then whether it starts a statement: tokenizing the
        # lines before it for every line took a notebook's 40 cells 0.5 s
        elif (_is_escaped(stripped) or _is_help(stripped)) and _starts_statement(kept):
            line = replace(line)
            continued = line.rstrip().endswith("\\")
            kept.append(line.rstrip("\\").rstrip() if continued else line)
            continue
        elif (assigned := _assigned_magic(line)) and _starts_statement(kept):
            lhs, magic, rest = assigned
            value = rest.strip() if magic in ("%time", "%prun") and rest.strip() else f"None  # {magic}{rest}"
            line = lhs + value
        continued = continued and line.rstrip().endswith("\\")
        kept.append(line)
    return "\n".join(kept)


def _as_pass(line: str) -> str:
    """A magic line as ``pass``, at its indentation (a block it stands in stays whole), the magic kept as a comment."""
    stripped = line.lstrip()
    return line[: len(line) - len(stripped)] + "pass  # " + stripped


def commented(line: str) -> str:
    stripped = line.lstrip()
    return line if stripped.startswith("#") else line[: len(line) - len(stripped)] + "# " + stripped


def _assigned_magic(line: str) -> tuple[str, str, str] | None:
    """``MagicAssign``/``SystemAssign``: ``(lhs =, %magic or !, the rest)`` when the value after the
    line's first ``=`` outside brackets and strings (IPython's ``_find_assign_op``; not ``==`` nor
    ``+=`` and the like) is a line magic or a shell command."""
    depth, quote = 0, None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote and line[i - 1] != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char == "#":
            return None
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif char == "=" and depth == 0:
            if line[i + 1:i + 2] == "=" or (i and line[i - 1] in "=!<>+-*/%&|^@:"):
                return None
            value = _MAGIC_VALUE.match(line[i + 1:].lstrip())
            if value is None:
                return None
            lhs = line[:i + 1] + line[i + 1:][: len(line[i + 1:]) - len(line[i + 1:].lstrip())]
            return lhs, value["magic"], value["rest"]
    return None


def _is_escaped(stripped: str) -> bool:
    """``EscapedCommand``: the line's first token is one of IPython's escapes (``!=`` is not ``!``)."""
    return stripped.startswith(ESCAPES) and not stripped.startswith("!=")


def _is_help(stripped: str) -> bool:
    """``HelpEnd``: the line's last token is ``?`` after a name (``jax.jit?``, ``x = jnp.where??``),
    not inside a comment or a string."""
    match = _HELP_END.search(stripped.rstrip())
    if match is None:
        return False
    before = stripped.rstrip()[: match.end(1)]
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(before + "\n").readline)
                  if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT,
                                    tokenize.DEDENT)]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return False
    return bool(tokens) and tokens[-1].type not in (tokenize.COMMENT, tokenize.STRING)


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
