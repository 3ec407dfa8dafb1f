"""Generate a chapter's student notebook from the same source as its stubs.

The notebook (``exercises/ch4.ipynb``: beside the stub folder, named after it) holds,
in order: the chapter's instructions (Chinese, then English) and a setup cell that
imports ``check``; then for each exercise its instructions as a Markdown cell (the
solution module's docstring), a cell of its imports, one cell per function (its stub:
each SOLUTION block dropped, its STUB block in its place), provided code in a cell
marked not to be changed, and a check cell, ``check("ex02")``; at the end a cell that
checks everything, ``check()``.

A cell is one top-level statement of the solution module with the comments above it;
a SOLUTION block and its STUB block always stay in one cell, so does the provided
code (between its ``=====`` fences), and the imports make one cell.

Generation is deterministic: no outputs, no execution counts, cell ids made of the
exercise and what the cell defines (``ex02-piecewise``), and nbformat's sorted keys.
With ``solved=True`` the same cells hold the solutions (a filled notebook, for tests).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from grader.authoring.stubs import Generated, StubFormatError, committed_text, make_stub
from grader.chapter import Chapter
from grader.i18n import T, grader_catalog

_MARKER = re.compile(r"^\s*# (BEGIN|END) (SOLUTION|STUB)\s*$")
_PROVIDED_END = re.compile(r"^# =+ .*(END OF PROVIDED CODE|提供的代码结束)")
_PROVIDED_START = re.compile(r"^# =+ .*(PROVIDED CODE|请勿修改)")
_RUN_LINE = re.compile(r"^\s*运行 / Run:")
#: cells the student should not change: JupyterLab, Notebook 7 and VS Code honour ``editable``
LOCKED = {"editable": False, "deletable": False}


@dataclass(frozen=True)
class Chunk:
    """One cell's worth of a solution module."""

    #: what it is for: ``imports``, ``stub`` (what the student writes) or ``provided``
    role: str
    #: what it defines, for its cell id (``piecewise``, ``imports``, ``provided``)
    name: str
    #: its lines in the solution module, markers included
    text: str


def notebook_path(chapter: Chapter) -> Path:
    """Where the chapter's notebook goes: beside its stub folder, named after it."""
    return chapter.stubs.parent / f"{chapter.stubs.name}.ipynb"


def chunks(source: str, *, filename: str = "<solution>") -> list[Chunk]:
    """The cells of one solution module (its docstring left out), in order."""
    make_stub(source, filename=filename)  # the markers are well formed (or StubFormatError names the line)
    lines = source.splitlines()
    tree = ast.parse(source, filename=filename)
    body = tree.body[1:] if ast.get_docstring(tree) is not None else tree.body
    spans = _spans(lines)
    groups: list[list] = []  # [first line, last line, nodes]
    end = tree.body[0].end_lineno if body is not tree.body else 0
    for node in body:
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        if groups and start <= end:  # inside the span of the cell before
            groups[-1][2].append(node)
            groups[-1][1] = end = _cover(max(end, node.end_lineno), groups[-1][0], spans)
            continue
        last = _cover(node.end_lineno, end + 1, spans)
        groups.append([end + 1, last, [node]])
        end = last
    if groups:
        groups[-1][1] = len(lines)
    merged: list[list] = []
    for group in groups:
        if merged and _is_imports(group[2]) and _is_imports(merged[-1][2]):
            merged[-1][1], merged[-1][2] = group[1], merged[-1][2] + group[2]
        else:
            merged.append(group)
    return [_chunk(lines, first, last, nodes) for first, last, nodes in merged]


def _spans(lines: list[str]) -> list[tuple[int, int]]:
    """Line ranges never cut: a SOLUTION block with its STUB block, the provided code."""
    spans, opened, provided = [], None, None
    for number, line in enumerate(lines, start=1):
        marker = _MARKER.match(line)
        if marker and marker.groups() == ("BEGIN", "SOLUTION"):
            opened = number
        elif marker and marker.groups() == ("END", "STUB") and opened is not None:
            spans.append((opened, number))
            opened = None
        elif _PROVIDED_END.match(line) and provided is not None:
            spans.append((provided, number))
            provided = None
        elif _PROVIDED_START.match(line):
            provided = number
    return spans


def _cover(last: int, first: int, spans: list[tuple[int, int]]) -> int:
    """``last`` moved down so that no span that lines ``first``..``last`` touch is cut."""
    moved = True
    while moved:
        moved = False
        for start, stop in spans:
            if start <= last and stop >= first and stop > last:
                last, moved = stop, True
    return last


def _is_imports(nodes: list) -> bool:
    return all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in nodes)


def _chunk(lines: list[str], first: int, last: int, nodes: list) -> Chunk:
    text = "\n".join(lines[first - 1:last]).strip("\n") + "\n"
    if _is_imports(nodes):
        return Chunk("imports", "imports", text)
    if any(_PROVIDED_START.match(line) for line in lines[first - 1:last]):
        return Chunk("provided", "provided", text)
    node = nodes[0]
    if isinstance(node, ast.Assign):
        name = next((t.id for t in node.targets if isinstance(t, ast.Name)), f"line{node.lineno}")
    else:
        name = getattr(node, "name", f"line{node.lineno}")
    return Chunk("stub", name, text)


def solution_code(text: str) -> str:
    """``text`` as the solution runs: the markers and the STUB blocks dropped."""
    kept, in_stub = [], False
    for line in text.splitlines():
        marker = _MARKER.match(line)
        if marker:
            in_stub = marker.groups() == ("BEGIN", "STUB")
            continue
        if not in_stub:
            kept.append(line)
    return "\n".join(kept).strip("\n") + "\n"


