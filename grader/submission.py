"""Reading a submission: a folder of modules, a notebook, or a zip of either.

:func:`load` copies what will be graded into a scratch folder of the grader's (the
child processes import from there, never from the student's folder), fingerprints
the original files, and finds what can be known without running anything: missing
files and syntax errors. Anything that makes the submission unreadable raises
:class:`SubmissionError` with one line saying what is wrong and what to do.
"""
from __future__ import annotations

import ast
import hashlib
import os
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader import safetext, ziptools
from grader.chapter import Chapter, ChapterError, available_chapters, load_chapter
from grader.ipynb import (CellMap, NotebookError, cell_notes, defined_names, module_of,  # noqa: F401
                              notebook_source, read_cells)
from grader.i18n import T, Text, TextError

MAX_FILE_BYTES = 2 << 20
MAX_TOTAL_BYTES = 32 << 20
MAX_FILES = 500
REPORT_DIR_NAME = ".grade"
#: folders never searched for a chapter's files: copies of packages, caches, a system's own
SKIPPED_FOLDERS = ("__pycache__", "__MACOSX", "node_modules", "site-packages", ".git", ".venv", "venv",
                   ".ipynb_checkpoints", REPORT_DIR_NAME)
#: how deep a submission's folders are searched for the chapter's files (a whole checkout zipped)
MAX_DEPTH = 6


class SubmissionError(TextError):
    """The submission cannot be graded at all; ``text`` is one line for the user."""


@dataclass
class Submission:
    """A submission, copied where the child processes import it from."""

    #: the path the user gave
    path: Path
    #: ``folder``, ``notebook``, ``zip+folder`` or ``zip+notebook``
    kind: str
    #: the grader's copy of the modules (a notebook's code is one module, under every exercise's name)
    module_dir: Path
    #: fingerprint of the files graded (the zip or notebook file itself for those)
    sha256: str
    #: the files graded, by name
    files: list[str]
    #: why an exercise cannot run at all (a missing file, a syntax error), by exercise id
    problems: dict[str, Text] = field(default_factory=dict)
    #: for a notebook: its module's lines back to the cells
    cells: CellMap | None = None
    #: what each exercise's report should say about the notebook's cells (a function
    #: defined in two cells, a cell that failed when it ran), by exercise id
    notes: dict[str, list[Text]] = field(default_factory=dict)
    #: where inside the submission its chapter's files were found (``jit-course/exercises/ch4``);
    #: ``""``: at its top
    inner: str = ""
    #: links in the submission, never followed: name -> what it points to (as the link says)
    links: dict[str, str] = field(default_factory=dict)
    #: a zip's files whose names this machine cannot hold (too long, bytes of no UTF-8): never written,
    #: name -> why (``too_long``, ``not_utf8``); said in the report, the rest is graded
    unheld: dict[str, str] = field(default_factory=dict)

    def describe(self) -> dict:
        described = {"path": str(self.path), "kind": self.kind, "sha256": self.sha256, "files": self.files}
        if self.inner:
            described["inner"] = self.inner
        return described

    def locate(self, where: str | None) -> str | Text:
        """A place as the student knows it: ``file:line``, or a notebook's cell and line (and
        the notebook for the module made from it)."""
        if self.cells is None:
            return where or "?"
        return self.cells.locate(where)

    def integrity_findings(self, chapter: Chapter) -> list[dict]:
        """The static integrity scan (a notebook's code scanned once, under its own name and cells),
        and every link the submission holds."""
        from grader import integrity

        links = [{"file": name, "line": 0, "code": "link", "detail": target,
                  "message": T("integrity.link", file=name, target=target)} for name, target in self.links.items()]
        links += [{"file": name, "line": 0, "code": "name", "detail": why,
                   "message": T("integrity.name.too_long", file=name) if why == "too_long"
                   else T("integrity.name.not_utf8", file=name)} for name, why in self.unheld.items()]
        if self.cells is None:
            return links + integrity.scan(self.module_dir, [f for f in self.files if f.endswith(".py")])
        findings = integrity.scan(self.module_dir, [chapter.exercises[0].filename])
        for item in findings:  # (links come first, below)
            cell = self.cells.cell_of(item["line"]) if 0 < item["line"] <= len(self.cells.lines) else None
            item["file"] = f"{self.files[0]} ({self.cells.plain(cell[0])})" if cell else self.files[0]
            if cell:
                item["line"] = cell[1]
        return links + findings


