"""The integrity scan: what in a submission an instructor should look at.

It reads the source (it never runs it) and lists, under ``integrity`` in the report:
imports no exercise needs (``os``, ``sys``, ``ctypes``, ``gc``, ``inspect``, ...);
assignments that patch ``jax``, ``numpy``, ``time``, ``builtins`` or the grader;
changes to JAX's configuration; introspection that reaches other code's frames and
globals; dynamic code (``exec``, ``eval``, ``__import__``); file access; and any
mention of the grader's report files. These are warnings for a person, not verdicts:
the checks themselves never depend on the student's process telling the truth.
"""
from __future__ import annotations

import ast
from pathlib import Path

from grader.i18n import T

ALLOWED_IMPORTS = {
    "jax", "jaxlib", "numpy", "math", "functools", "itertools", "collections", "statistics", "time",
    "typing", "dataclasses", "__future__",
}
PATCHABLE = {"jax", "jnp", "np", "numpy", "time", "builtins", "grader", "lax", "statistics", "functools",
             "math", "sys", "os"}
SUSPICIOUS_CALLS = {"exec", "eval", "compile", "__import__", "globals", "setattr", "delattr", "breakpoint",
                    "open", "input"}
SUSPICIOUS_ATTRIBUTES = {
    "_getframe", "f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "gi_frame", "cr_frame",
    "__subclasses__", "__globals__", "__builtins__", "__code__", "__closure__", "__dict__", "modules",
    "monitoring", "clear_caches", "_src", "__wrapped__", "_cache_size", "_clear_cache",
}
REPORT_WORDS = ("report.json", "report.md", "report.partial", ".grade")


def scan(folder: Path, files: list[str]) -> list[dict]:
    """Warnings for every Python file of the submission."""
    found: list[dict] = []
    siblings = {Path(f).stem for f in files}
    for name in files:
        path = folder / name
        try:
            tree = ast.parse(path.read_bytes(), filename=name)
        except (SyntaxError, ValueError):
            continue  # reported as the exercise's error
        found.extend(_scan_tree(tree, name, siblings))
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


def _scan_tree(tree: ast.AST, file: str, siblings: set[str]) -> list[dict]:
    found: list[dict] = []
    aliases: dict[str, str] = {}  # local name -> module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                aliases[alias.asname or top] = alias.name if alias.asname else top
                if top not in ALLOWED_IMPORTS and top not in siblings:
                    found.append(_entry(file, node, "import", alias.name, T("integrity.import", module=alias.name)))
                elif alias.name.startswith("jax._src") or alias.name.endswith(".monitoring"):
                    found.append(_entry(file, node, "attribute", alias.name,
                                        T("integrity.attribute", name=alias.name)))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            top = module.split(".")[0]
            if node.level == 0 and top not in ALLOWED_IMPORTS and top not in siblings:
                found.append(_entry(file, node, "import", module, T("integrity.import", module=module)))
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
                if module.startswith("jax._src") or alias.name in ("monitoring",):
                    found.append(_entry(file, node, "attribute", f"{module}.{alias.name}",
                                        T("integrity.attribute", name=f"{module}.{alias.name}")))
    module_names = set(aliases) | PATCHABLE
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in targets:
            if isinstance(target, (ast.Attribute, ast.Subscript)):
                root = _root_name(target)
                if root in module_names and root not in ("self",):
                    module = aliases.get(root, root)
                    found.append(_entry(file, node, "patch", _dotted(target) or root,
                                        T("integrity.patch", target=_dotted(target) or root, module=module)))
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
            dotted = _dotted(fn)
            if isinstance(fn, ast.Name) and name in SUSPICIOUS_CALLS:
                code = "file" if name == "open" else "call"
                message = T("integrity.file", name=name) if name == "open" else T("integrity.call", name=name)
                found.append(_entry(file, node, code, name, message))
            elif dotted.endswith(("config.update", "disable_jit", "config.parse_flags_with_absl")):
                found.append(_entry(file, node, "config", dotted, T("integrity.call", name=dotted)))
            elif dotted in ("os.kill", "os._exit", "os.system", "os.fork", "sys.exit", "os.remove", "os.unlink",
                            "shutil.rmtree", "os.getppid", "signal.signal", "subprocess.run", "subprocess.Popen"):
                found.append(_entry(file, node, "call", dotted, T("integrity.call", name=dotted)))
        if isinstance(node, ast.Attribute) and node.attr in SUSPICIOUS_ATTRIBUTES:
            found.append(_entry(file, node, "attribute", _dotted(node) or node.attr,
                                T("integrity.attribute", name=_dotted(node) or node.attr)))
        if isinstance(node, ast.Name) and node.id in ("__builtins__", "__import__"):
            found.append(_entry(file, node, "attribute", node.id, T("integrity.attribute", name=node.id)))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if any(word in node.value for word in REPORT_WORDS):
                found.append(_entry(file, node, "report", node.value[:60],
                                    T("integrity.file", name=repr(node.value[:60]))))
    return found


def _dedupe(found: list[dict]) -> list[dict]:
    seen, out = set(), []
    for item in sorted(found, key=lambda i: (i["file"], i["line"], i["code"], i["detail"])):
        key = (item["file"], item["line"], item["code"], item["detail"])
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out
