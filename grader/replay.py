"""What of a notebook each exercise replays: the statements its graded names need.

A notebook is not a module. A tutorial's cells plot, time, assert the device they ran
on and call APIs of another JAX version; they ran in the student's kernel and mean
nothing to the chapter's functions. So an exercise's process does not replay every
cell: it replays the top-level statements its graded names need, found as a compiler
finds live code, backwards from the end (a *slice* of the program):

* the roots are the names the exercise's checks call (its functions and the provided
  code of its stub);
* a statement is kept when it binds a name still needed, or changes the object a
  needed name holds (``cache[k] = v``, ``params.append(w)``, ``obj.attr = 1``); a
  module imported is not such an object: ``jax.config.update(...)`` or
  ``np.random.seed(0)`` are not replayed;
* a kept statement makes the names it reads needed: those its own expressions read
  and those its functions and classes read from the module when called (Python's
  :mod:`symtable` tells a function's globals from its locals);
* a name bound unconditionally (an assignment, a ``def``, an import) is no longer
  needed above that statement, unless the statement reads it too (``x = x + 1``);
* an import is kept alias by alias: ``import jax, seaborn as sns`` replays ``import
  jax`` alone when nothing needs ``sns``; ``import a.b`` (which loads a submodule) is
  kept whenever ``a`` is read by what is kept.

Every exercise's module keeps the notebook's line layout (the statements not kept
are blank lines), so a line number still names the student's cell and line
(:class:`grader.cell_map.CellMap`). The child runs such a module statement by statement
(:func:`grader.child.job.import_notebook`): a statement that raises there, though it
ran in the kernel, is skipped and said, and costs nothing else.
"""
from __future__ import annotations

import ast
import re
import symtable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from grader.i18n import T, Text, Words
from grader.cell_map import CellMap
from grader.cell_names import defined_in_cell
from grader.ipynb import Cell, module_of

if TYPE_CHECKING:
    from grader.results import ExerciseResult


@dataclass(frozen=True)
class Unit:
    """One top-level statement of the notebook's module (or several that share a line)."""

    #: its first line in the module (1-based, its decorators included)
    first: int
    #: its last line in the module
    last: int
    #: the names it binds at the module's top level
    binds: frozenset[str]
    #: the names it binds whatever happens (not inside an ``if``, a loop or a ``try``)
    kills: frozenset[str]
    #: the module's names it reads, its functions' and classes' bodies included
    uses: frozenset[str]
    #: names whose objects it may change (a store into ``x[...]``/``x.attr``, a method call on ``x``)
    touches: frozenset[str]
    #: an import's aliases, each with the name it binds and whether it only loads a
    #: submodule of that name (``import a.b``); empty for other statements
    aliases: tuple[tuple[str, ast.alias, bool], ...] = ()
    #: the import statement itself, to write again with the aliases kept
    node: ast.stmt | None = None
    #: a ``from m import *``: it may bind anything
    star: bool = False
    #: the module's names its functions' bodies read: looked up when they are called, so the binding they
    #: see is the module's last (a helper defined in a later cell, or defined again there)
    later: frozenset[str] = frozenset()


