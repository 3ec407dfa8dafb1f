"""A course release for students: the exercises and the grader, not the answers.

``grade dev release ch4 --out DIR`` writes into ``DIR``:

* ``grader/``: the grader package, with only this chapter's folder under ``chapters/``,
  and in it the reference's records for one public seed (``reference-records.json``,
  see :mod:`grader.preview`): data, never the reference's code;
* ``exercises/<chapter>/``: the stubs, and ``exercises/<chapter>.ipynb`` when the
  repository has the chapter's notebook;
* ``README.md``: for students, in Chinese and English, with the one command that
  installs the release and grades the stubs;
* ``pyproject.toml``: what that command installs: JAX of at least :data:`JAX_FLOOR` (a JAX
  installed for a TPU or GPU is kept), and with the extra ``pinned``, which the README's command
  asks for in a fresh environment, the version the records were made with (primitive counts and
  FLOP estimates depend on it; a grading with another says so in its report).

Never in it: the solutions folder, anything compiled or pickled, and any piece of a
solution's code (:mod:`grader.authoring.answers`). :func:`leaks` looks for all three in
what was written; the release is built in a temporary folder beside ``DIR`` and moved
into place only when it finds none.
"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader import __version__
from grader.authoring.answers import chapter_answers, normalised
from grader.chapter import Chapter
from grader.preview import FILENAME as RECORDS_FILE, ReferenceRecords, record_reference

PACKAGE = Path(__file__).resolve().parent.parent
TEMPLATES = Path(__file__).resolve().parent / "templates"
#: never copied: caches, reports, backups of stubs
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".grade", "*.egg-info", "*.bak-*", ".*")
#: the templates of a new chapter's answers (``grade dev new-chapter``): its solution and variants are a
#: chapter's answers (a chapter made from them has them as its own), so no release or bundle holds them
SCAFFOLD_ANSWERS = ("solution.py.tmpl", "variant-*.py.tmpl")
#: files that hold compiled or serialised objects: no release may contain one
BINARY_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd", ".pickle", ".pkl", ".npy", ".npz", ".joblib", ".dill", ".dat")
#: files searched for pieces of the answers (everything else is refused, see BINARY_SUFFIXES)
TEXT_SUFFIXES = (".py", ".toml", ".tmpl", ".md", ".json", ".ipynb", ".txt", ".cfg", ".ini", ".typed")


class ReleaseError(Exception):
    """The release cannot be built as asked; the message says why and what to do."""


@dataclass
class Release:
    """What ``grade dev release`` wrote."""

    #: the release's folder
    out: Path
    #: the public seed of its reference records (every preview grades with it)
    seed: int
    #: the environment the records were made in (``jax``, ``jaxlib``, ``backend``, ...)
    environment: dict
    #: the chapter's notebook in the release, when there is one
    notebook: Path | None = None


def build(chapter: Chapter, out: Path, *, seed: int) -> Release:
    """Build the student release of ``chapter`` into ``out`` (a new or empty folder)."""
    out = Path(out).resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ReleaseError(f"{out} exists and is not an empty folder: choose a new one (nothing was written)")
    if not chapter.solutions.is_dir():
        raise ReleaseError(f"no reference solutions at {chapter.solutions}: a release is built from the full "
                           f"course repository, whose reference makes the records")
    try:
        if out.resolve().is_relative_to(PACKAGE) or PACKAGE.is_relative_to(out.resolve()):
            raise ReleaseError(f"{out} overlaps the grader's own package at {PACKAGE}: choose a folder outside it")
    except OSError:
        pass
    records = record_reference(chapter, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        notebook = _write(chapter, staging, records)
        problems = leaks(staging, chapter)
        if problems:
            raise ReleaseError("the release would hold the answers, so nothing was written:\n  "
                               + "\n  ".join(problems[:20]))
        if out.exists():
            out.rmdir()
        staging.chmod(0o755)  # mkdtemp's folder is its owner's alone; a release is for everyone to read
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Release(out=out, seed=records.seed, environment=records.environment,
                   notebook=out / notebook.relative_to(staging) if notebook else None)


def _write(chapter: Chapter, root: Path, records: ReferenceRecords) -> Path | None:
    """Every file of the release under ``root``; returns the notebook's path, if any."""
    package = copy_package(chapter, root)
    (package / "chapters" / chapter.id / RECORDS_FILE).write_text(records.to_json(), encoding="utf-8")
    exercises = root / "exercises"
    shutil.copytree(chapter.stubs, exercises / chapter.id, ignore=IGNORED)
    source_notebook = chapter.stubs.parent / f"{chapter.id}.ipynb"
    notebook = exercises / source_notebook.name if source_notebook.is_file() else None
    if notebook is not None:
        shutil.copy2(source_notebook, notebook)
    fields = {"chapter": chapter.id, "title_en": chapter.title.en, "title_zh": chapter.title.zh,
              "seed": records.seed}
    for lang in ("en", "zh"):  # a paragraph on the notebook, only when there is one
        fields[f"notebook_{lang}"] = _template(f"release-notebook.{lang}.md").format(**fields) if notebook else ""
    (root / "README.md").write_text(_template("release-README.md").format(**fields), encoding="utf-8")
    about = ("A course release of jit-grader (grade dev release): the exercises and the grader, without\n"
             "the answers. The extra [pinned] installs the JAX the reference records were made with.")
    (root / "pyproject.toml").write_text(
        pyproject(chapter, kind="release", about=about,
                  description="exercises and their grader (a course release, without the answers)",
                  jax=records.environment.get("jax") or "0.4.30", jaxlib=records.environment.get("jaxlib") or "0.4.30",
                  keep_installed_jax=True),
        encoding="utf-8")
    return notebook


