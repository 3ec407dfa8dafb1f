"""Which copy of a chapter holds the student's work.

A course's checkout holds each chapter twice, generated from the same stubs: its modules
(``exercises/ch4/*.py``) and its notebook (``exercises/ch4.ipynb``). A student fills in
one of them; a folder or a zip handed in may hold both. :func:`choose` looks at every
copy found and grades the one the student changed, told from the code itself:

* a function the chapter grades is **written** when its last definition is no longer the
  stub's (a body that only raises ``NotImplementedError``): assigned (``fast_f =
  jax.jit(f)``), or a ``def`` that does something else. A file or cell that does not
  parse was written too (a stub always parses);
* a copy is **edited** when its text differs from the stubs as handed out (the chapter's
  stub modules, its generated notebook's code cells), where those are known.

The copy with the most functions written is graded; on a tie, the one edited, then the
one saved last. When two copies hold work, the grading says so, which one it graded,
and how to grade the other (:class:`Choice`). Folders, zips, checkouts and batch
submissions all come here (:func:`grader.submission.load`), so they decide alike.
"""
from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.chapter import Chapter
from grader.i18n import T, TextError
from grader.cell_names import defined_names
from grader.magics import parse, without_magics
from grader.module_bytes import parsed

REPORT_DIR_NAME = ".grade"
#: folders never searched for a chapter's files: copies of packages, caches, a system's own
SKIPPED_FOLDERS = ("__pycache__", "__MACOSX", "node_modules", "site-packages", ".git", ".venv", "venv",
                   ".ipynb_checkpoints", REPORT_DIR_NAME)
#: how deep a submission's folders are searched for the chapter's files (a whole checkout zipped)
MAX_DEPTH = 6
#: the largest notebook read to tell whether it is the chapter's
MAX_NOTEBOOK_BYTES = 32 << 20

#: names a cell that does not parse defines, read off its lines
_DEFINES = re.compile(r"^(?:async\s+def|def)\s+(\w+)|^(\w+)\s*(?::[^=]*)?=(?!=)", re.M)


@dataclass
class Copy:
    """One copy of the chapter: a folder of its modules, or a notebook."""

    #: the folder of modules, or the notebook file
    path: Path
    #: ``folder`` or ``notebook``
    kind: str
    #: the chapter's functions written in it (no longer the stub's), in the chapter's order
    written: list[str] = field(default_factory=list)
    #: whether its text differs from the stubs as handed out (``False`` also when they are not known)
    edited: bool = False
    #: when it was saved last (seconds since the epoch; the newest of a folder's exercise files)
    saved: float = 0.0

    @property
    def changed(self) -> bool:
        """Whether the student changed it at all."""
        return bool(self.written) or self.edited

    def rank(self) -> tuple:
        """Larger for the copy more likely worked in: more functions written, edited, saved later
        (the time counts only for a copy changed: an untouched folder is graded before a notebook)."""
        return (len(self.written), self.edited, self.saved if self.changed else 0.0, self.kind == "folder")


@dataclass
class Choice:
    """The copy graded, and the other copies that hold work too."""

    #: the copy to grade
    graded: Copy
    #: every other copy the student changed (most work first)
    others: list[Copy] = field(default_factory=list)
    #: how many functions the chapter grades
    functions: int = 0


def choose(candidates: list[Copy], chapter: Chapter) -> Choice:
    """The copy to grade among ``candidates`` (a folder's first when none was changed), measured."""
    for copy in candidates:
        measure(copy, chapter)
    ordered = sorted(candidates, key=Copy.rank, reverse=True)
    graded = ordered[0]
    total = sum(len(ex.functions) for ex in chapter.exercises)
    return Choice(graded, [c for c in ordered[1:] if c.changed], total)


def measure(copy: Copy, chapter: Chapter) -> Copy:
    """Fill in what ``copy`` holds of the student's: functions written, edited, last saved."""
    if copy.kind == "folder":
        written, edited, saved = _folder_work(copy.path, chapter)
    else:
        written, edited, saved = _notebook_work(copy.path, chapter)
    order = [name for ex in chapter.exercises for name in ex.functions]
    copy.written = [name for name in order if name in written]
    copy.edited, copy.saved = edited, saved
    return copy