# ------------------------------------------------------------------ the chapter
def resolve_chapter(path: Path, requested: str | None) -> Chapter:
    """The chapter from ``--chapter``, else the folder's (or file's) name, else the
    contents (file names, or the functions a notebook defines), else the only chapter
    installed."""
    if not path.exists():
        raise SubmissionError(T("error.no_such_path", path=str(path)))
    try:
        if requested:
            return load_chapter(requested)
        known = available_chapters()
        for candidate in (path.name, path.stem, path.parent.name if path.is_file() else ""):
            if candidate in known:
                return load_chapter(candidate)
        matching = chapters_in(path, [load_chapter(c) for c in known])
        if len(matching) == 1:
            return matching[0]
        if len(known) == 1:
            return load_chapter(known[0])
    except ChapterError as exc:
        raise SubmissionError(T("error.chapter", detail=str(exc))) from None
    key = "error.which_chapter_file" if path.is_file() else "error.which_chapter"
    raise SubmissionError(T(key, name=path.name, known=", ".join(available_chapters())))


def chapters_in(path: Path, chapters: list[Chapter]) -> list[Chapter]:
    """The chapters whose exercises ``path`` holds, told from its contents alone.

    A folder or a zip is told by its exercise file names (``ex01_jit_forms.py``), or
    else by its single notebook; a notebook by the chapter's function names its code
    cells define. The chapters that match best are returned (several on a tie, none
    when nothing matches).
    """
    names, notebook = _contents(path)
    scores = {c.id: sum(ex.filename in names for ex in c.exercises) for c in chapters}
    if not any(scores.values()) and notebook is not None:
        defined = defined_names(notebook)
        scores = {c.id: len(defined & {f for ex in c.exercises for f in ex.functions}) for c in chapters}
    best = max(scores.values(), default=0)
    return [c for c in chapters if best and scores[c.id] == best]