def copy_package(chapter: Chapter, root: Path) -> Path:
    """The grader package copied to ``root/grader``, with ``chapter`` as its only chapter (wherever
    its folder lives), and no caches; returns the copy's folder."""
    package = root / "grader"
    shutil.copytree(PACKAGE, package, ignore=IGNORED)
    for pattern in SCAFFOLD_ANSWERS:
        for template in (package / "authoring" / "templates").glob(pattern):
            template.unlink()
    shutil.rmtree(package / "chapters")
    (package / "chapters").mkdir()
    shutil.copy2(PACKAGE / "chapters" / "__init__.py", package / "chapters" / "__init__.py")
    shutil.copytree(chapter.folder, package / "chapters" / chapter.id, ignore=IGNORED)
    return package


def pyproject(chapter: Chapter, *, kind: str, about: str, description: str, jax: str, jaxlib: str,
              python_min: str = "3.10", keep_installed_jax: bool = False) -> str:
    """The ``pyproject.toml`` that installs the grader as ``jit-grader-<chapter>-<kind>`` with JAX pinned
    (primitive counts and FLOP estimates depend on its version); ``about`` heads it as a comment.
    ``keep_installed_jax``: JAX of at least :data:`JAX_FLOOR` (a JAX installed for a TPU or GPU is
    kept), the pinned version in the extra ``pinned``."""
    about = "\n".join(f"# {line}" for line in about.splitlines())
    if keep_installed_jax:
        about += ("\n# JAX at least " + JAX_FLOOR + ": a JAX installed for a TPU or GPU (a TPU VM's, Colab's, Kaggle's)"
                  "\n# is kept; the extra [pinned] installs the version the reference records were made with.")
    jax_dep, jaxlib_dep = (f">={JAX_FLOOR}", f">={JAX_FLOOR}") if keep_installed_jax else (f"=={jax}", f"=={jaxlib}")
    return _template("pyproject.toml").format(about=about, chapter=chapter.id, kind=kind, version=__version__,
                                              title_en=chapter.title.en, description=description, jax=jax,
                                              jaxlib=jaxlib, python_min=python_min, jax_dep=jax_dep,
                                              jaxlib_dep=jaxlib_dep)


#: the oldest JAX the grader runs with (the project's own ``pyproject.toml`` asks the same)
JAX_FLOOR = "0.4.30"


def _template(name: str) -> str:
    return (TEMPLATES / f"{name}.tmpl").read_text(encoding="utf-8")


def leaks(root: Path, chapter: Chapter) -> list[str]:
    """Everything in ``root`` a student could read an answer back from, one line each:
    a file of the solutions (by name or by content), a compiled or pickled file, a piece
    of a solution's code or the definition of a solution's helper in any file, and the
    mention of such a helper in the records."""
    pieces, helpers = chapter_answers(chapter.solutions, chapter.stubs)
    solution_texts = {normalised(f.read_text(encoding="utf-8")) for f in chapter.solutions.glob("*.py")}
    defined = re.compile(r"\b(?:def|class)\s+(" + "|".join(map(re.escape, sorted(helpers))) + r")\b") \
        if helpers else None
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        name = path.relative_to(root).as_posix()
        if "solutions" in path.relative_to(root).parts or path.name.endswith(BINARY_SUFFIXES):
            found.append(f"{name}: a solution's or a compiled file")
            continue
        if not path.name.endswith(TEXT_SUFFIXES):
            found.append(f"{name}: not a text file the release may hold")
            continue
        text = _readable(path)
        flat = normalised(text)
        if flat in solution_texts:
            found.append(f"{name}: a copy of a solution")
        found += [f"{name}: holds solution code {piece!r}" for piece in sorted(pieces) if piece in flat]
        if defined is not None:
            found += [f"{name}: defines the solutions' helper {m}" for m in sorted(set(defined.findall(text)))]
        if path.name == RECORDS_FILE:
            found += [f"{name}: names the solutions' helper {h}" for h in sorted(helpers) if h in text]
    return found


def _readable(path: Path) -> str:
    """A file's text as a person reads it: a notebook's cells (source and outputs), not their JSON."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".ipynb":
        return text
    try:
        cells = json.loads(text).get("cells", [])
    except (ValueError, AttributeError):
        return text
    parts = []
    for cell in cells:
        parts.append(_joined(cell.get("source", "")))
        parts += [_joined(out.get("text", "")) + _joined((out.get("data") or {}).get("text/plain", ""))
                  for out in cell.get("outputs", [])]
    return "\n".join(parts)


def _joined(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def readme_command(readme: str) -> str:
    """The install-and-grade command of a release's README (its first ``bash`` block)."""
    match = re.search(r"```bash\n(.*?)\n```", readme, re.S)
    if match is None:
        raise ReleaseError("the release's README has no ```bash block with its command")
    return match.group(1).strip()
