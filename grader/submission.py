"""Reading a submission: a folder of modules, a notebook, or a zip of either.

:func:`load` copies what will be graded into a scratch folder of the grader's (the
child processes import from there, never from the student's folder), fingerprints
the original files, and finds what can be known without running anything: missing
files and syntax errors. Anything that makes the submission unreadable raises
:class:`SubmissionError` with one line saying what is wrong and what to do.
"""
from __future__ import annotations

import hashlib
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.chapter import Chapter, ChapterError, available_chapters, load_chapter
from grader.chapter_contents import chapters_in
from grader.child.job import NOTEBOOK_MODULES
from grader.copies import (REPORT_DIR_NAME, LocateError, described, link_target, locate,
                           renamed_files, top_links)
from grader.cell_map import CellMap
from grader.cell_notes import cell_notes
from grader.ipynb import NotebookError, read_cells
from grader.replay import NotebookModules, name_cells, notebook_modules
from grader.results import ExerciseResult
from grader.i18n import T, Text, TextError
from grader.module_bytes import answers_in, not_utf8_at, parsed
from grader.submission_limits import MAX_FILE_BYTES, MAX_FILES, MAX_TOTAL_BYTES
from grader.unzipping import ZipError, single_folder, unzip


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
    #: a notebook's graded function whose last definition is in a cell not graded, while an earlier
    #: one is: name -> (that cell, why) (:class:`~grader.cell_notes.CellNotes`)
    lost: dict[str, tuple[Text, Text]] = field(default_factory=dict)
    #: where inside the submission its chapter's files were found (``jit-course/exercises/ch4``);
    #: ``""``: at its top
    inner: str = ""
    #: links in the submission, never followed: name -> what it points to (as the link says)
    links: dict[str, str] = field(default_factory=dict)
    #: when the submission holds the chapter more than once and the student changed more than
    #: one copy: each of them (``inner``, ``kind``, ``written``: how many of the chapter's functions
    #: it has written, ``edited``, ``graded``), the graded one first; else empty
    copies: list[dict] = field(default_factory=list)
    #: how many functions the chapter grades (the measure of ``written``)
    copies_total: int = 0
    #: a zip's files whose names this machine cannot hold (too long, bytes of no UTF-8): never written,
    #: name -> why (``too_long``, ``not_utf8``); said in the report, the rest is graded
    unheld: dict[str, str] = field(default_factory=dict)
    #: for a notebook: what each exercise replays of it (:mod:`grader.replay`)
    replay: NotebookModules | None = None

    def describe(self) -> dict:
        described = {"path": str(self.path), "kind": self.kind, "sha256": self.sha256, "files": self.files}
        if self.inner:
            described["inner"] = self.inner
        if self.copies:
            described["copies"] = self.copies
            described["functions"] = self.copies_total
        if self.replay is not None and self.cells is not None:  # which cells any exercise replays
            described["cells"] = {"replayed": [self.cells.plain(n) for n in self.replay.replayed],
                                  "not_replayed": [self.cells.plain(n) for n in self.replay.not_replayed]}
        return described

    def locate(self, where: str | None) -> str | Text:
        """A place as the student knows it: ``file:line``, or a notebook's cell and line (and
        the notebook for the module made from it)."""
        if self.cells is None:
            return where or "?"
        return self.cells.locate(where)

    def annotate(self, exercise: str, result: ExerciseResult) -> ExerciseResult:
        """``result`` with what the report says of a notebook's cells: the notes on the exercise
        first, and a failed check of a graded function names the cell that defined it."""
        if self.replay is not None and exercise in self.replay.untouched:
            return result  # not attempted: said once, nothing else
        result.notes = list(self.notes.get(exercise, ())) + result.notes
        if self.replay is not None and self.cells is not None:
            name_cells(result, self.replay.defined_in, self.cells, self.lost)
        return result

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
            return links + integrity.scan(self.module_dir, [f for f in self.files if f.endswith(".py")],
                                         chapter.allowed_imports)
        findings, seen = [], set()  # what any exercise replays: each exercise's module, a line once
        for item in integrity.scan(self.module_dir, [ex.filename for ex in chapter.exercises], chapter.allowed_imports):
            cell = self.cells.cell_of(item["line"]) if 0 < item["line"] <= len(self.cells.lines) else None
            item["file"] = f"{self.files[0]} ({self.cells.plain(cell[0])})" if cell else self.files[0]
            if cell:
                item["line"] = cell[1]
            if (item["file"], item["line"], item["code"], item["detail"]) not in seen:
                seen.add((item["file"], item["line"], item["code"], item["detail"]))
                findings.append(item)
        return links + findings