# ------------------------------------------------------------------ the notebook
def build(chapter: Chapter, *, solved: bool = False, sources: dict[str, str] | None = None):
    """The chapter's notebook (an nbformat object); ``sources`` are the solution modules'
    texts by file name (default: the chapter's ``solutions`` folder)."""
    import nbformat

    catalog = grader_catalog()

    def both(key: str, sep: str = "\n\n", **args) -> str:  # Chinese first, as in the stubs
        return sep.join(catalog.render(T(key, **args), lang) for lang in ("zh", "en"))

    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}, "grader": {"chapter": chapter.id}}
    cells = [_markdown(both("notebook.md_intro", title=chapter.title, chapter=chapter.id,
                            notebook=notebook_path(chapter).name, stubs=chapter.stubs.name,
                            n=len(chapter.exercises), points=f"{sum(e.max_score for e in chapter.exercises):g}"),
                       f"{chapter.id}-intro", None, "intro"),
             _code(both("notebook.setup_comment", "\n") + "\nfrom grader.notebook import check\n",
                   f"{chapter.id}-setup", None, "setup")]
    for ex in chapter.exercises:
        tag = ex.id.split("_", 1)[0]
        path = chapter.solutions / ex.filename
        source = sources[ex.filename] if sources is not None else path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        cells.append(_markdown(_instructions(ast.get_docstring(tree) or ex.id, tag, both), f"{tag}-instructions",
                               ex.id, "instructions"))
        helpers = 0
        for chunk in chunks(source, filename=str(path)):
            stub = make_stub(chunk.text).strip("\n") + "\n"
            if not stub.strip() and not solved:
                continue  # solution-only code (e.g. the reference's own float64 values): no cell of the student's
            name = chunk.name
            # a helper of the solution's own: its name would be a hint (and a leak)
            if chunk.role == "stub" and name not in stub:
                helpers += 1
                name = f"helper{helpers}" if helpers > 1 else "helper"
            cells.append(_code(solution_code(chunk.text) if solved else stub, f"{tag}-{name}", ex.id, chunk.role))
        cells.append(_code(f'check("{tag}")\n', f"{tag}-check", ex.id, "check"))
    cells.append(_markdown(both("notebook.md_all"), f"{chapter.id}-all", None, "instructions"))
    cells.append(_code("check()\n", f"{chapter.id}-check", None, "check"))
    nb.cells = cells
    for cell in cells:
        cell.source = cell.source.rstrip("\n")
    nbformat.validate(nb)
    return nb


def _metadata(exercise: str | None, role: str) -> dict:
    meta: dict = {"grader": {"role": role, **({"exercise": exercise} if exercise else {})}}
    if role in ("setup", "provided", "check"):
        meta.update(LOCKED, tags=[role])
    return meta


def _code(source: str, cell_id: str, exercise: str | None, role: str):
    import nbformat

    return nbformat.v4.new_code_cell(source, id=_cell_id(cell_id), metadata=_metadata(exercise, role))


def _markdown(source: str, cell_id: str, exercise: str | None, role: str):
    import nbformat

    return nbformat.v4.new_markdown_cell(source, id=_cell_id(cell_id), metadata=_metadata(exercise, role))


def _cell_id(text: str) -> str:
    """A cell id nbformat accepts: letters, digits, ``-`` and ``_``, at most 64 characters."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", text)[:64]


def _instructions(doc: str, tag: str, both) -> str:
    """An exercise's module docstring as Markdown: its first lines as the heading, the
    ``中文：`` and ``English:`` labels in bold, the command-line line replaced by the check cell's."""
    lines = doc.splitlines()
    head = [f"## {lines[0]}"] if lines else []
    rest = lines[1:]
    if rest and rest[0].strip():
        head.append(f"**{rest.pop(0).strip()}**")
    rest = [line for line in rest if not _RUN_LINE.match(line)]
    indent = min((len(line) - len(line.lstrip()) for line in rest if line[:1].isspace() and line.strip()), default=0)
    body = []
    for line in rest:
        line = line[indent:] if line[:indent].isspace() else line
        body.append(f"**{line}**" if line.strip() in ("中文：", "English:") else line)
    return "\n".join(head + body).rstrip() + "\n\n" + both("notebook.md_check", tag=tag) + "\n"


def text_of(nb) -> str:
    """The notebook as written to its file."""
    import nbformat

    return nbformat.writes(nb) + "\n"


def missing_solutions(chapter: Chapter) -> list[Path]:
    """The solution modules of the chapter's exercises that are not there: without them
    there is no notebook to generate (the stubs of the others still are)."""
    return [chapter.solutions / ex.filename for ex in chapter.exercises
            if not (chapter.solutions / ex.filename).is_file()]


def planned(chapter: Chapter) -> Generated:
    """The chapter's notebook as a generated file: what it should hold, and what the
    solutions committed at git HEAD generate (an old notebook, replaced without asking).
    Every exercise's solution module must be there (:func:`missing_solutions`)."""

    def old() -> str | None:
        sources = {}
        for ex in chapter.exercises:
            committed = committed_text(chapter.solutions / ex.filename)
            if committed is None:
                return None
            sources[ex.filename] = committed
        try:
            return text_of(build(chapter, sources=sources))
        except (StubFormatError, SyntaxError):
            return None

    return Generated(notebook_path(chapter), text_of(build(chapter)), old)

