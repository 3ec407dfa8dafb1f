"""The integrity scan: what in a submission an instructor should look at, and what its
author should know.

It reads the source (it never runs it) and lists, under ``integrity`` in the report,
what could touch the grader (its files, its processes, the interpreter, the network):
imports the contract does not allow (``os``, ``sys``, ``ctypes``, ``gc``, ``inspect``,
...; the allowed ones are the chapter's ``allowed_imports``, from its contract);
assignments that patch ``jax``, ``numpy``, ``time``, ``builtins`` or the grader;
changes to JAX's configuration and compile caches, and its compile listeners
(``monitoring``); introspection that reaches other code's frames and globals; dynamic
code (``exec``, ``eval``, ``__import__``); file access; and any mention of the
grader's report files. These are warnings for a person, not verdicts: the checks
themselves never depend on the student's process telling the truth.

JAX's private API (``jax._src``) touches none of that: it is a note for the student
(:func:`student_notes`, in the exercise that uses it), not a warning for the instructor.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable, Collection, Protocol, Sequence

from grader.i18n import T, Text
from grader.module_bytes import parsed


class GradedFile(Protocol):
    """An exercise as the notes read it (:class:`grader.exercise_folder.ExerciseSpec` is one)."""

    id: str
    #: the student module's file name
    filename: str
    #: the functions it grades
    functions: tuple[str, ...]

#: JAX's private API: a note for the student, not a warning
PRIVATE_JAX = "jax._src"
PATCHABLE = {"jax", "jnp", "np", "numpy", "time", "builtins", "grader", "lax", "statistics", "functools",
             "math", "sys", "os"}
SUSPICIOUS_CALLS = {"exec", "eval", "compile", "__import__", "globals", "setattr", "delattr", "breakpoint",
                    "open", "input"}
SUSPICIOUS_ATTRIBUTES = {
    "_getframe", "f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "gi_frame", "cr_frame",
    "__subclasses__", "__globals__", "__builtins__", "__code__", "__closure__", "__dict__", "modules",
    "monitoring", "clear_caches", "__wrapped__", "_cache_size", "_clear_cache",
    "__setattr__", "__delattr__",  # past an object's own rules (the grader's read-only instrument, say)
}
REPORT_WORDS = ("report.json", "report.md", "report.partial", ".grade")


def scan(folder: Path, files: list[str], allowed: Collection[str]) -> list[dict]:
    """Warnings for every Python file of the submission; ``allowed``: the top-level modules the chapter's
    contract allows (``Chapter.allowed_imports``), the files' own siblings besides."""
    found: list[dict] = []
    allowed = set(allowed) | {Path(f).stem for f in files}
    for name in files:
        path = folder / name
        try:
            tree = parsed(path.read_bytes(), filename=name)
        except (SyntaxError, ValueError):
            continue  # reported as the exercise's error
        found.extend(_scan_tree(tree, name, allowed))
    return _dedupe(found)


def _entry(file: str, node: ast.AST, code: str, detail: str, message) -> dict:
    return {"file": file, "line": getattr(node, "lineno", 0), "code": code, "detail": detail, "message": message}


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _scan_tree(tree: ast.AST, file: str, allowed: set[str]) -> list[dict]:
    """What one module's syntax tree does that a submission may not: its imports first (which also say what
    each local name stands for), then every node's assignments, calls, names and strings."""
    found, aliases = _scan_imports(tree, file, allowed)
    module_names = set(aliases) | PATCHABLE
    for node in ast.walk(tree):
        found += _patches(node, file, module_names, aliases)
        if isinstance(node, ast.Call):
            found += _suspicious_call(node, file)
        found += _suspicious_name(node, file)
    return found


def _scan_imports(tree: ast.AST, file: str, allowed: set[str]) -> tuple[list[dict], dict[str, str]]:
    """Imports of a module the contract does not allow, or of JAX's monitoring (the grader's compile
    listener); and each local name bound by an import, with the module it names."""
    found: list[dict] = []
    aliases: dict[str, str] = {}  # local name -> module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                aliases[alias.asname or top] = alias.name if alias.asname else top
                if top not in allowed:
                    found.append(_entry(file, node, "import", alias.name, T("integrity.import", module=alias.name)))
                elif alias.name.endswith(".monitoring"):
                    found.append(_entry(file, node, "attribute", alias.name,
                                        T("integrity.attribute", name=alias.name)))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            top = module.split(".")[0]
            if node.level == 0 and top not in allowed:
                found.append(_entry(file, node, "import", module, T("integrity.import", module=module)))
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
                if alias.name == "monitoring" or module.endswith(".monitoring"):  # the grader's compile listener
                    found.append(_entry(file, node, "attribute", f"{module}.{alias.name}",
                                        T("integrity.attribute", name=f"{module}.{alias.name}")))
    return found, aliases


def _patches(node: ast.AST, file: str, module_names: set[str], aliases: dict[str, str]) -> list[dict]:
    """An assignment to (or deletion of) an attribute or item of a module: patching JAX or the grader."""
    targets: list[ast.expr] = []
    if isinstance(node, (ast.Assign, ast.Delete)):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    found = []
    for target in targets:
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            root = _root_name(target)
            if root in module_names and root not in ("self",):
                module = aliases.get(root, root)
                found.append(_entry(file, node, "patch", _dotted(target) or root,
                                    T("integrity.patch", target=_dotted(target) or root, module=module)))
    return found


#: calls that end, fork or signal processes, run commands or remove files
PROCESS_CALLS = ("os.kill", "os._exit", "os.system", "os.fork", "sys.exit", "os.remove", "os.unlink",
                 "shutil.rmtree", "os.getppid", "signal.signal", "subprocess.run", "subprocess.Popen")