def _contents(path: Path) -> tuple[set[str], bytes | None]:
    """The file names ``path`` holds and the text of its single notebook, if it has one."""
    try:
        if path.is_dir():
            files = [p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")]
            notebooks = [p for p in files if p.suffix == ".ipynb"]
            one = notebooks[0].read_bytes() if len(notebooks) == 1 and notebooks[0].stat().st_size <= MAX_TOTAL_BYTES \
                else None
            return {p.name for p in files}, one
        if path.suffix.lower() == ".ipynb":
            return set(), path.read_bytes() if path.stat().st_size <= MAX_TOTAL_BYTES else None
        if path.suffix.lower() == ".zip":
            with ziptools.open_zip(path) as archive:
                members = [m for m in archive.infolist() if not m.is_dir() and "__MACOSX" not in m.filename
                           and m.filename not in archive.bad_names]
                notebooks = [m for m in members if m.filename.endswith(".ipynb")]
                one = None
                if len(notebooks) == 1:
                    with archive.open(notebooks[0]) as member:
                        one = member.read(MAX_TOTAL_BYTES)
                return {PurePosixPath(m.filename).name for m in members}, one
    except (OSError, zipfile.BadZipFile, RuntimeError):
        pass  # unreadable: load() says so in its own words
    return set(), None


# ------------------------------------------------------------------ loading
def load(path: Path, chapter: Chapter, scratch: Path) -> Submission:
    path = Path(path)
    if not path.exists():
        raise SubmissionError(T("error.no_such_path", path=str(path)))
    scratch.mkdir(parents=True, exist_ok=True)
    if path.is_file() and path.suffix.lower() == ".zip":
        unpacked = scratch / "unzipped"
        shutil.rmtree(unpacked, ignore_errors=True)  # a zip graded again: nothing of the last one stays
        links, unheld = _unzip(path, unpacked)
        inner = _single_folder(unpacked)
        for name, link in links.items():  # as links where the zip had them, so that they are told as such
            place = unpacked.joinpath(*PurePosixPath(name).parts)
            place.parent.mkdir(parents=True, exist_ok=True)
            place.symlink_to(link)
        sub = _load_tree(inner, chapter, scratch / "modules", display=path)
        if sub.inner and inner != unpacked:  # found deep inside: said from the top of the zip
            sub.inner = f"{inner.relative_to(unpacked).as_posix()}/{sub.inner}"
        sub.kind = "zip+" + sub.kind
        sub.sha256 = _sha256_file(path)
        sub.unheld = unheld
        return sub
    if path.is_file():
        if path.suffix.lower() == ".ipynb":
            return _load_notebook(path, chapter, scratch / "modules", display=path)
        raise SubmissionError(T("error.not_a_submission", path=str(path)))
    return _load_tree(path, chapter, scratch / "modules", display=path)


def _load_tree(folder: Path, chapter: Chapter, target: Path, *, display: Path) -> Submission:
    try:
        entries = [p for p in folder.iterdir() if p.name != REPORT_DIR_NAME and not p.name.startswith(".")]
    except PermissionError:
        raise SubmissionError(T("error.unreadable", path=str(display))) from None
    expected = [ex.filename for ex in chapter.exercises]
    links = {p.name: _link_target(p) for p in entries if p.is_symlink()}  # never followed
    entries = [p for p in entries if not p.is_symlink()]
    py_files = sorted(p for p in entries if p.is_file() and p.suffix == ".py")
    notebooks = sorted(p for p in entries if p.is_file() and p.suffix == ".ipynb")
    renamed = _renamed([p.name for p in py_files], expected)
    if not any(p.name in expected or p.name in renamed for p in py_files) and not any(name in expected for name in links):
        if len(notebooks) == 1:
            return _load_notebook(notebooks[0], chapter, target, display=display)
        if not entries:
            raise SubmissionError(T("error.empty", path=str(display), first=expected[0]))
        if len(notebooks) > 1:
            raise SubmissionError(T("error.many_notebooks", path=str(display), n=len(notebooks)))
        found = _nested(folder, chapter, display)
        if found is None:
            raise SubmissionError(T("error.no_exercise_files", path=str(display), chapter=chapter.id,
                                      expected=", ".join(expected[:3])))
        sub = _load_notebook(found, chapter, target, display=display) if found.is_file() else \
            _load_tree(found, chapter, target, display=display)
        sub.inner = found.relative_to(folder).as_posix()
        sub.links = {**links, **{f"{sub.inner}/{name}": link for name, link in sub.links.items()}}
        return sub
    if len(py_files) > MAX_FILES:
        raise SubmissionError(T("error.too_many_files", path=str(display), n=len(py_files), limit=MAX_FILES))
    _empty(target)
    digest = hashlib.sha256()
    total = 0
    names = []
    for file in py_files:
        data = file.read_bytes()
        if len(data) > MAX_FILE_BYTES:
            raise SubmissionError(T("error.file_too_large", path=str(file), limit=MAX_FILE_BYTES))
        total += len(data)
        if total > MAX_TOTAL_BYTES:
            raise SubmissionError(T("error.too_large", path=str(display), limit=MAX_TOTAL_BYTES))
        digest.update(file.name.encode() + b"\0" + hashlib.sha256(data).digest())
        (target / renamed.get(file.name, file.name)).write_bytes(data)
        names.append(renamed.get(file.name, file.name))
    for name, link in sorted(links.items()):
        digest.update(name.encode() + b"\0link\0" + link.encode())
    sub = Submission(path=display, kind="folder", module_dir=target, sha256=digest.hexdigest(), files=names,
                     links=links)
    sub.problems = _static_problems(chapter, target, links)
    for name, base in renamed.items():  # graded as the exercise it was saved again from, and said so
        ex = next(ex for ex in chapter.exercises if ex.filename == base)
        sub.notes.setdefault(ex.id, []).append(T("submission.renamed", file=name, name=base))
    return sub


def _renamed(names: list[str], expected: list[str]) -> dict[str, str]:
    """Exercise files a browser renamed when saving them again (``ex02_where (1).py``), alone: their
    name -> the exercise's file name. With the exercise's own file beside, that one is graded."""
    from grader.batch.renames import version

    found: dict[str, str] = {}
    for name in sorted(names, key=lambda n: version(n, "single")[1]):
        base = version(name, "single")[0]
        if name not in expected and base in expected and base not in names:
            found = {k: v for k, v in found.items() if v != base} | {name: base}  # the highest number
    return found


def _nested(folder: Path, chapter: Chapter, display: Path) -> Path | None:
    """Where in ``folder`` (a whole checkout, zipped, say) the chapter's files are: the folder
    holding the most of its exercise files (one named ``exercises`` first, then the one
    nearest the top), or else its one notebook. A folder of untouched stubs beside a
    notebook means the work is in the notebook. ``None``: nowhere; two equal places: the
    user is told to keep one."""
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
                          and depth]
            deeper += [p for p in children if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
                       and p.name not in SKIPPED_FOLDERS]
        level = deeper
    if folders:
        def rank(item: tuple[Path, int]) -> tuple:
            path, count = item
            parts = path.relative_to(folder).parts
            return (-count, "exercises" not in parts, len(parts))

        folders.sort(key=rank)
        best = folders[0]
        if len(folders) > 1 and rank(folders[1]) == rank(best):
            raise SubmissionError(T("error.many_chapter_folders", path=str(display), chapter=chapter.id,
                                    first=best[0].relative_to(folder).as_posix(),
                                    second=folders[1][0].relative_to(folder).as_posix()))
        if len(notebooks) == 1 and _untouched_stubs(best[0], chapter):
            return notebooks[0]
        return best[0]
    if len(notebooks) == 1:
        return notebooks[0]
    if len(notebooks) > 1:
        raise SubmissionError(T("error.many_notebooks", path=str(display), n=len(notebooks)))
    return None


