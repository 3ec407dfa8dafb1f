"""A Gradescope autograder for a chapter: ``grade dev gradescope ch4 --out autograder.zip``.

Gradescope unpacks the zip into ``/autograder/source`` and runs ``setup.sh`` once, as
root, to build the autograder's image; then, for every submission, ``run_autograder``
(copied to ``/autograder``), which must leave ``/autograder/results/results.json``. The
zip holds, at its root:

* ``setup.sh``: installs a Python new enough for the pinned JAX (apt's, or the
  deadsnakes PPA's on Ubuntu 22.04) and bubblewrap when apt has it, makes a virtual
  environment ``/autograder/jit-grader-venv``, pip-installs the grader into it, and makes
  the source folder (the reference solutions with it) readable by root only;
* ``run_autograder``: runs :mod:`grader.gradescope` on the submission with that
  environment's Python, and writes a ``results.json`` of its own if that could not run;
* ``grader/`` (this chapter its only one), ``pyproject.toml`` (JAX and jaxlib pinned to
  this machine's versions, :func:`grader.authoring.release.pyproject`) and ``README.md``:
  what ``setup.sh`` installs. Students' code can read the installed grader (it runs from
  it), so it is searched for solution code as a course release is
  (:func:`grader.authoring.release.leaks`), and the build refuses to finish if it finds any;
* ``solutions/<chapter>/``: the reference solutions, which stay on the autograder's side;
* ``jit-grader.json``: the chapter, the report's language and the limits
  (:class:`grader.gradescope.Config`).

The two scripts derive every path from ``AUTOGRADER_ROOT`` (default ``/autograder``), so
that a test can run them on a folder laid out the same way. Their messages come from the
catalog (``grader/messages/gradescope.toml``), put into words when the zip is built.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Callable

from grader import __version__
from grader.authoring.release import IGNORED, TEMPLATES, copy_package, leaks, pyproject
from grader.chapter import Chapter
from grader.gradescope import CONFIG_FILE, Config
from grader.i18n import LANGS, T, TextError, grader_catalog

#: the two scripts Gradescope runs, executable in the zip
SCRIPTS = ("setup.sh", "run_autograder")


class BundleError(TextError):
    """The autograder cannot be built as asked; ``text`` says why and what to do (nothing was written)."""


@dataclass
class Bundle:
    """What ``grade dev gradescope`` wrote."""

    #: the zip
    out: Path
    #: its size in bytes
    size: int
    #: the settings every grading of it uses
    config: Config
    #: the chapter's maximum score (the Gradescope assignment's points)
    points: float


def build(chapter: Chapter, out: Path, config: Config, *, force: bool = False,
          announce: Callable[[dict], None] | None = None) -> Bundle:
    """Write the Gradescope autograder of ``chapter`` to the zip ``out`` (replaced only when ``force``);
    ``announce`` is told the versions it pins once the request is found sound, before the work."""
    out = Path(out).absolute()
    if out.is_dir():
        raise BundleError(T("gradescope.out_is_folder", path=str(out)))
    if out.exists() and not force:
        raise BundleError(T("gradescope.out_exists", path=str(out)))
    if not chapter.solutions.is_dir():
        raise BundleError(T("gradescope.no_solutions", path=str(chapter.solutions)))
    try:
        versions = {"jax": metadata.version("jax"), "jaxlib": metadata.version("jaxlib")}
    except metadata.PackageNotFoundError as exc:
        raise BundleError(T("gradescope.no_jax", detail=str(exc))) from None
    versions.update(python=".".join(map(str, sys.version_info[:3])), grader=__version__)
    config = replace(config, built_with=versions)
    if announce is not None:
        announce(versions)
    points = sum(ex.max_score for ex in chapter.exercises)
    with tempfile.TemporaryDirectory(prefix="grade-gradescope-") as tmp:
        staging = Path(tmp)
        _write_package(chapter, staging, versions, points)
        problems = leaks(staging, chapter)
        if problems:
            raise BundleError(T("gradescope.leak", problems="; ".join(problems[:10])))
        shutil.copytree(chapter.solutions, staging / "solutions" / chapter.id, ignore=IGNORED)
        (staging / CONFIG_FILE).write_text(config.to_json(), encoding="utf-8")
        for name, text in scripts(chapter, config, versions).items():
            (staging / name).write_text(text, encoding="utf-8")
        _zip(staging, out)
    return Bundle(out=out, size=out.stat().st_size, config=config, points=points)


def _write_package(chapter: Chapter, root: Path, versions: dict, points: float) -> None:
    """What ``setup.sh`` pip-installs: the grader, its ``pyproject.toml`` and ``README.md``."""
    copy_package(chapter, root)
    about = ("The grader of a Gradescope autograder (grade dev gradescope): setup.sh installs it into a\n"
             "virtual environment of its own. JAX is pinned to the version of the machine that built it.")
    (root / "pyproject.toml").write_text(
        pyproject(chapter, kind="gradescope", about=about, description="the grader of a Gradescope autograder",
                  jax=versions["jax"], jaxlib=versions["jaxlib"], python_min=python_min()),
        encoding="utf-8")
    readme = (TEMPLATES / "gradescope-README.md.tmpl").read_text(encoding="utf-8")
    (root / "README.md").write_text(readme.format(chapter=chapter.id, title_en=chapter.title.en,
                                                  title_zh=chapter.title.zh, jax=versions["jax"],
                                                  python_min=python_min(), points=f"{points:g}"), encoding="utf-8")


def python_min() -> str:
    """The oldest Python the pinned JAX installs on (its ``Requires-Python``), e.g. ``3.11``."""
    for package in ("jaxlib", "jax"):
        found = re.search(r">=\s*(\d+\.\d+)", metadata.metadata(package).get("Requires-Python") or "")
        if found:
            return found.group(1)
    return "{}.{}".format(*sys.version_info[:2])


def scripts(chapter: Chapter, config: Config, versions: dict) -> dict[str, str]:
    """``setup.sh`` and ``run_autograder``, their messages in the instructor's language (the
    one that reaches students, when the grader cannot run at all, in both)."""
    catalog = grader_catalog()
    lang = config.instructor_lang
    want = "{}.{}".format(*sys.version_info[:2])
    oldest = python_min()
    if tuple(map(int, want.split("."))) < tuple(map(int, oldest.split("."))):
        want = oldest
    words = {
        "chapter": chapter.id, "jax": versions["jax"], "python_min": oldest, "python_want": want,
        "no_bwrap": catalog.render(T("gradescope.setup.no_bwrap"), lang),
        "apt_skipped": catalog.render(T("gradescope.setup.apt_skipped"), lang),
        "using_python": catalog.render(T("gradescope.setup.python"), lang),
        "no_python": catalog.render(T("gradescope.setup.no_python", python_min=oldest, jax=versions["jax"],
                                      want=want), lang),
        "no_venv": catalog.render(T("gradescope.setup.no_venv"), lang),
        "pip_failed": catalog.render(T("gradescope.setup.pip_failed", jax=versions["jax"]), lang),
        "not_ready": catalog.render(T("gradescope.setup.not_ready"), lang),
        "not_run_json": json.dumps({"score": 0, "output": "\n".join(catalog.render(T("gradescope.not_run"), one)
                                                                    for one in LANGS),
                                    "output_format": "text", "visibility": "visible", "tests": []},
                                   ensure_ascii=False),
    }
    return {name: fill((TEMPLATES / f"gradescope-{name}.tmpl").read_text(encoding="utf-8"), words)
            for name in SCRIPTS}


def fill(template: str, words: dict[str, str]) -> str:
    """``template`` with each ``{{name}}`` replaced by ``words[name]`` as one shell word (quoted)."""
    return re.sub(r"\{\{([a-z_]+)\}\}", lambda m: shlex.quote(str(words[m.group(1)])), template)


def _zip(staging: Path, out: Path) -> None:
    """Zip ``staging``'s files into ``out`` (the scripts executable), through a temporary file beside it:
    ``out`` is whole or as it was."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkstemp(prefix=f".{out.name}-", suffix=".tmp", dir=out.parent)[1])
    except OSError as exc:
        raise BundleError(T("gradescope.unwritable", path=str(out), detail=exc.strerror or str(exc))) from None
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(p for p in staging.rglob("*") if p.is_file()):
                name = path.relative_to(staging).as_posix()
                info = zipfile.ZipInfo.from_file(path, name)
                info.external_attr = (0o100755 if name in SCRIPTS else 0o100644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())
        tmp.chmod(0o644)
        os.replace(tmp, out)
    except OSError as exc:
        raise BundleError(T("gradescope.unwritable", path=str(out), detail=exc.strerror or str(exc))) from None
    finally:
        tmp.unlink(missing_ok=True)