def _suspicious_call(node: ast.Call, file: str) -> list[dict]:
    """A call of a suspicious built-in (``open``, ``exec``, ...), of JAX's configuration, or of
    :data:`PROCESS_CALLS`."""
    fn = node.func
    name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
    dotted = _dotted(fn)
    if isinstance(fn, ast.Name) and name in SUSPICIOUS_CALLS:
        code = "file" if name == "open" else "call"
        message = T("integrity.file", name=name) if name == "open" else T("integrity.call", name=name)
        return [_entry(file, node, code, name, message)]
    if dotted.endswith(("config.update", "disable_jit", "config.parse_flags_with_absl")):
        return [_entry(file, node, "config", dotted, T("integrity.call", name=dotted))]
    if dotted in PROCESS_CALLS:
        return [_entry(file, node, "call", dotted, T("integrity.call", name=dotted))]
    return []


def _suspicious_name(node: ast.AST, file: str) -> list[dict]:
    """A suspicious attribute, ``__builtins__`` or ``__import__``, or a string naming the report's files."""
    if isinstance(node, ast.Attribute) and node.attr in SUSPICIOUS_ATTRIBUTES:
        return [_entry(file, node, "attribute", _dotted(node) or node.attr,
                       T("integrity.attribute", name=_dotted(node) or node.attr))]
    if isinstance(node, ast.Name) and node.id in ("__builtins__", "__import__"):
        return [_entry(file, node, "attribute", node.id, T("integrity.attribute", name=node.id))]
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and any(w in node.value for w in REPORT_WORDS):
        return [_entry(file, node, "report", node.value[:60], T("integrity.file", name=repr(node.value[:60])))]
    return []


def _dedupe(found: list[dict]) -> list[dict]:
    seen, out = set(), []
    for item in sorted(found, key=lambda i: (i["file"], i["line"], i["code"], i["detail"])):
        key = (item["file"], item["line"], item["code"], item["detail"])
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


# ------------------------------------------------------------------ notes for the student
def private_jax_uses(tree: ast.AST) -> list[tuple[int, str, set[str]]]:
    """Every use of JAX's private API: (line, what it names, the top-level functions it
    belongs to). An import belongs to the functions that use a name it binds; a use inside
    a top-level function (or a class's method) belongs to that function."""
    aliases = _module_aliases(tree)
    owners = _top_level_owners(tree)
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    uses: list[tuple[int, str, set[str]]] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _private(alias.name):
                    name = alias.asname or alias.name.split(".")[0]
                    uses.append((line, alias.name, _users(tree, {name}) if alias.asname else owners(line)))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _private(node.module or ""):
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            bound = {alias.asname or alias.name for alias in node.names}
            uses.append((line, ", ".join(names), _users(tree, bound) | owners(line)))
        elif isinstance(node, ast.Attribute) and id(node) not in inner:  # a whole chain, a.b.c, once
            parts = _dotted(node).split(".")  # (a name imported from jax._src is noted at its import)
            if "_src" in parts and _private(".".join([aliases.get(parts[0], parts[0]), *parts[1:]])):
                uses.append((line, ".".join(parts), owners(line)))
    return uses


def student_notes(folder: Path, files: list[str], exercises: Sequence[GradedFile],
                  locate: Callable[[str], str | Text], *,
                  notebook: bool = False) -> dict[str, list[Text]]:
    """Notes for the student by exercise id: where the code uses JAX's private API.

    ``exercises``: the chapter's (``id``, ``filename``, ``functions``). A use belongs to the
    exercises whose graded functions reach it (directly or through helpers of the same
    module); in a folder, a use no graded function reaches belongs to its file's exercise.
    """
    notes: dict[str, list[Text]] = {}
    for name in files:
        try:
            tree = parsed((folder / name).read_bytes(), filename=name)
        except (SyntaxError, ValueError, OSError):
            continue
        mine = [ex for ex in exercises if notebook or ex.filename == name]
        reach = _reach(tree)
        for line, what, owners in sorted(private_jax_uses(tree), key=lambda use: use[:2]):
            ids = [ex.id for ex in mine if any(owners & reach.get(f, {f}) for f in ex.functions)]
            if not ids and not notebook:
                ids = [ex.id for ex in mine]
            for ex_id in ids:
                text = T("note.private_jax", where=locate(f"{name}:{line}"), name=what)
                if text not in notes.setdefault(ex_id, []):
                    notes[ex_id].append(text)
    return notes


def _private(module: str) -> bool:
    return module == PRIVATE_JAX or module.startswith(PRIVATE_JAX + ".")


def _module_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> the module it names, for the module's imports of JAX."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname \
                    else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _top_level_owners(tree: ast.AST) -> Callable[[int], set[str]]:
    """The top-level functions (and classes) whose lines hold a given line."""
    spans = [(node.name, node.lineno, getattr(node, "end_lineno", node.lineno)) for node in getattr(tree, "body", [])
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return lambda line: {name for name, first, last in spans if first <= line <= last}


def _users(tree: ast.AST, names: set[str]) -> set[str]:
    """The top-level functions and classes that name one of ``names``."""
    return {node.name for node in getattr(tree, "body", [])
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))}


def _reach(tree: ast.AST) -> dict[str, set[str]]:
    """Each top-level function or class: itself and the top-level ones it names, transitively."""
    defs = {node.name: node for node in getattr(tree, "body", [])
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    direct = {name: {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in defs}
              for name, node in defs.items()}
    reach: dict[str, set[str]] = {}
    for name in defs:
        seen, todo = {name}, [name]
        while todo:
            for other in direct[todo.pop()] - seen:
                seen.add(other)
                todo.append(other)
        reach[name] = seen
    return reach