# ------------------------------------------------------------------ a folder of modules
def _folder_work(folder: Path, chapter: Chapter) -> tuple[set[str], bool, float]:
    written: set[str] = set()
    edited = False
    saved = 0.0
    try:
        names = [p.name for p in folder.iterdir() if p.suffix == ".py"]
    except OSError:
        names = []
    instead = {base: name for name, base in renamed_files(names, [ex.filename for ex in chapter.exercises]).items()}
    for ex in chapter.exercises:
        file = folder / instead.get(ex.filename, ex.filename)
        try:
            data = file.read_bytes()
            saved = max(saved, file.stat().st_mtime)
        except OSError:
            continue
        stub = _read(chapter.stubs / ex.filename)
        edited = edited or (stub is not None and data != stub)
        try:
            tree = parsed(data)
        except (SyntaxError, ValueError):
            written |= set(ex.functions)  # a stub always parses: whatever is there is the student's
            continue
        written |= written_in(tree, ex.functions)
    return written, edited, saved


def renamed_files(names: list[str], expected: list[str]) -> dict[str, str]:
    """Exercise files a browser renamed when saving them again (``ex02_where (1).py``), alone: their
    name -> the exercise's file name. With the exercise's own file beside, that one is graded."""
    from grader.platform_names import version

    found: dict[str, str] = {}
    for name in sorted(names, key=lambda n: version(n, "single")[1]):
        base = version(name, "single")[0]
        if name not in expected and base in expected and base not in names:
            found = {k: v for k, v in found.items() if v != base} | {name: base}  # the highest number
    return found


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


# ------------------------------------------------------------------ a notebook
def _notebook_work(path: Path, chapter: Chapter) -> tuple[set[str], bool, float]:
    cells = code_cells(path)
    graded = {name for ex in chapter.exercises for name in ex.functions}
    written: set[str] = set()
    last: dict[str, ast.AST] = {}
    for source in cells:
        tree = parse(without_magics(source))
        if tree is None:  # does not parse: the names it defines were written
            written |= {m.group(1) or m.group(2) for m in _DEFINES.finditer(source)} & graded
            continue
        last.update(_definitions(tree, graded))
    written |= {name for name, node in last.items() if not _is_stub(node)}
    handed_out = code_cells(chapter.stubs.parent / f"{chapter.id}.ipynb")  # nothing to tell when either is unread
    edited = bool(handed_out) and bool(cells) and [c.strip() for c in cells] != [c.strip() for c in handed_out]
    try:
        saved = path.stat().st_mtime
    except OSError:
        saved = 0.0
    return written, edited, saved


def code_cells(path: Path) -> list[str]:
    """The sources of a notebook's code cells, in page order (none when it cannot be read)."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return []
    return ["".join(c.get("source", "")) if isinstance(c.get("source"), list) else str(c.get("source", ""))
            for c in cells if isinstance(c, dict) and c.get("cell_type") == "code"]


# ------------------------------------------------------------------ stubs, told from the code
def written_in(tree: ast.Module, names: tuple[str, ...] | set[str]) -> set[str]:
    """Which of ``names`` a module defines, last definition first, as something other than a stub."""
    return {name for name, node in _definitions(tree, set(names)).items() if not _is_stub(node)}


def _definitions(tree: ast.Module, names: set[str]) -> dict[str, ast.AST]:
    """The last top-level definition of each of ``names`` in ``tree``."""
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in names:
            found[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name) and target.id in names:
                    found[target.id] = node
    return found


def _is_stub(node: ast.AST | None) -> bool:
    """A ``def`` (decorated or not) whose body, after its docstring, only raises ``NotImplementedError``."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    called = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(called, ast.Name) and called.id == "NotImplementedError"


# ------------------------------------------------------------------ where the copies are
class LocateError(TextError):
    """No copy of the chapter can be told in a folder; ``text`` is one line for the user."""


def locate(folder: Path, chapter: Chapter, display: Path, inside: str | None = None) -> tuple[Copy, Choice | None]:
    """Where in ``folder`` the chapter's copy to grade is, and the choice made when there were several.

    The candidates: ``folder`` itself when it holds the exercise files, else the folder
    below that holds the most of them (one named ``exercises`` first, then the one nearest
    the top); and the notebooks that define the chapter's functions (a notebook alone, any).
    Among them, :func:`grader.copies.choose` takes the one the student changed. A single
    grading and a class's batch both come here, so they decide alike.
    """
    if inside:
        return _inside(folder, chapter, display, inside), None
    try:
        entries = [p for p in folder.iterdir() if p.name != REPORT_DIR_NAME and not p.name.startswith(".")]
    except PermissionError:
        raise LocateError(T("error.unreadable", path=str(display))) from None
    expected = [ex.filename for ex in chapter.exercises]
    if not entries:
        raise LocateError(T("error.empty", path=str(display), first=expected[0]))
    renamed = renamed_files([p.name for p in entries if p.suffix == ".py" and p.is_file()], expected)
    if any((p.name in expected or p.name in renamed) and p.suffix == ".py" and (p.is_file() or p.is_symlink())
           for p in entries):
        best, notebooks = folder, sorted(p for p in entries if p.suffix == ".ipynb" and p.is_file()
                                         and not p.is_symlink())
    else:
        best, notebooks = _nested(folder, chapter, display)
    if len(notebooks) > 1 or best is not None:
        defining = [nb for nb in notebooks if _defines_chapter(nb, chapter)]
        if best is None and not defining and notebooks:
            raise LocateError(T("error.many_notebooks", path=str(display), n=len(notebooks)))
        notebooks = defining
    candidates = ([Copy(best, "folder")] if best is not None else []) + [Copy(nb, "notebook") for nb in notebooks]
    if not candidates:
        raise LocateError(T("error.no_exercise_files", path=str(display), chapter=chapter.id,
                                expected=", ".join(expected[:3])))
    if len(candidates) == 1:
        return candidates[0], None
    choice = choose(candidates, chapter)
    return choice.graded, choice