def _link_target(path: Path) -> str:
    """What a link points to, as it says (never followed)."""
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _untouched_stubs(folder: Path, chapter: Chapter) -> bool:
    """Whether every exercise file in ``folder`` is the chapter's stub, byte for byte."""
    try:
        return all((folder / ex.filename).read_bytes() == (chapter.stubs / ex.filename).read_bytes()
                   for ex in chapter.exercises if (folder / ex.filename).exists())
    except OSError:
        return False


def _static_problems(chapter: Chapter, folder: Path, links: dict[str, str] | None = None) -> dict[str, Text]:
    problems: dict[str, Text] = {}
    for ex in chapter.exercises:
        file = folder / ex.filename
        if not file.exists():
            link = (links or {}).get(ex.filename)
            problems[ex.id] = T("job.file_missing", file=ex.filename) if link is None else \
                T("job.file_is_link", file=ex.filename, target=link)
            continue
        try:
            ast.parse(file.read_bytes(), filename=ex.filename)
        except SyntaxError as exc:
            problems[ex.id] = T("job.syntax_error", file=ex.filename, line=exc.lineno or "?", message=exc.msg)
        except ValueError as exc:  # null bytes
            problems[ex.id] = T("job.syntax_error", file=ex.filename, line="?", message=str(exc))
    return problems


