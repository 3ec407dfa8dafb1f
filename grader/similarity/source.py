"""Fingerprints of a student's Python source, the way MOSS takes them (Schleimer, Wilkerson, Aiken 2003).

Measures: how much of two sources is the same text once what a copier changes for free is ignored.
The source is read as a syntax tree and walked into tokens, each with its line: every name stands for
its role only (``P`` a parameter, ``V`` any other local name, ``F`` a function the module defines), so
renaming changes nothing; a string is ``STR`` and a number ``NUM``; docstrings and comments are gone;
but the API stays: ``jnp.where`` is the token ``jax.numpy.where`` (the import's alias resolved, so
``import jax.numpy as np`` writes the same), a method or attribute (``x.sum``, ``.astype``) keeps its name,
and so does a keyword argument (``static_argnums=``). Every ``k`` consecutive tokens are hashed (blake2b:
the same on every machine and run, unlike ``hash``), and winnowing keeps the smallest hash of each
``window`` consecutive ones: any run of ``k + window - 1`` tokens two sources share leaves a fingerprint
in both. A fingerprint keeps the lines its tokens came from, to show where two sources match.

Source that does not parse is read by :mod:`tokenize` instead (names as ``ID``, an attribute after a dot
kept); what cannot even be tokenized gives the fingerprints of what came before the error.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import io
import keyword
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass

#: tokens of ``k`` nodes make one hash; of each ``window`` hashes, the smallest is kept
K = 6
WINDOW = 4
_BUILTINS = frozenset(dir(builtins))
_SKIPPED = (ast.expr_context, ast.Import, ast.ImportFrom)


@dataclass(frozen=True, slots=True)
class Print:
    """One fingerprint: the hash of ``k`` tokens and the lines they span, first and last (1-based)."""
    #: the hash of ``k`` tokens (blake2b: the same in every process)
    hash: int
    #: the lines they span, first and last (1-based)
    lines: tuple[int, int]


@dataclass(frozen=True, slots=True)
class Token:
    #: the token as compared (a name by its role, a literal by its kind)
    text: str
    #: its line (1-based)
    line: int


def fingerprints(source: str, *, k: int = K, window: int = WINDOW) -> list[Print]:
    """The winnowed fingerprints of ``source``, in the order of the text; [] for text with no tokens."""
    return winnow(_grams(tokens(source), k), window)


def tokens(source: str) -> list[Token]:
    """``source`` as normalised tokens (from its syntax tree; from :mod:`tokenize` when it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return _plain_tokens(source)
    roles = _Roles(tree)
    return list(roles.walk(tree, 1))


class _Roles:
    """What each name of a module stands for: an imported module or name, a function, a parameter."""

    def __init__(self, tree: ast.AST) -> None:
        self.imported: dict[str, str] = {}
        self.functions: set[str] = set()
        self.parameters: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imported[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.imported[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                self.imported.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.functions.add(node.name)
            elif isinstance(node, ast.arg):
                self.parameters.add(node.arg)

    def name(self, name: str) -> str:
        if name in self.imported:
            return self.imported[name]
        if name in self.parameters:
            return "P"
        if name in self.functions:
            return "F"
        return name if name in _BUILTINS else "V"

    def api(self, node: ast.expr) -> str | None:
        """``jax.numpy.where`` for ``jnp.where`` (a chain of attributes on an imported name), else None."""
        if isinstance(node, ast.Name):
            return self.imported.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.api(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def walk(self, node: ast.AST, line: int) -> Iterator[Token]:
        line = getattr(node, "lineno", line)
        if isinstance(node, _SKIPPED) or _is_docstring(node):
            return
        if isinstance(node, (ast.operator, ast.unaryop, ast.cmpop, ast.boolop)):
            yield Token(type(node).__name__, line)
            return
        leaf = self._leaf(node)
        if leaf is not None:
            yield Token(leaf, line)
            return
        if not isinstance(node, ast.Module):
            yield Token(type(node).__name__, line)
        if isinstance(node, ast.Attribute):
            yield from self.walk(node.value, line)
            yield Token(f".{node.attr}", line)
            return
        if isinstance(node, ast.keyword):
            yield Token(f"{node.arg}=", line)
        for child in _children(node):
            yield from self.walk(child, line)

    def _leaf(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.arg):
            return "P"
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (str, bytes)):
                return "STR"
            return repr(node.value) if node.value is None or isinstance(node.value, bool) else "NUM"
        if isinstance(node, ast.Attribute):
            return self.api(node)
        return None


def _children(node: ast.AST) -> list[ast.AST]:
    """A node's children in the order of the text (a definition's decorators before it)."""
    children = list(ast.iter_child_nodes(node))
    decorators = getattr(node, "decorator_list", [])
    return [*decorators, *(child for child in children if child not in decorators)]


def _is_docstring(node: ast.AST) -> bool:
    """A statement that is a string alone (a docstring, or a string standing as a comment)."""
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str))


def _plain_tokens(source: str) -> list[Token]:
    found: list[Token] = []
    skipped = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
               tokenize.ENCODING, tokenize.ENDMARKER}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in skipped:
                continue
            text = token.string
            if token.type == tokenize.NAME and not keyword.iskeyword(text):
                text = text if (found and found[-1].text == ".") or text in _BUILTINS else "ID"
            elif token.type == tokenize.NUMBER:
                text = "NUM"
            elif token.type == tokenize.STRING:
                text = "STR"
            found.append(Token(text, token.start[0]))
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def _hash(texts: list[str]) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(texts).encode(), digest_size=8).digest(), "big")


def _grams(found: list[Token], k: int) -> list[Print]:
    """Every run of ``k`` tokens hashed (one run of all of them when there are fewer)."""
    size = min(k, len(found))
    grams = []
    for start in range(len(found) - size + 1 if found else 0):
        run = found[start:start + size]
        lines = [t.line for t in run]
        grams.append(Print(_hash([t.text for t in run]), (min(lines), max(lines))))
    return grams


def winnow(grams: list[Print], window: int) -> list[Print]:
    """Of every ``window`` consecutive grams the smallest hash (the rightmost of equals), each position once."""
    if not grams:
        return []
    kept: list[Print] = []
    last = -1
    for start in range(max(1, len(grams) - window + 1)):
        span = grams[start:start + window]
        low = min(p.hash for p in span)
        at = start + max(i for i, p in enumerate(span) if p.hash == low)
        if at != last:
            kept.append(grams[at])
            last = at
    return kept
