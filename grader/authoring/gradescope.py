"""A Gradescope autograder for a chapter: ``grade dev gradescope ch4 --out autograder.zip``.

Gradescope unpacks the zip into ``/autograder/source`` and runs ``setup.sh`` once, as
root, to build the autograder's image; then, for every submission, ``run_autograder``
(copied to ``/autograder``), which must leave ``/autograder/results/results.json``. The
zip holds, at its root:

* ``setup.sh``: builds the same way every time on Gradescope's default image (Ubuntu 22.04,
  whose own Python is 3.10): bubblewrap from the image's apt when it has it (no PPA); uv from
  PyPI, pinned with its sha256 (``requirements-uv.txt``); with uv the Python the packages were
  locked for (``uv python install 3.11.7``, a build uv checks against the sha256 it carries); a
  virtual environment ``/autograder/jit-grader-venv`` where every package is pinned with its
  sha256 (``requirements.txt``, ``pip install --require-hashes``) and the grader is built
  offline; then the source folder (the reference solutions with it) made readable by root
  only; last, the programs every grading compiles, built into the cache ``run_autograder``
  grades with (``python -m grader.gradescope --build``), so that no submission compiles them.
  Each failing step stops with one line naming what failed;
* ``requirements.txt``, ``requirements-uv.txt``: from ``grader/authoring/gradescope-lock.txt``, which
  ``scripts/lock_gradescope.py`` writes from the environment the tests ran in (its JAX must be
  this machine's: the build refuses a stale lock);
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
#: every package the autograder installs, with the sha256 of its file (scripts/lock_gradescope.py)
LOCK = Path(__file__).resolve().parent / "gradescope-lock.txt"


@dataclass
class Lock:
    """``gradescope-lock.txt``: the Python to install, uv's pinned line, and the packages' pinned lines."""

    #: the Python uv installs there (``3.11.7``): the one the packages' wheels were picked for
    python: str
    #: uv's line, ``uv==X --hash=sha256:...`` (requirements-uv.txt)
    uv: str
    #: every other package's line, ``name==X --hash=sha256:...`` (requirements.txt)
    packages: list[str]

    def version(self, name: str) -> str:
        line = next((p for p in self.packages + [self.uv] if p.split("==")[0] == name), "")
        return line.split("==")[1].split()[0] if line else ""


def read_lock(path: Path = LOCK) -> Lock:
    """The lock, as ``scripts/lock_gradescope.py`` wrote it."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    python = next(line.split()[1] for line in lines if line.startswith("python "))
    uv = next(line for line in lines if line.startswith("uv=="))
    return Lock(python, uv, [line for line in lines if not line.startswith(("python ", "uv=="))])


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
    lock = read_lock()
    if (lock.version("jax"), lock.version("jaxlib")) != (versions["jax"], versions["jaxlib"]):
        raise BundleError(T("gradescope.stale_lock", jax=versions["jax"], locked=lock.version("jax")))
    versions.update(python=lock.python, uv=lock.version("uv"), grader=__version__)
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
        (staging / "requirements.txt").write_text("\n".join(lock.packages) + "\n", encoding="utf-8")
        (staging / "requirements-uv.txt").write_text(lock.uv + "\n", encoding="utf-8")
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
                                                  python=versions["python"], points=f"{points:g}"), encoding="utf-8")


def python_min() -> str:
    """The oldest Python the pinned JAX installs on (its ``Requires-Python``), e.g. ``3.11``."""
    for package in ("jaxlib", "jax"):
        found = re.search(r">=\s*(\d+\.\d+)", metadata.metadata(package).get("Requires-Python") or "")
        if found:
            return found.group(1)
    return "{}.{}".format(*sys.version_info[:2])  # pragma: no cover - JAX always says


def scripts(chapter: Chapter, config: Config, versions: dict) -> dict[str, str]:
    """``setup.sh`` and ``run_autograder``, their messages in the instructor's language (the
    one that reaches students, when the grader cannot run at all, in both)."""
    catalog = grader_catalog()
    lang = config.instructor_lang
    python = versions["python"]
    minor = ".".join(python.split(".")[:2])
    say = lambda text: catalog.render(text, lang)  # noqa: E731
    words = {
        "chapter": chapter.id, "jax": versions["jax"], "python": python, "python_minor": minor,
        "uv": versions.get("uv", "?"),
        "no_bwrap": say(T("gradescope.setup.no_bwrap")), "apt_skipped": say(T("gradescope.setup.apt_skipped")),
        "using_python": say(T("gradescope.setup.python")),
        "apt_update_failed": say(T("gradescope.setup.apt_update_failed")),
        "wrong_python": say(T("gradescope.setup.wrong_python", minor=minor)),
        "no_boot_python": say(T("gradescope.setup.no_boot_python")),
        "no_boot_pip": say(T("gradescope.setup.no_boot_pip")),
        "uv_failed": say(T("gradescope.setup.uv_failed", uv=versions.get("uv", "?"))),
        "python_failed": say(T("gradescope.setup.python_failed", python=python)),
        "no_venv": say(T("gradescope.setup.no_venv")),
        "pip_failed": say(T("gradescope.setup.pip_failed", jax=versions["jax"])),
        "grader_failed": say(T("gradescope.setup.grader_failed")), "not_ready": say(T("gradescope.setup.not_ready")),
        "not_built": say(T("gradescope.setup.not_built")),
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
