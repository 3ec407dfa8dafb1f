"""A class made for the similarity tests and benchmark: students written independently, pairs copied and
disguised, a pair that shares only the stub (issue 46's test class).

Independent students take their style of each exercise from the corpus of variants (tests/variants/ch4: the
solution and every variant, right or wrong, each a way a student wrote it), assigned so that no two share
their style of more than one exercise (as two students who happened to write one exercise alike). A copy is
another student's files disguised the ways a copier does, each kept a program JAX traces alike:

* ``renamed``: every parameter and local name renamed;
* ``reordered``: in each function, the first two neighbouring statements that do not depend on each other
  swapped;
* ``select``: ``jnp.where(c, a, b)`` whose branches are arrays of one shape written ``jax.lax.select(c, a, b)``;
* ``inlined``: a helper a graded function calls, inlined into it (``softmax_raw`` into ``softmax``, ex02's
  ``_normalize`` into ``normalize_if_positive``).
"""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

from conftest import SOLUTIONS, VARIANTS
from grader.authoring import variants

STUBS = SOLUTIONS.parent.parent / "exercises" / "ch4"
EXERCISES = ("ex01_jit_forms", "ex02_where", "ex03_static_args")


def styles(exercise: str) -> list[tuple[str, str]]:
    """Each way the corpus writes ``exercise``: ``(name, module text)``, the solution first."""
    found = [("solution", (SOLUTIONS / f"{exercise}.py").read_text(encoding="utf-8"))]
    for path in sorted((VARIANTS / exercise).glob("*.py")):
        found.append((path.stem, variants.module_text(path, SOLUTIONS / f"{exercise}.py")))
    return found


def independent(n: int) -> dict[str, dict[str, tuple[str, str]]]:
    """``n`` students' styles, by exercise: ``{student: {exercise: (style, text)}}``, no two students with the
    same style on two exercises (student ``i`` takes style ``i`` of the first exercise, ``i + 7·(i // m)`` of
    the others, ``m`` their number of styles)."""
    corpus = {exercise: styles(exercise) for exercise in EXERCISES}
    students: dict[str, dict[str, tuple[str, str]]] = {}
    for i in range(n):
        chosen = {}
        for j, exercise in enumerate(EXERCISES):
            options = corpus[exercise]
            index = i % len(options) if j == 0 else (i + j * 7 * (i // len(options)) + 3 * j) % len(options)
            chosen[exercise] = options[index]
        students[f"s{i:02d}"] = chosen
    return students


# ------------------------------------------------------------------ disguises
class _Renamer(ast.NodeTransformer):
    """Every function's parameters and the names it assigns, renamed (``v1``, ``v2``, ... per function)."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        names: dict[str, str] = {}
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            names.setdefault(arg.arg, f"arg_{len(names)}")
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                names.setdefault(inner.id, f"tmp_{len(names)}")
        keywords = {"coeff", "n_steps", "axis", "mode", "alpha", "max_norm"}  # called by name by the probe
        names = {old: new for old, new in names.items() if old not in keywords}
        for inner in ast.walk(node):
            if isinstance(inner, ast.arg) and inner.arg in names:
                inner.arg = names[inner.arg]
            elif isinstance(inner, ast.Name) and inner.id in names:
                inner.id = names[inner.id]
        return node


def renamed(source: str) -> str:
    return ast.unparse(_Renamer().visit(ast.parse(source)))


def reordered(source: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            body = node.body
            for k in range(len(body) - 1):
                first, second = body[k], body[k + 1]
                if isinstance(first, ast.Assign) and isinstance(second, ast.Assign) and \
                        not _names(first, ast.Store) & _names(second, ast.Load) and \
                        not _names(second, ast.Store) & _names(first, ast.Load):
                    body[k], body[k + 1] = second, first
                    break
    return ast.unparse(tree)


def _names(node: ast.AST, ctx: type) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


class _Select(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if ast.unparse(node.func) == "jnp.where" and len(node.args) == 3 and not node.keywords \
                and all(not isinstance(a, ast.Constant) for a in node.args[1:]):
            node.func = ast.parse("jax.lax.select", mode="eval").body
        return node


def select(source: str) -> str:
    return ast.unparse(_Select().visit(ast.parse(source)))


def inlined(source: str) -> str:
    """``softmax = jax.jit(softmax_raw)`` and ``name = jax.jit(_helper)`` become a jitted function of the
    helper's body (the helper kept where it is graded itself: ``softmax_raw``)."""
    tree = ast.parse(source)
    helpers = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    out: list[ast.stmt] = []
    for node in tree.body:
        call = node.value if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) else None
        if call is not None and ast.unparse(call.func) == "jax.jit" and len(call.args) == 1 \
                and isinstance(call.args[0], ast.Name) and call.args[0].id in helpers \
                and isinstance(node.targets[0], ast.Name):
            helper = helpers[call.args[0].id]
            made = ast.FunctionDef(name=node.targets[0].id, args=helper.args, body=list(helper.body),
                                   decorator_list=[ast.parse("jax.jit", mode="eval").body], returns=None,
                                   type_params=[], lineno=node.lineno)
            out.append(made)
            if helper.name.startswith("_"):
                out[:] = [n for n in out if n is not helper]
            continue
        out.append(node)
    tree.body = out
    return ast.unparse(ast.fix_missing_locations(tree))


DISGUISES = {"renamed": renamed, "reordered": reordered, "select": select, "inlined": inlined}


def write_student(folder: Path, files: dict[str, str]) -> Path:
    """A student's chapter folder: the exercises' files given, the other exercises' solutions."""
    folder.mkdir(parents=True, exist_ok=True)
    for file in SOLUTIONS.glob("*.py"):
        shutil.copy(file, folder / file.name)
    for exercise, text in files.items():
        (folder / f"{exercise}.py").write_text(text, encoding="utf-8")
    return folder
