"""Generate the student's stubs from the reference solutions.

A solution module marks what the student writes with two kinds of blocks::

    # BEGIN SOLUTION
    return jnp.where(x > 0, x * x, 0.5 * x)
    # END SOLUTION
    # BEGIN STUB
    #| # TODO(ex02): use jnp.where(condition, if_true, if_false).
    #| raise NotImplementedError("ex02: piecewise")
    # END STUB

The stub keeps everything else, drops every SOLUTION block and un-comments every
STUB block (each of its lines starts with ``#|`` after the indentation). In the
solution module the STUB blocks are comments, so the solution runs as written.
Every SOLUTION block must be followed by a STUB block (it may be empty), so that no
answer disappears without an instruction in its place.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_MARKER = re.compile(r"^\s*# (BEGIN|END) (SOLUTION|STUB)\s*$")
_STUB_LINE = re.compile(r"^(\s*)#\|(?: (.*))?$")


class StubFormatError(ValueError):
    """A solution module whose markers do not follow the format above."""


@dataclass(frozen=True)
class StubDiff:
    """One stub file that differs from what its solution generates."""

    name: str
    reason: str


def make_stub(source: str, *, filename: str = "<solution>") -> str:
    """Return the stub text for one solution module's text."""
    out: list[str] = []
    state = "code"  # code | solution | stub
    last_closed = None
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        marker = _MARKER.match(line)
        where = f"{filename}:{number}"
        if marker:
            edge, kind = marker.groups()
            expected = {
                ("code", "BEGIN", "SOLUTION"): "solution",
                ("code", "BEGIN", "STUB"): "stub",
                ("solution", "END", "SOLUTION"): "code",
                ("stub", "END", "STUB"): "code",
            }.get((state, edge, kind))
            if expected is None:
                raise StubFormatError(f"{where}: unexpected '# {edge} {kind}' here")
            if (edge, kind) == ("BEGIN", "STUB") and last_closed != "SOLUTION":
                raise StubFormatError(f"{where}: a STUB block must follow a SOLUTION block")
            if edge == "BEGIN" and kind == "SOLUTION" and last_closed == "SOLUTION":
                raise StubFormatError(f"{where}: the SOLUTION block above has no STUB block")
            last_closed = kind if edge == "END" else None
            state = expected
            continue
        if state == "code":
            if last_closed == "SOLUTION" and line.strip():
                raise StubFormatError(f"{where}: a SOLUTION block must be followed by a STUB block")
            if line.strip():
                last_closed = None
            out.append(line)
        elif state == "stub":
            match = _STUB_LINE.match(line.rstrip("\n"))
            if not match:
                raise StubFormatError(f"{where}: a line inside a STUB block must start with '#|'")
            indent, text = match.groups()
            out.append(f"{indent}{text}\n" if text else "\n")
    if state != "code":
        raise StubFormatError(f"{filename}: the file ends inside a {state.upper()} block")
    if last_closed == "SOLUTION":
        raise StubFormatError(f"{filename}: the last SOLUTION block has no STUB block")
    return "".join(out)


def generate(solutions: Path, exercises: Path, *, write: bool) -> list[StubDiff]:
    """Compare (or, with ``write``, rewrite) every stub of a chapter with its solution."""
    diffs: list[StubDiff] = []
    for solution in sorted(solutions.glob("*.py")):
        stub_text = make_stub(solution.read_text(encoding="utf-8"), filename=str(solution))
        target = exercises / solution.name
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == stub_text:
            continue
        diffs.append(StubDiff(solution.name, "missing" if current is None else "differs"))
        if write:
            exercises.mkdir(parents=True, exist_ok=True)
            target.write_text(stub_text, encoding="utf-8")
    return diffs
