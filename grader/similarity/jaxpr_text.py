"""A jaxpr's printed text read back into its parts: what :mod:`grader.similarity.traced` canonicalises.

``str(jax.make_jaxpr(fn)(*args))`` is the only form of a student's trace the grader keeps (it crosses
the sandbox as text), so the parts are read from the pretty-printer's output, as JAX 0.4.30 to 0.10
writes it: ``{ lambda CONSTS ; INVARS . let EQN* in (OUTS) }``, equations separated by newlines or by
``; `` when short, an equation ``OUT:TYPE* = PRIM[KEY=VALUE*] ARG*``, a literal argument ``2.0:f32[]``
(``2.0`` before JAX 0.4.36), nested jaxprs as parameter values (``jaxpr={ lambda ... }``), and jaxprs
used more than once printed first as ``let NAME = { lambda ... } in`` and named where they are used.
Text that is not of that shape raises :class:`ValueError`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Union

_TOKEN = re.compile(r"""
    (?P<nl>\n) | (?P<ws>[ \t\r]+)
  | (?P<typed>[^\s{}\[\]()=,;:]+:[^\s{}\[\]()=,;]*(?:\[[^\]]*\])?(?:\{[^}\s]*\})?)
  | (?P<punct>[{}\[\]()=,;])
  | (?P<word>[^\s{}\[\]()=,;]+)
""", re.X)
_OPEN = {"{": "}", "[": "]", "(": ")"}


@dataclass(frozen=True)
class Var:
    """A binder: a variable's name and its type as printed (``f32[3]``)."""
    #: its name as printed (``a``, ``bq``)
    name: str
    #: its type as printed (``f32[3]``)
    type: str


@dataclass(frozen=True)
class Arg:
    """An equation's argument or a jaxpr's output: a variable's name, or a literal (its ``type`` printed
    after it; an untyped word that names no variable in scope is a literal of an older JAX)."""
    #: a variable's name, or a literal's value
    text: str
    #: a literal's type, where printed after it
    type: str | None = None


#: a parameter's value: text, with any nested jaxpr kept as a parsed :class:`Jaxpr`
Value = list[Union[str, "Jaxpr"]]


@dataclass
class Eqn:
    #: the variables it binds
    outs: list[Var]
    #: its primitive (``mul``, ``jit``, ``select_n``)
    prim: str
    #: its parameters, by name, in printed order (a nested jaxpr parsed)
    params: list[tuple[str, Value]]
    #: its arguments
    args: list[Arg]


@dataclass
class Jaxpr:
    #: the constants it closes over
    consts: list[Var]
    #: its inputs
    invars: list[Var]
    #: its equations, in printed order
    eqns: list[Eqn] = field(default_factory=list)
    #: what it returns
    outs: list[Arg] = field(default_factory=list)


def _tokens(text: str) -> list[tuple[str, str]]:
    found = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or "word"
        if kind != "ws":
            found.append((kind, match.group()))
    return found


