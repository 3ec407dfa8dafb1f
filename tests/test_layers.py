"""The grader's modules import one way: down its layers, never in a circle.

The order is written once, here (:data:`LAYERS`), from the foundations up. A module
may import its own layer's modules and any lower layer's; an import of a higher layer,
and any circle of imports (even within a layer, even inside a function), fails the
test, which names the modules. Every module of ``grader/`` must be placed in a layer, so
a new module is placed on purpose. The imports are the code's own, read from its
syntax tree: every ``import`` and ``from ... import`` statement, wherever it stands,
those under ``if TYPE_CHECKING:`` too (a type named in annotations only is never imported
when the grader runs, but an arrow up for types is still a lower layer that knows a higher
one): where a lower layer needs a higher one's object, it names what it uses of it as a
``Protocol`` of its own (``grader.primitives.driving``: the jobs and sides a timing driver
drives; ``checks.ExerciseSettings``), which the higher class satisfies as it is.
"""
from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

GRADER = Path(__file__).resolve().parent.parent / "grader"

#: the layers, lowest first: (what the layer is, its modules); an exact name wins over a pattern
LAYERS: list[tuple[str, list[str]]] = [
    ("foundations: no import of the grader's own but another foundation (grader.safetext: text made safe per format); "
     "the packages' own __init__, which run before any of their modules", [
        "grader", "grader.protocol", "grader.word_fields", "grader.wire", "grader.store", "grader.service_folder",
        "grader.bytecode",
        "grader.signing", "grader.safetext", "grader.affinity", "grader.interrupts",
        "grader.ziptools", "grader.platform_names", "grader.magics", "grader.trusted", "grader.module_bytes",
        "grader.chapters", "grader.child", "grader.primitives", "grader.runner", "grader.report", "grader.batch",
        "grader.authoring"]),
    ("words: messages in two languages, and the TOML they are kept in", ["grader.i18n"]),
    ("what a grading's results are made of: checks' vocabulary, the report's data, a notebook's cells", [
        "grader.checks", "grader.results", "grader.integrity", "grader.ipynb", "grader.cell_names", "grader.cell_map",
        "grader.cell_notes", "grader.replay"]),
    ("instruments: what the probes measure with and the checks judge with", ["grader.primitives.*"]),
    ("the child: what runs in the sandbox", ["grader.child.*"]),
    ("chapters: exercises, their probes and checks, and the chapter that holds them", [
        "grader.chapters.*", "grader.exercise_package", "grader.exercise_folder", "grader.chapter"]),
    ("processes: the grader's handles on hosts and jobs, the outcomes they give, the seeds drawn ahead for them", [
        "grader.runner.*", "grader.outcomes", "grader.ahead"]),
    ("one grading: a submission read, both sides run, verdicts, in order", [
        "grader.copies", "grader.submission", "grader.submission_limits", "grader.unzipping", "grader.chapter_contents",
        "grader.verdicts", "grader.preview", "grader.reference_source", "grader.sides", "grader.scheduling",
        "grader.grading", "grader.options"]),
    ("what people see and how they study: reports, hints, watch mode, the notebook's check()", [
        "grader.report.*", "grader.hint_layers", "grader.watch", "grader.notebook"]),
    ("many gradings and releases: a class, Gradescope, course authoring, a class's similar submissions", [
        "grader.batch.*", "grader.gradescope", "grader.authoring.*", "grader.similarity", "grader.similarity.*"]),
    ("the command line", ["grader.cli", "grader.cli.*", "grader.__main__"]),
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in GRADER.rglob("*.py"):
        parts = path.relative_to(GRADER.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _for_types_only(tree: ast.AST) -> set[int]:
    """The ids of the statements under ``if TYPE_CHECKING:`` (never run)."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (getattr(node.test, "id", None) == "TYPE_CHECKING"
                                         or getattr(node.test, "attr", None) == "TYPE_CHECKING"):
            hidden.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return hidden


def _imports(name: str, path: Path, source: str | None = None) -> set[str]:
    """The grader's modules that ``name`` imports, anywhere in it (not for types only)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    tree = ast.parse(source if source is not None else path.read_text(encoding="utf-8"))
    types_only = _for_types_only(tree)
    for node in ast.walk(tree):
        if id(node) in types_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            # "from pkg import mod" imports the module pkg.mod (and runs pkg's __init__, a lower layer)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target.startswith("grader") and target != name:
                found.add(target)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def layer_of(name: str) -> int | None:
    for index, (_, members) in enumerate(LAYERS):
        if name in members:
            return index
    matches = [(len(pattern), index) for index, (_, members) in enumerate(LAYERS) for pattern in members
               if "*" in pattern and fnmatch.fnmatchcase(name, pattern)]
    return max(matches)[1] if matches else None


def test_every_module_has_a_layer():
    assert sorted(name for name in MODULES if layer_of(name) is None) == []


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a higher layer's module, said in words."""
    return [f"{name} (layer {layer_of(name)}) imports {target} "
            f"(layer {layer_of(target)}: {LAYERS[layer_of(target)][0]})"
            for name, targets in sorted(graph.items()) for target in sorted(targets)
            if layer_of(name) is not None and layer_of(target) is not None and layer_of(target) > layer_of(name)]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle of imports: the strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for target in graph.get(name, ()):
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == name:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def test_every_import_goes_down():
    assert upward_imports(GRAPH) == []


def test_no_circle_of_imports():
    assert circles(GRAPH) == []


def _with_types(name: str, path: Path) -> set[str]:
    return _imports(name, path, path.read_text(encoding="utf-8").replace("if TYPE_CHECKING:", "if True:"))


TYPED_GRAPH = {name: _with_types(name, path) for name, path in MODULES.items()}


def test_no_arrow_up_even_for_types():
    """An import under ``if TYPE_CHECKING:`` counts too: the structure review of 2026-12-05 counted 4 circles and
    8 arrows up made of them (comparison and timing naming JobSession and Sides, checks naming ExerciseSpec,
    host_handles naming ClassCompiler, preview naming GradeOptions)."""
    assert upward_imports(TYPED_GRAPH) == []


def test_no_circle_even_for_types():
    assert circles(TYPED_GRAPH) == []


def test_the_checks_see_an_upward_import_and_a_circle():
    """The two checks above can fail: the real graph with the foundations importing the command line
    has an upward import, and a circle through the whole grader."""
    broken = {name: set(targets) for name, targets in GRAPH.items()}
    broken["grader.wire"].add("grader.cli")
    assert any(line.startswith("grader.wire (layer 0) imports grader.cli") for line in upward_imports(broken))
    assert any({"grader.wire", "grader.cli"} <= set(c) for c in circles(broken))




def packages_split(graph_modules) -> dict[str, dict[int, list[str]]]:
    """Each package (``grader.X``) whose modules are in more than one layer: by layer, its modules. A
    package's ``__init__`` may sit lower (it runs before any of its modules); the grader's top-level
    modules are each their own."""
    layers: dict[str, dict[int, list[str]]] = {}
    for name in sorted(graph_modules):
        parts = name.split(".")
        if len(parts) > 2:
            layers.setdefault(".".join(parts[:2]), {}).setdefault(layer_of(name), []).append(name)
    return {package: by_layer for package, by_layer in layers.items() if len(by_layer) > 1}


def test_no_package_is_split_across_layers():
    """The folders follow the layers: what a package holds is found in one layer (the report's data
    was a layer below the report's renderers, its text widths at the foundations)."""
    assert packages_split(MODULES) == {}


def test_a_split_package_is_seen():
    placed = LAYERS[0][1]
    placed.append("grader.report.textwidth")
    try:
        assert "grader.report" in packages_split(MODULES)
    finally:
        placed.remove("grader.report.textwidth")


def test_an_import_for_types_only_is_not_one_and_any_other_is():
    """An import under ``if TYPE_CHECKING:`` never runs; one in a function, or after such a block, does."""
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from grader.cli import app\n"
              "def f():\n    from grader.grading import grade\nimport grader.i18n\n")
    assert _imports("grader.wire", MODULES["grader.wire"], source) == {"grader.grading", "grader.i18n"}


def test_no_private_name_is_imported_across_modules():
    private = []
    for name, path in sorted(MODULES.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grader"):
                private += [f"{name}: from {node.module} import {alias.name}" for alias in node.names
                            if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert private == []