def no_such_path(path: Path) -> SubmissionError:
    """The error for a path that does not exist, naming the one meant when a near name exists
    (``exercise/ch4``: did you mean ``exercises/ch4``?)."""
    near = near_path(Path(path))
    if near is not None:
        return SubmissionError(T("error.no_such_path_near", path=str(path), near=near))
    return SubmissionError(T("error.no_such_path", path=str(path)))


def near_path(path: Path) -> str | None:
    """An existing path one typo away from ``path``: each missing part replaced by the closest name
    in its folder (difflib's ratio 0.75 or more), as the user would type it; ``None`` when none."""
    import difflib

    parts = path.parts
    found = Path(parts[0]) if path.is_absolute() else Path(".")
    for part in parts[1:] if path.is_absolute() else parts:
        candidate = found / part
        if not candidate.exists():
            try:
                names = [p.name for p in found.iterdir() if not p.name.startswith(".")]
            except OSError:
                return None
            close = difflib.get_close_matches(part, names, n=1, cutoff=0.75)
            if not close:
                return None
            candidate = found / close[0]
        found = candidate
    shown = str(found) if path.is_absolute() else str(found).removeprefix("./")
    return shlex.quote(shown) if found.exists() and shown != str(path) else None


# ------------------------------------------------------------------ the chapter
def resolve_chapter(path: Path, requested: str | None) -> Chapter:
    """The chapter from ``--chapter``, else the folder's (or file's) name, else the
    contents (file names, or the functions a notebook defines), else the only chapter
    installed."""
    if not path.exists():
        raise no_such_path(path)
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


# ------------------------------------------------------------------ loading
def load(path: Path, chapter: Chapter, scratch: Path, *, inside: str | None = None) -> Submission:
    """Copy what ``path`` holds of ``chapter`` into ``scratch`` and read it. ``inside``: the copy to
    grade, a path inside a folder or zip that holds the chapter twice (``exercises/ch4.ipynb``)."""
    path = Path(path)
    if not path.exists():
        raise no_such_path(path)
    scratch.mkdir(parents=True, exist_ok=True)
    if path.is_file() and path.suffix.lower() == ".zip":
        unpacked = scratch / "unzipped"
        shutil.rmtree(unpacked, ignore_errors=True)  # a zip graded again: nothing of the last one stays
        try:
            links, unheld = unzip(path, unpacked)
        except ZipError as exc:
            raise SubmissionError(exc.text) from None
        inner = unpacked if inside else single_folder(unpacked)
        for name, link in links.items():  # as links where the zip had them, so that they are told as such
            place = unpacked.joinpath(*PurePosixPath(name).parts)
            place.parent.mkdir(parents=True, exist_ok=True)
            place.symlink_to(link)
        sub = _load_tree(inner, chapter, scratch / "modules", display=path, inside=inside)
        if inner != unpacked:  # found deep inside: said from the top of the zip
            top = inner.relative_to(unpacked).as_posix()
            sub.inner = f"{top}/{sub.inner}" if sub.inner else sub.inner
            for copy in sub.copies:
                copy["inner"] = top if copy["inner"] == "." else f"{top}/{copy['inner']}"
        sub.kind = "zip+" + sub.kind
        sub.sha256 = _sha256_file(path)
        sub.unheld = unheld
        return sub
    if path.is_file():
        if inside:
            raise SubmissionError(T("error.inside_needs_folder", path=str(path)))
        if path.suffix.lower() == ".ipynb":
            return _load_notebook(path, chapter, scratch / "modules", display=path)
        raise SubmissionError(T("error.not_a_submission", path=str(path)))
    return _load_tree(path, chapter, scratch / "modules", display=path, inside=inside)