class _Reader:
    """A recursive-descent reader over the tokens; ``shared`` holds the ``let NAME = {...} in`` jaxprs."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.shared: dict[str, Jaxpr] = {}

    def peek(self, ahead: int = 0) -> tuple[str, str]:
        index = self.at + ahead
        return self.tokens[index] if index < len(self.tokens) else ("end", "")

    def take(self, text: str | None = None) -> str:
        kind, got = self.peek()
        if kind == "end" or (text is not None and got != text):
            raise ValueError(f"jaxpr text: expected {text or 'more'!r} at token {self.at}, found {got!r}")
        self.at += 1
        return got

    def skip_lines(self) -> None:
        while self.peek()[0] == "nl":
            self.at += 1

    def top(self) -> list[Jaxpr]:
        """Every top-level jaxpr of the text, in order (text between them, such as a label, is skipped)."""
        found = []
        while self.peek()[0] != "end":
            kind, text = self.peek()
            if text == "let" and self.peek(2)[1] == "=" and self.peek(3)[1] == "{":
                self.at += 3
                name = self.tokens[self.at - 2][1]
                self.shared[name] = self.jaxpr()
                self.take("in")
            elif text == "{" and self.peek(1)[1] == "lambda":
                found.append(self.jaxpr())
            else:
                self.at += 1
        if not found:
            raise ValueError("jaxpr text: no '{ lambda ... }' in it")
        return found

    def binders(self, end: str) -> list[Var]:
        found = []
        while self.peek()[1] != end:
            kind, text = self.peek()
            if kind != "typed":
                raise ValueError(f"jaxpr text: a binder expected, found {text!r}")
            name, _, type_ = self.take().partition(":")
            found.append(Var(name, type_))
            self.skip_lines()
        self.take(end)
        return found

    def jaxpr(self) -> Jaxpr:
        self.take("{")
        self.take("lambda")
        self.skip_lines()
        consts = self.binders(";")
        self.skip_lines()
        invars = self.binders(".")
        self.take("let")
        eqns = []
        while True:
            while self.peek()[0] == "nl" or self.peek()[1] == ";":
                self.at += 1
            if self.peek()[1] == "in" and self.peek(1)[1] == "(":
                break
            eqns.append(self.eqn())
        self.take("in")
        outs = self.group_args()
        depth = 0
        while depth or self.peek()[1] != "}":  # effects (``: { ... }``) and line breaks before the close
            depth += {"{": 1, "}": -1}.get(self.take(), 0)
        self.take("}")
        return Jaxpr(consts, invars, eqns, outs)

    def group_args(self) -> list[Arg]:
        self.take("(")
        found = []
        while self.peek()[1] != ")":
            kind, text = self.peek()
            self.at += 1
            if kind in ("typed", "word"):
                found.append(_arg(kind, text))
        self.take(")")
        return found

    def eqn(self) -> Eqn:
        outs = []
        while self.peek()[0] == "typed":
            name, _, type_ = self.take().partition(":")
            outs.append(Var(name, type_))
            self.skip_lines()
        if outs:
            self.take("=")
        prim = self.take()
        params = self.params() if self.peek()[1] == "[" else []
        args = []
        while True:
            kind, text = self.peek()
            if kind in ("nl", "end") or text in (";", "}") or (text == "in" and self.peek(1)[1] == "("):
                break
            if kind not in ("typed", "word"):
                raise ValueError(f"jaxpr text: an argument expected after {prim}, found {text!r}")
            if kind == "typed" and self._starts_eqn():
                break
            args.append(_arg(kind, self.take()))
        return Eqn(outs, prim, params, args)

    def _starts_eqn(self) -> bool:
        """Whether typed tokens from here run into ``=`` (the next equation on the same line)."""
        ahead = 0
        while self.peek(ahead)[0] == "typed":
            if not re.match(r"[a-z_][a-z]*:", self.peek(ahead)[1]):
                return False
            ahead += 1
        return self.peek(ahead)[1] == "="

    def params(self) -> list[tuple[str, Value]]:
        self.take("[")
        found = []
        while True:
            self.skip_lines()
            if self.peek()[1] == "]":
                break
            key = self.take()
            self.take("=")
            value: Value = []
            while True:
                self.skip_lines()
                kind, text = self.peek()
                if text == "]" or (kind == "word" and self.peek(1)[1] == "="):
                    break
                value.extend(self.value_part())
            found.append((key, value))
        self.take("]")
        return found

    def value_part(self) -> Value:
        kind, text = self.peek()
        if text == "{" and self.peek(1)[1] == "lambda":
            return [self.jaxpr()]
        if text in _OPEN:
            self.at += 1
            parts: Value = [text]
            while self.peek()[1] != _OPEN[text]:
                if self.peek()[0] == "nl":
                    self.at += 1
                    continue
                parts.extend(self.value_part())
            parts.append(self.take())
            return parts
        if text in (")", "]", "}") or kind == "end":
            raise ValueError(f"jaxpr text: unbalanced {text!r} in a parameter")
        self.at += 1
        if kind == "word" and text in self.shared:
            return [self.shared[text]]
        return [text]


def _arg(kind: str, text: str) -> Arg:
    if kind == "typed":
        value, _, type_ = text.partition(":")
        return Arg(value, type_)
    return Arg(text)


def parse(text: str) -> list[Jaxpr]:
    """The top-level jaxprs of ``text`` (one per ``make_jaxpr`` printed into it), nested ones inside their
    parameters; :class:`ValueError` when it is not a printed jaxpr."""
    try:
        return _Reader(text).top()
    except IndexError as error:  # pragma: no cover - a defensive net for truncated text
        raise ValueError(f"jaxpr text: cut short ({error})") from error