@dataclass
class Replay:
    """A notebook's module (:func:`grader.ipynb.module_of`) read as :class:`Unit` objects."""

    #: the whole module, every graded cell
    source: str
    #: its top-level statements, in order
    units: list[Unit] = field(default_factory=list)

    @classmethod
    def of(cls, source: str) -> "Replay":
        tree = ast.parse(source)
        lines = source.split("\n")
        groups: list[list[ast.stmt]] = []
        spans: list[list[int]] = []
        for node in tree.body:
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
            last = node.end_lineno or node.lineno
            if spans and first <= spans[-1][1]:  # on a line of the statement before (``a = 1; b = 2``)
                groups[-1].append(node)
                spans[-1][1] = max(spans[-1][1], last)
            else:
                groups.append([node])
                spans.append([first, last])
        replay = cls(source)
        imported = _imported_only(tree)
        writers: dict[str, set[str]] = {}  # a function -> the globals it assigns (``global g; g = x``)
        for nodes, (first, last) in zip(groups, spans):
            unit, writes = _unit(nodes, first, last, "\n".join(lines[first - 1:last]), imported)
            replay.units.append(unit)
            writers.update(writes)
        for index, unit in enumerate(replay.units):  # a statement that calls such a function changes them
            changed = set().union(*(writers[name] for name in unit.uses if name in writers))
            if changed - unit.touches:
                replay.units[index] = replace(unit, touches=unit.touches | frozenset(changed))
        return replay

    def defined(self) -> set[str]:
        """Every name the notebook's module binds."""
        return {name for unit in self.units for name in unit.binds}

    def last_binding(self, name: str) -> int | None:
        """The first line of the last statement that binds ``name``, or ``None``."""
        return next((u.first for u in reversed(self.units) if name in u.binds), None)

    def needed(self, roots: set[str]) -> dict[int, frozenset[str] | None]:
        """The units that ``roots`` need, by index: ``None`` for a whole statement, the
        names to keep for an import kept in part.

        As the kernel ran them: a function's body reads its globals when it is called, after the
        notebook's cells (the grading's calls), so the names the kept functions' bodies read are needed
        from the end too, as roots, until no new one comes (a fixed point)."""
        roots = set(roots)
        while True:
            kept = self._needed_once(roots)
            later = set().union(*(self.units[index].later for index, names in kept.items() if names is None))
            if later <= roots:
                return kept
            roots |= later

    def _needed_once(self, roots: set[str]) -> dict[int, frozenset[str] | None]:
        needed = set(roots)
        kept: dict[int, frozenset[str] | None] = {}
        read: set[str] = set()
        for index in range(len(self.units) - 1, -1, -1):
            unit = self.units[index]
            if unit.aliases:
                names = frozenset(name for name, _, submodule in unit.aliases if name in needed and not submodule)
                if names:
                    kept[index] = names
                    needed -= names
                continue
            if unit.star and needed or (unit.binds | unit.touches) & needed:
                kept[index] = None
                needed -= unit.kills
                needed |= unit.uses
                read |= unit.uses
        read |= set(roots)
        for index, unit in enumerate(self.units):  # ``import a.b``: a submodule of a module read
            submodules = frozenset(name for name, _, submodule in unit.aliases if submodule and name in read)
            if submodules:
                kept[index] = (kept.get(index) or frozenset()) | submodules
        return kept

    def module_for(self, roots: set[str]) -> str:
        """The module an exercise whose checks call ``roots`` imports: the statements they
        need, every other line blank (the line layout is the notebook's)."""
        lines = self.source.split("\n")
        kept = self.needed(roots)
        for index, unit in enumerate(self.units):
            span = range(unit.first - 1, unit.last)
            if index not in kept:
                for i in span:
                    lines[i] = ""
            elif (wanted := kept[index]) is not None and len(wanted) < len(unit.aliases):
                names = [alias for name, alias, _ in unit.aliases if name in wanted]
                node = unit.node
                statement = ast.ImportFrom(module=node.module, names=names, level=node.level) \
                    if isinstance(node, ast.ImportFrom) else ast.Import(names=names)
                for i in span:
                    lines[i] = ""
                lines[unit.first - 1] = ast.unparse(statement)
        return "\n".join(lines)

    def kept_lines(self, roots: set[str]) -> set[int]:
        """The module's lines (1-based) of the statements ``roots`` need."""
        return {line for index in self.needed(roots) for line in
                range(self.units[index].first, self.units[index].last + 1)}


@dataclass
class NotebookModules:
    """A notebook's graded cells made into one module per exercise (:func:`notebook_modules`)."""

    #: the whole module, every graded cell (what the integrity scan reads)
    source: str
    #: its lines back to the cells (the same for every exercise's module)
    cells: CellMap
    #: by exercise id: the module its process imports
    modules: dict[str, str]
    #: exercises none of whose functions any cell defines (not even one that failed): not attempted
    untouched: set[str]
    #: by graded function: the cell of its last definition (its number)
    defined_in: dict[str, int]
    #: the numbers of the graded cells some exercise replays
    replayed: list[int]
    #: the numbers of the graded cells no exercise replays (nothing graded needs them)
    not_replayed: list[int]


