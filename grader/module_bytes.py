"""What a submission's module says before it runs, read from its bytes: which encoding it is saved in, and
which of the chapter's functions it answers (:mod:`grader.submission` reads every module so)."""
from __future__ import annotations

import ast
import threading

#: the trees of the modules parsed lately, by their bytes (:func:`parsed`)
_TREES: dict[bytes, ast.Module] = {}
#: how many trees are kept
KEEP_TREES = 64
_lock = threading.Lock()


def parsed(data: bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(data, filename=filename)``, once per content in this process: a grading reads each of the
    submission's modules four or five times (what it answers, its problems, its imports, its use of JAX's
    private API; a folder's copy), and a batch's worker reads modules classmates share. The tree is shared:
    every reader only reads it. What ``ast.parse`` raises is raised each time (a failure is not kept)."""
    with _lock:
        tree = _TREES.get(data)
    if tree is None:
        tree = ast.parse(data, filename=filename)
        with _lock:
            while len(_TREES) >= KEEP_TREES:
                del _TREES[next(iter(_TREES))]
            _TREES[data] = tree
    return tree


def answers_in(data: bytes) -> set[str]:
    """The functions a module defines at its top level with a body of its own (not a stub's ``raise
    NotImplementedError``, ``pass`` or ``...``)."""
    try:
        tree = parsed(data)
    except (SyntaxError, ValueError):
        return set()
    found = set()
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
        stub = all(isinstance(b, ast.Pass) or isinstance(b, ast.Raise) and "NotImplementedError" in ast.dump(b)
                   for b in body)
        if body and not stub:
            found.add(node.name)
    return found


def not_utf8_at(data: bytes) -> dict | None:
    """Where a module that declares no other encoding (PEP 263) holds bytes UTF-8 cannot read: ``{line,
    guess}``, ``guess`` naming the encoding it reads as (GBK/GB18030: a Chinese Windows editor's default;
    UTF-16: Notepad's "Unicode"), else ``None``."""
    import re

    for head in data.split(b"\n", 2)[:2]:  # PEP 263: a coding declaration on the first two lines
        declared = re.match(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", head)
        if declared:
            if declared.group(1).lower().replace(b"_", b"-") not in (b"utf-8", b"utf8", b"utf-8-sig"):
                return None  # another encoding, declared: Python reads it so
            break
    try:
        data.decode("utf-8")
        return None
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
    guess = ""
    for name, shown in (("utf-16", "UTF-16"), ("gb18030", "GBK (GB18030)"), ("big5", "Big5"),
                        ("cp1252", "Windows-1252")):
        if name == "utf-16" and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
            continue
        try:
            data.decode(name)
        except UnicodeDecodeError:
            continue
        guess = shown
        break
    return {"line": line, "guess": guess or "?"}