def _inside(folder: Path, chapter: Chapter, display: Path, inside: str) -> Copy:
    """The copy ``--inside`` names: a folder of the chapter's modules or a notebook in ``folder``."""
    parts = PurePosixPath(inside.replace("\\", "/")).parts
    place = folder.joinpath(*parts)
    expected = {ex.filename for ex in chapter.exercises}
    if ".." not in parts and not PurePosixPath(inside).is_absolute() and not place.is_symlink():
        if place.is_file() and place.suffix == ".ipynb":
            return Copy(place, "notebook")
        if place.is_dir() and any((place / name).exists() for name in expected):
            return Copy(place, "folder")
    raise LocateError(T("error.no_inside", path=str(display), inside=inside, chapter=chapter.id))


def described(copy: Copy, top: Path, graded: bool) -> dict:
    """A copy as the report lists it: its place inside the submission, its kind, what it holds."""
    where = copy.path.relative_to(top).as_posix() if copy.path != top else "."
    return {"inner": where, "kind": copy.kind, "written": len(copy.written), "edited": copy.edited,
            "graded": graded}


def top_links(folder: Path) -> dict[str, str]:
    """The links at the top of ``folder``, by name, as they say (never followed)."""
    try:
        return {p.name: link_target(p) for p in folder.iterdir() if p.is_symlink() and not p.name.startswith(".")}
    except OSError:
        return {}


def _defines_chapter(notebook: Path, chapter: Chapter) -> bool:
    """Whether a notebook defines any of the chapter's functions (a notebook of other work does not)."""
    try:
        if notebook.stat().st_size > MAX_NOTEBOOK_BYTES:
            return False
        names = defined_names(notebook.read_bytes())
    except OSError:
        return False
    return bool(names & {f for ex in chapter.exercises for f in ex.functions})


def _nested(folder: Path, chapter: Chapter, display: Path) -> tuple[Path | None, list[Path]]:
    """Where in ``folder`` (a whole checkout, zipped, say) the chapter's files may be: the folder
    below it holding the most of its exercise files (one named ``exercises`` first, then the one
    nearest the top; two equal places: the user is told to keep one), and every notebook."""
    expected = {ex.filename for ex in chapter.exercises}
    folders: list[tuple[Path, int]] = []
    notebooks: list[Path] = []
    level = [folder]
    for depth in range(MAX_DEPTH):
        deeper = []
        for here in level:
            try:
                children = sorted(here.iterdir())
            except OSError:
                continue
            names = {p.name for p in children if p.is_file() and not p.is_symlink()}
            if depth and names & expected:
                folders.append((here, len(names & expected)))
            notebooks += [p for p in children if p.suffix == ".ipynb" and p.is_file() and not p.is_symlink()
                          and not p.name.startswith(".")]
            deeper += [p for p in children if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
                       and p.name not in SKIPPED_FOLDERS]
        level = deeper
    if not folders:
        return None, notebooks

    def rank(item: tuple[Path, int]) -> tuple:
        path, count = item
        parts = path.relative_to(folder).parts
        return (-count, "exercises" not in parts, len(parts))

    folders.sort(key=rank)
    best = folders[0]
    if len(folders) > 1 and rank(folders[1]) == rank(best):
        raise LocateError(T("error.many_chapter_folders", path=str(display), chapter=chapter.id,
                                first=best[0].relative_to(folder).as_posix(),
                                second=folders[1][0].relative_to(folder).as_posix()))
    return best[0], notebooks


def link_target(path: Path) -> str:
    """What a link points to, as it says (never followed)."""
    try:
        return os.readlink(path)
    except OSError:
        return "?"