def notebook_modules(cells: list[Cell], name: str, *, history: bool, functions: dict[str, tuple[str, ...]],
                     provided: dict[str, Path] | None = None) -> NotebookModules:
    """Each exercise's module: the statements of ``cells`` (read by :mod:`grader.ipynb`) that the
    names its checks call need: ``functions``, the names each exercise (by id) asks the student
    to write, and the names its stub (``provided``, by id) defines, its provided code. ``name`` is
    the notebook's file name, ``history`` whether the cells are a kernel's runs."""
    roots = {ex: set(names) for ex, names in functions.items()}
    for ex, stub in (provided or {}).items():
        try:
            roots.setdefault(ex, set()).update(defined_in_cell(stub.read_text(encoding="utf-8")))
        except OSError:  # no stub: the functions alone
            pass
    source, cell_map = module_of(cells, name, history=history)
    written = {n for cell in cells if getattr(cell.not_run, "key", "") != "notebook.never_run"
               for n in defined_in_cell(cell.source)}  # run, even if it failed; a cell never run is not
    untouched = {ex for ex, names in functions.items() if not written & set(names)}
    try:
        replay = Replay.of(source)
    except (SyntaxError, ValueError):  # graded cells that parse one by one but not together: as they are
        return NotebookModules(source, cell_map, {ex: source for ex in roots}, untouched, {}, [], [])
    modules = {ex: replay.module_for(names) for ex, names in roots.items() if ex not in untouched}
    lines = set().union(*(replay.kept_lines(names) for ex, names in roots.items() if ex not in untouched))
    # in the order on the page (a cell never run sorts first in run order); a cell with no code is no cell to replay
    graded = sorted(cell.number for cell in cells if cell.graded and _has_code(cell.code))
    kept = {place[0] for line in lines for place in [cell_map.cell_of(line)] if place}
    defined_in = {}
    for function in {f for names in functions.values() for f in names}:
        line = replay.last_binding(function)
        place = cell_map.cell_of(line) if line else None
        if place:
            defined_in[function] = place[0]
    return NotebookModules(source, cell_map, modules, untouched, defined_in,
                           [n for n in graded if n in kept], [n for n in graded if n not in kept])


def name_cells(result: ExerciseResult, defined_in: dict[str, int], cells: CellMap,
               lost: dict[str, tuple[Text, Text]] | None = None) -> None:
    """Each failed check of ``result`` (an :class:`~grader.results.ExerciseResult`) whose
    message names no cell says which cell defined the graded functions it is about: those its
    message names, else the one its id starts with (``piecewise.values``). A function whose later
    definition is in a cell not graded (``lost``: name -> that cell, why) says so, and the check's
    hint becomes fixing that cell: the code the student last wrote was never graded."""
    lost = lost or {}
    for check in result.checks:
        if check.status != "failed" or _has_place(check.message):
            continue
        words: list[str] = []
        _words(check.message, words)
        named = [w for w in dict.fromkeys(words) if w in defined_in] or \
            [w for w in check.id.split(".")[:1] if w in defined_in]
        if named:
            check.message = T("notebook.in_cell", message=check.message, where=[
                T("notebook.defined_at_lost", name=n, cell=cells.label(defined_in[n]), lost=lost[n][0],
                  why=lost[n][1]) if n in lost else
                T("notebook.defined_at", name=n, cell=cells.label(defined_in[n])) for n in named])
            gone = [n for n in named if n in lost]
            if gone:
                check.hint = T("notebook.fix_lost", lost=lost[gone[0]][0], name=gone[0],
                               cell=cells.label(defined_in[gone[0]]))
                check.hint_id = "notebook.fix_lost"


def _has_code(code: str) -> bool:
    """Whether a cell's graded code has a statement (not only blank lines and comments)."""
    return any(line.strip() and not line.lstrip().startswith("#") for line in code.splitlines())


def _has_place(message: Words) -> bool:
    """Whether a message already names a cell (or says a name is missing)."""
    if isinstance(message, list):
        return any(_has_place(m) for m in message)
    if isinstance(message, Text):
        return message.key in ("notebook.at", "call.missing") or any(_has_place(v) for v in message.args.values())
    return False


def _words(message: Words, out: list[str]) -> None:
    """The identifiers in a message's arguments, in order."""
    if isinstance(message, list):
        for item in message:
            _words(item, out)
    elif isinstance(message, Text):
        for value in message.args.values():
            _words(value, out)
    elif isinstance(message, str):
        out += re.findall(r"[A-Za-z_]\w*", message)