def _load_tree(folder: Path, chapter: Chapter, target: Path, *, display: Path, inside: str | None = None) -> Submission:
    """The copy of the chapter in ``folder`` that holds the student's work (:func:`locate`), read."""
    try:
        graded, choice = locate(folder, chapter, display, inside)
    except LocateError as exc:
        raise SubmissionError(exc.text) from None
    if graded.kind == "notebook":
        sub = _load_notebook(graded.path, chapter, target, display=display)
    else:
        sub = _load_modules(graded.path, chapter, target, display=display)
    if graded.path != folder:
        sub.inner = graded.path.relative_to(folder).as_posix()
        if graded.kind == "folder":
            sub.links = {f"{sub.inner}/{name}": link for name, link in sub.links.items()}
        sub.links = {**top_links(folder), **sub.links}
    if choice is not None and choice.others:
        sub.copies = [described(c, folder, c is graded) for c in [choice.graded, *choice.others]]
        sub.copies_total = choice.functions
    return sub


def _load_modules(folder: Path, chapter: Chapter, target: Path, *, display: Path) -> Submission:
    """The chapter's modules in ``folder`` (every ``.py`` file there), copied to ``target``."""
    entries = [p for p in folder.iterdir() if p.name != REPORT_DIR_NAME and not p.name.startswith(".")]
    links = {p.name: link_target(p) for p in entries if p.is_symlink()}  # never followed
    entries = [p for p in entries if not p.is_symlink()]
    py_files = sorted(p for p in entries if p.is_file() and p.suffix == ".py")
    renamed = renamed_files([p.name for p in py_files], [ex.filename for ex in chapter.exercises])
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
    exercise_files = {ex.filename for ex in chapter.exercises}
    for file in py_files:  # an answer saved under another name ("练习 二 副本.py"): counted, never graded
        if file.name in exercise_files or file.name in renamed:
            continue
        written = answers_in(file.read_bytes())
        for ex in chapter.exercises:
            found = [f for f in ex.functions if f in written]
            if found:
                sub.notes.setdefault(ex.id, []).append(
                    T("submission.answer_elsewhere", file=file.name, functions=", ".join(found), name=ex.filename))
    return sub


def _static_problems(chapter: Chapter, folder: Path, links: dict[str, str] | None = None) -> dict[str, Text]:
    problems: dict[str, Text] = {}
    for ex in chapter.exercises:
        file = folder / ex.filename
        if not file.exists():
            link = (links or {}).get(ex.filename)
            problems[ex.id] = T("job.file_missing", file=ex.filename) if link is None else \
                T("job.file_is_link", file=ex.filename, target=link)
            continue
        data = file.read_bytes()
        not_utf8 = not_utf8_at(data)
        if not_utf8 is not None:  # Python reads it as UTF-8: a syntax error at some line would name no cause
            problems[ex.id] = T("job.not_utf8", file=ex.filename, **not_utf8)
            continue
        try:
            parsed(data, filename=ex.filename)
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
    made = notebook_modules(cell_list, path.name, history=history,
                            functions={ex.id: ex.functions for ex in chapter.exercises},
                            provided={ex.id: chapter.stubs / ex.filename for ex in chapter.exercises})
    cells = made.cells
    _empty(target)
    for ex in chapter.exercises:
        (target / ex.filename).write_text(made.modules.get(ex.id, ""), encoding="utf-8")
    (target / NOTEBOOK_MODULES).write_text("", encoding="utf-8")  # run statement by statement
    sub = Submission(path=display, kind="notebook", module_dir=target, sha256=_sha256_file(path),
                     files=[path.name], cells=cells, replay=made)
    sub.problems = {ex: _in_cells(t, cells) for ex, t in _static_problems(chapter, target).items()
                    if ex not in made.untouched}
    found = cell_notes(cell_list, {name: ex.id for ex in chapter.exercises for name in ex.functions})
    sub.notes, sub.lost = found.by_exercise, found.lost
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


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()