def _load_notebook(path: Path, chapter: Chapter, target: Path, *, display: Path) -> Submission:
    if path.stat().st_size > MAX_TOTAL_BYTES:
        raise SubmissionError(T("error.file_too_large", path=str(path), limit=MAX_TOTAL_BYTES))
    try:
        cell_list, history = read_cells(path)
    except NotebookError as exc:
        raise SubmissionError(T("error.bad_notebook", path=str(path), detail=str(exc))) from None
    source, cells = module_of(cell_list, path.name, history=history)
    _empty(target)
    for ex in chapter.exercises:
        (target / ex.filename).write_text(source, encoding="utf-8")
    sub = Submission(path=display, kind="notebook", module_dir=target, sha256=_sha256_file(path),
                     files=[path.name], cells=cells)
    sub.problems = {ex: _in_cells(t, cells) for ex, t in _static_problems(chapter, target).items()}
    sub.notes = cell_notes(cell_list, {name: ex.id for ex in chapter.exercises for name in ex.functions})
    return sub


def _in_cells(text: Text, cells: CellMap) -> Text:
    """A syntax error of the notebook's module, named by its cell."""
    if text.key != "job.syntax_error" or not isinstance(text.args.get("line"), int):
        return text
    cell, line = cells.cell_of(text.args["line"])
    return T("job.syntax_error", file=cells.label(cell), line=line, message=text.args["message"])


def _empty(folder: Path) -> None:
    """``folder`` exists and holds nothing. The folder itself stays (a warm host's sandbox has it
    mounted), so grading the submission again reads only what it holds now."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


# ------------------------------------------------------------------ zips
def _unzip(path: Path, target: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Unpack the zip's modules and notebooks into ``target``; its links (never made) and the files whose
    names cannot be held here (never written: name -> why)."""
    try:
        archive = ziptools.open_zip(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SubmissionError(T("error.bad_zip", path=str(path), detail=str(exc))) from None
    with archive:
        members = [m for m in archive.infolist() if not m.is_dir()]
        wanted = [m for m in members if PurePosixPath(m.filename).suffix in (".py", ".ipynb")
                  and not any(part in SKIPPED_FOLDERS for part in PurePosixPath(m.filename).parts)]
        unheld = {safetext.decoded(m.filename): why for m in wanted
                  if (why := ziptools.name_problem(m.filename)) is not None}
        wanted = [m for m in wanted if ziptools.name_problem(m.filename) is None]
        links = {m.filename: archive.read(m)[:300].decode("utf-8", errors="replace") for m in wanted
                 if stat.S_ISLNK(m.external_attr >> 16)}  # a link in the zip: never made, never followed
        wanted = [m for m in wanted if m.filename not in links]
        if len(wanted) > MAX_FILES:
            raise SubmissionError(T("error.too_many_files", path=str(path), n=len(wanted), limit=MAX_FILES))
        if sum(m.file_size for m in wanted) > MAX_TOTAL_BYTES:
            raise SubmissionError(T("error.too_large", path=str(path), limit=MAX_TOTAL_BYTES))
        for member in wanted:
            name = PurePosixPath(member.filename)
            if name.is_absolute() or ".." in name.parts:
                raise SubmissionError(T("error.zip_path", path=str(path), name=member.filename))
            destination = target.joinpath(*name.parts)
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source:
                data = source.read(MAX_FILE_BYTES + 1)  # never trust the declared size
            if len(data) > MAX_FILE_BYTES:
                raise SubmissionError(T("error.file_too_large", path=f"{path}:{member.filename}", limit=MAX_FILE_BYTES))
            destination.write_bytes(data)
    if not target.exists() and not links:
        raise SubmissionError(T("error.empty_zip", path=str(path)))
    target.mkdir(parents=True, exist_ok=True)
    return links, unheld


def _single_folder(folder: Path) -> Path:
    """Descend through folders that hold nothing but one folder."""
    while True:
        entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
        if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
            folder = entries[0]
            continue
        return folder


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()