# ------------------------------------------------------------------ one statement
def _unit(nodes: list[ast.stmt], first: int, last: int, text: str,
          imported: set[str]) -> tuple[Unit, dict[str, set[str]]]:
    """The statement(s) ``nodes`` (``text``, lines ``first`` to ``last``) as a unit, and the globals
    each function it defines assigns when called."""
    binds, uses, writes, later = _names(text, nodes)
    kills: set[str] = set()
    touches: set[str] = set()
    aliases: list[tuple[str, ast.alias, bool]] = []
    star = False
    for node in nodes:
        kills |= _kills(node)
        touches |= _touches(node) - imported
        if isinstance(node, (ast.Import, ast.ImportFrom)) and len(nodes) == 1:
            for alias in node.names:
                if alias.name == "*":
                    star = True
                    continue
                submodule = isinstance(node, ast.Import) and alias.asname is None and "." in alias.name
                aliases.append(((alias.asname or alias.name).split(".")[0], alias, submodule))
    if star:  # kept whole, when anything is still needed
        aliases = []
    return Unit(first, last, frozenset(binds), frozenset(kills), frozenset(uses), frozenset(touches),
                tuple(aliases), nodes[0] if aliases else None, star, frozenset(later)), writes


#: the scopes the symbol table gives a comprehension: run where they are written, not when called
_RUN_AT_ONCE = {"listcomp", "setcomp", "dictcomp", "genexpr"}


def _names(text: str, nodes: list[ast.stmt]) -> tuple[set[str], set[str], dict[str, set[str]], set[str]]:
    """The names a statement binds at the top level, the module's names it reads (its functions',
    classes' and comprehensions' globals included), for each function it defines the globals
    it assigns (``global g``), and the module's names its functions' bodies read (when called), from
    Python's own symbol table."""
    try:
        table = symtable.symtable(text, "<cell>", "exec")
    except (SyntaxError, ValueError):  # a construct the symbol table refuses: every name is a guess
        names = {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}
        return {n.id for node in nodes for n in ast.walk(node)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}, names, {}, set()
    binds = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    uses = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    writes: dict[str, set[str]] = {}
    later: set[str] = set()
    pending = [(scope, scope.get_name(), False) for scope in table.get_children()]
    while pending:
        scope, top, deferred = pending.pop()
        deferred = deferred or (scope.get_type() == "function" and scope.get_name() not in _RUN_AT_ONCE)
        read = {s.get_name() for s in scope.get_symbols() if s.is_global() and s.is_referenced()}
        uses |= read
        if deferred:
            later |= read
        assigned = {s.get_name() for s in scope.get_symbols() if s.is_declared_global() and s.is_assigned()}
        if assigned:
            writes.setdefault(top, set()).update(assigned)
        pending += [(child, top, deferred) for child in scope.get_children()]
    return binds, uses, writes, later


def _kills(node: ast.stmt) -> set[str]:
    """The names ``node`` binds whatever happens: before it they are no longer needed."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {n.id for target in node.targets for n in _plain_targets(target)}
    if isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, ast.Import):
        return {(a.asname or a.name) for a in node.names if a.asname or "." not in a.name}
    if isinstance(node, ast.ImportFrom):
        return {(a.asname or a.name) for a in node.names if a.name != "*"}
    return set()


def _plain_targets(target: ast.expr) -> list[ast.Name]:
    """The names an assignment target binds (through tuples and ``*rest``), not ``x[i]`` or ``x.a``."""
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, ast.Starred):
        return _plain_targets(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for element in target.elts for n in _plain_targets(element)]
    return []


def _touches(node: ast.stmt) -> set[str]:
    """Names whose objects the statement may change: a store into ``x[...]`` or ``x.attr`` (or
    ``del`` of one), a method called on ``x`` (``x.append(...)``); function and class bodies are
    not run by the statement and do not count."""
    found: set[str] = set()
    pending: list[ast.AST] = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = current.targets if isinstance(current, (ast.Assign, ast.Delete)) else [current.target]
            found |= {root for t in targets if isinstance(t, (ast.Attribute, ast.Subscript))
                      for root in [_receiver(t)] if root}
        if isinstance(current, ast.Call) and isinstance(current.func, ast.Attribute):
            root = _receiver(current.func.value)
            if root:
                found.add(root)
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                pending.append(child)
    return found


def _receiver(node: ast.expr) -> str | None:
    """``x`` of ``x``, ``x.a.b`` or ``x[i].a``; ``None`` when the chain passes through a call
    (``f(x).block_until_ready()`` changes nothing of ``f``'s)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _imported_only(tree: ast.Module) -> set[str]:
    """Names the module binds only by importing: modules, whose methods change nothing the
    chapter's functions keep (``jnp.arange(3)``, ``jax.config.update(...)``)."""
    by_import: set[str] = set()
    otherwise: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            by_import |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            otherwise.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            otherwise.add(node.name)
    return by_import - otherwise
