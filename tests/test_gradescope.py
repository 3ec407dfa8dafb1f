"""The Gradescope autograder (``grade dev gradescope``), built, set up and run as Gradescope would.

The zip is built with the real command and unpacked, modes and all, into a folder laid out as
Gradescope's ``/autograder``: ``source/`` (the zip), ``submission/``, ``results/``,
``submission_metadata.json`` and ``run_autograder`` copied beside them. The real ``setup.sh``
runs there as Gradescope runs it, with ``AUTOGRADER_ROOT`` pointing at the folder and apt skipped
(``JIT_GRADER_SKIP_APT``): it installs uv with pip from ``requirements-uv.txt`` (its sha256
checked), installs Python with ``uv python install``, makes a fresh virtual environment, installs
every package of ``requirements.txt`` with ``pip install --require-hashes`` from the package index
pip is configured with here, and builds the grader offline. Then the real ``run_autograder``
grades a correct submission, a mistaken one (from a GitHub-like checkout), a crashing one (a zip
uploaded alone) and an empty folder, each time writing ``results/results.json``; and a submission
that tries to read the reference, once in bubblewrap and once in a second autograder built with
``--sandbox process``, as Gradescope's Docker containers mostly run it (a per-job uid only).

What the test changes in the environment, and why (only this):

* The one step a test cannot do is uv's download of a Python build: this machine reaches package
  registries only, and uv fetches python-build-standalone from GitHub. So the test packs this
  machine's Python (the one this repository's environment was made from, the version the lock
  names) as python-build-standalone packs a build (``python/bin``, ``python/lib``), and points uv's
  ``UV_PYTHON_DOWNLOADS_JSON_URL`` at a list naming that archive with its sha256: uv's own
  download, sha256 check, unpacking and ``uv python find`` run as on Gradescope, from a file.
  A second test checks that uv refuses an archive whose sha256 is not the one listed.
* The autograder with ``--sandbox process`` needs a Python every uid can run (jobs run as uids of
  their own and must reach it): there ``JIT_GRADER_PYTHON`` names the system's ``python3.11``.

Time: about 100 s on two cores (setup.sh installs the 19 locked packages, about 20 s each time
with pip's cache warm; a first grading about 8 to 11 s with empty caches, the others about 4 s).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from conftest import FULL, ROOT, SOLUTIONS, variant

from grader.authoring.release import leaks
from grader.chapter import load_chapter
from grader.cli import main

CHAPTER = load_chapter("ch4")
CHECKS = {f"{ex.id} · {c.id}": ex.id for ex in CHAPTER.exercises for c in ex.checks}


def _env(**extra: str) -> dict:
    """A shell's environment with nothing of this repository's virtual environment in it."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "GRADER_CHAPTERS", "GRADER_SEEDS_AHEAD")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT)))
    return {**env, **extra}


def _build(out: Path, *args: str) -> int:
    return main(["dev", "gradescope", "ch4", "--out", str(out), *args])


def _unzip(archive: Path, target: Path) -> None:
    """Unpack as ``unzip`` does: files with the modes the zip gives them."""
    with zipfile.ZipFile(archive) as zipped:
        for info in zipped.infolist():
            path = Path(zipped.extract(info, target))
            mode = info.external_attr >> 16 & 0o777
            if mode:
                path.chmod(mode)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    assert _build(out) == 0
    return out


# ------------------------------------------------------------------ the zip
def test_bundle_holds_the_scripts_the_grader_and_the_reference(bundle):
    with zipfile.ZipFile(bundle) as zipped:
        infos = {info.filename: info for info in zipped.infolist()}
        pyproject = zipped.read("pyproject.toml").decode()
        config = json.loads(zipped.read("jit-grader.json"))
        solutions = {name: zipped.read(name) for name in infos if name.startswith("solutions/")}
    names = set(infos)
    assert {"setup.sh", "run_autograder", "pyproject.toml", "README.md", "grader/gradescope.py",
            "grader/chapters/ch4/chapter.toml"} <= names
    # the chapter's folders: each exercise's code and words
    assert {f"grader/chapters/ch4/{ex.id}/{name}" for ex in CHAPTER.exercises
            for name in ("__init__.py", "exercise.toml")} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]
    for script in ("setup.sh", "run_autograder"):
        assert infos[script].external_attr >> 16 & 0o111 == 0o111, script
    assert solutions == {f"solutions/ch4/{p.name}": p.read_bytes() for p in SOLUTIONS.glob("*.py")}
    assert f'"jax=={metadata.version("jax")}"' in pyproject
    assert f'"jaxlib=={metadata.version("jaxlib")}"' in pyproject
    with zipfile.ZipFile(bundle) as zipped:
        requirements = zipped.read("requirements.txt").decode().splitlines()
        uv = zipped.read("requirements-uv.txt").decode().splitlines()
        setup = zipped.read("setup.sh").decode()
    # every package pinned with the sha256 of its file (pip install --require-hashes refuses anything else)
    assert requirements and all(re.fullmatch(r"[a-z0-9-]+==[\w.]+ --hash=sha256:[0-9a-f]{64}", r) for r in requirements)
    pinned = {r.split("==")[0]: r.split("==")[1].split()[0] for r in requirements}
    assert pinned["jax"] == metadata.version("jax") and pinned["numpy"] == metadata.version("numpy")
    assert {"ml-dtypes", "click", "nbformat", "setuptools", "scipy", "opt-einsum"} <= set(pinned)
    assert len(uv) == 1 and re.fullmatch(r"uv==[\d.]+ --hash=sha256:[0-9a-f]{64}", uv[0])
    assert "--require-hashes" in setup and '"$UV" python install' in setup
    assert "add-apt-repository" not in setup and "ppa:" not in setup.lower() and "deadsnakes" not in setup
    assert (config["chapter"], config["lang"], config["built_with"]["jax"]) == ("ch4", "en", metadata.version("jax"))


def test_what_students_code_can_read_holds_no_solution_code(bundle, tmp_path):
    """The installed grader (everything pip installs) is searched as a course release is."""
    _unzip(bundle, tmp_path)
    visible = tmp_path / "visible"
    visible.mkdir()
    for name in ("grader", "pyproject.toml", "README.md"):
        shutil.move(tmp_path / name, visible / name)
    assert leaks(visible, CHAPTER) == []
    planted = visible / "grader" / "chapters" / "ch4" / "common.py"  # the search does find a solution
    planted.write_text(planted.read_text() + "\n" + (SOLUTIONS / "ex02_where.py").read_text())
    assert leaks(visible, CHAPTER)


def test_build_refuses_to_replace_a_zip_unless_forced(bundle, tmp_path, capsys):
    out = tmp_path / "autograder.zip"
    out.write_bytes(b"an older upload")
    capsys.readouterr()
    assert _build(out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "exists" in err and "--force" in err and "Traceback" not in err
    assert out.read_bytes() == b"an older upload"
    assert _build(out, "--force", "--lang", "zh") == 0
    with zipfile.ZipFile(out) as zipped:
        assert json.loads(zipped.read("jit-grader.json"))["lang"] == "zh"
        assert "setup.sh" in zipped.namelist()


@pytest.mark.parametrize("case", ["unknown chapter", "a folder", "under a file"])
def test_bad_input_is_one_line(case, tmp_path, capsys):
    (tmp_path / "file.txt").write_text("x")
    args = {"unknown chapter": ["dev", "gradescope", "ch9", "--out", str(tmp_path / "a.zip")],
            "a folder": ["dev", "gradescope", "ch4", "--out", str(tmp_path)],
            "under a file": ["dev", "gradescope", "ch4", "--out", str(tmp_path / "file.txt" / "a.zip")]}[case]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("grade: error:") and "Traceback" not in err, err
    assert {"unknown chapter": "ch9", "a folder": "is a folder", "under a file": "cannot write"}[case] in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


def test_setup_checks_the_reference_is_whole_and_kept_from_other_users(bundle, capsys):
    """setup.sh's last step (``--check``) fails on a reference that lacks a file, or that other users
    (students' code) can read; it passes once the reference is whole and its owner's alone."""
    from grader.gradescope import main as gradescope_main

    top = Path(tempfile.mkdtemp(prefix="gradescope-check-", dir="/tmp"))
    try:
        top.chmod(0o755)
        _unzip(bundle, top / "source")
        reference = top / "source" / "solutions" / "ch4"
        shutil.move(reference / "ex05_timing.py", top / "ex05_timing.py")
        assert gradescope_main(["--check", str(top)]) == 1
        assert "lack ex05_timing.py" in capsys.readouterr().out
        shutil.move(top / "ex05_timing.py", reference / "ex05_timing.py")
        assert gradescope_main(["--check", str(top)]) == 1
        assert "can be read by other users" in capsys.readouterr().out
        (top / "source").chmod(0o700)
        assert gradescope_main(["--check", str(top)]) == 0
        assert capsys.readouterr().out.startswith("Ready: Python")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_exercises_at_once_follow_the_containers_cpu_quota(tmp_path):
    from grader.gradescope import cpus_allowed

    here = len(os.sched_getaffinity(0))
    assert cpus_allowed(tmp_path) == here  # no cgroup files: the affinity
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cpus_allowed(tmp_path) == here
    (tmp_path / "cpu.max").write_text("150000 100000\n")  # docker run --cpus 1.5
    assert cpus_allowed(tmp_path) == min(here, 2)
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")  # cgroup v1, --cpus 0.5
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cpus_allowed(tmp_path) == 1


def test_a_zip_uploaded_alone_is_graded_as_the_zip(tmp_path):
    from grader.gradescope import submission_path

    (tmp_path / "homework.zip").write_bytes(b"PK")
    assert submission_path(tmp_path) == tmp_path / "homework.zip"
    (tmp_path / "ex01_jit_forms.py").write_text("")
    assert submission_path(tmp_path) == tmp_path
    assert submission_path(tmp_path / "missing") == tmp_path / "missing"


def test_results_are_written_when_the_grader_cannot_run(bundle, tmp_path):
    """No environment (setup.sh never ran): run_autograder's own results.json, in both languages."""
    _unzip(bundle, tmp_path / "source")
    (tmp_path / "submission").mkdir()
    shutil.copy2(tmp_path / "source" / "run_autograder", tmp_path / "run_autograder")
    done = subprocess.run([str(tmp_path / "run_autograder")], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env=_env(AUTOGRADER_ROOT=str(tmp_path)))
    assert done.returncode == 0
    results = json.loads((tmp_path / "results" / "results.json").read_text(encoding="utf-8"))
    assert results["score"] == 0 and results["tests"] == []
    english, chinese = results["output"].splitlines()
    assert english.startswith("The autograder could not finish") and chinese.startswith("自动评分器未能完成")


def test_a_failure_of_the_grader_itself_is_a_score_of_zero_that_says_so(tmp_path, capsys):
    from grader.gradescope import main as gradescope_main

    assert gradescope_main([str(tmp_path)]) == 0  # no jit-grader.json: the grader cannot know the chapter
    results = json.loads((tmp_path / "results" / "results.json").read_text(encoding="utf-8"))
    assert results["score"] == 0 and results["stdout_visibility"] == "hidden"
    english, chinese = results["output"].splitlines()
    assert english.startswith("The autograder itself failed (FileNotFoundError") and "not your fault" in english
    assert chinese.startswith("自动评分器本身出错了")
    assert "Traceback" in capsys.readouterr().out  # for the instructor's eyes only


# ------------------------------------------------------------------ on a fake /autograder
def _python_archive(folder: Path) -> Path:
    """This machine's Python packed as python-build-standalone packs a build for uv (``python/`` with
    ``bin/python3.X``, ``lib/libpython*``, ``lib/python3.X`` without site-packages), and the downloads
    list uv reads (``UV_PYTHON_DOWNLOADS_JSON_URL``) naming it with its sha256."""
    import hashlib
    import tarfile

    base = Path(sys.base_prefix)
    minor = "python{}.{}".format(*sys.version_info[:2])
    skipped = {"site-packages", "test", "idlelib", "tkinter", "turtledemo", "__pycache__",
               "config-3.11-x86_64-linux-gnu"}
    archive = folder / "cpython-install_only.tar.gz"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        tar.add(base / "bin" / minor, f"python/bin/{minor}")
        for lib in (base / "lib").glob("libpython3*"):
            tar.add(lib, f"python/lib/{lib.name}")
        tar.add(base / "lib" / minor, f"python/lib/{minor}", filter=lambda info: None
                if set(Path(info.name).parts) & skipped else info)
    major, minor_n, patch = sys.version_info[:3]
    entry = {"name": "cpython", "arch": {"family": "x86_64", "variant": None}, "os": "linux", "libc": "gnu",
             "major": major, "minor": minor_n, "patch": patch, "prerelease": "", "variant": None,
             "url": archive.as_uri(), "sha256": hashlib.sha256(archive.read_bytes()).hexdigest()}
    listing = folder / "python-downloads.json"
    listing.write_text(json.dumps({f"cpython-{major}.{minor_n}.{patch}-linux-x86_64-gnu": entry}), encoding="utf-8")
    return listing


def _set_up(bundle: Path, root: Path, python: str | None, listing: Path | None = None) -> dict:
    """Gradescope's ``/autograder`` at ``root``: the zip unpacked into ``source/``, setup.sh run (with
    ``python``, or with uv's Python from ``listing``), run_autograder copied beside."""
    for folder in ("source", "submission", "results"):
        (root / folder).mkdir(parents=True)
    _unzip(bundle, root / "source")
    extra = {"JIT_GRADER_PYTHON": python} if python else {"UV_PYTHON_DOWNLOADS_JSON_URL": str(listing)}
    t0 = time.monotonic()
    done = subprocess.run([str(root / "source" / "setup.sh")], cwd=root / "source", capture_output=True, text=True,
                          timeout=900, env=_env(AUTOGRADER_ROOT=str(root), JIT_GRADER_SKIP_APT="1", **extra))
    print(f"\nsetup.sh in {time.monotonic() - t0:.1f} s")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    venv = root / "jit-grader-venv"
    site = next((venv / "lib").glob("python3*/site-packages"))
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")  # as Gradescope does
    return {"root": root, "venv": venv, "site": site, "installed": {p.name for p in site.iterdir()},
            "setup": done.stdout}


@pytest.fixture(scope="module")
def python_listing(tmp_path_factory) -> Path:
    """This machine's Python packed for uv, once for the module (about 5 s: the standard library gzipped)."""
    return _python_archive(tmp_path_factory.mktemp("python-build"))


@pytest.fixture(scope="module")
def autograder(bundle, python_listing, tmp_path_factory) -> dict:
    return _set_up(bundle, tmp_path_factory.mktemp("gradescope") / "autograder", None, python_listing)


def _python_any_uid_runs() -> str | None:
    """A Python of this one's version that any uid can run and make a venv with, as Gradescope's
    ``/usr/bin/python3.x``; ``None`` when there is none."""
    from grader.runner.sandbox import reachable_by_others

    name = "python{}.{}".format(*sys.version_info[:2])
    for folder in ("/usr/bin", "/usr/local/bin"):
        python = Path(folder) / name
        if python.is_file() and reachable_by_others(python) and \
                subprocess.run([str(python), "-c", "import venv, ensurepip"], capture_output=True).returncode == 0:
            return str(python)
    return None


@pytest.fixture(scope="module")
def autograder_process(tmp_path_factory):
    """The autograder as Gradescope's Docker most often runs it: no bubblewrap (``--sandbox process``),
    each job as a uid of its own, which reaches the Python and its environment, not the reference. In a
    folder of its own that every uid can traverse, as ``/autograder``'s parent."""
    python = _python_any_uid_runs()
    if os.geteuid() != 0 or python is None:
        pytest.skip("needs root and a Python any uid can run (e.g. /usr/bin/python3.11) for per-job uids")
    out = tmp_path_factory.mktemp("bundle-process") / "autograder.zip"
    assert _build(out, "--sandbox", "process") == 0
    top = Path(tempfile.mkdtemp(prefix="gradescope-", dir="/tmp"))
    top.chmod(0o755)
    try:
        yield _set_up(out, top / "autograder", python)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _run(autograder: dict, files: dict[str, str | Path], *, under: str = "", zipped: str = "") -> tuple[dict, str]:
    """Grade a submission of ``files`` with run_autograder (in the folder ``under`` of the submission, or
    in a zip of that name uploaded alone); its results.json and standard output."""
    root = autograder["root"]
    shutil.rmtree(root / "submission")
    (root / "submission").mkdir()
    folder = root / "submission" / under
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        text = content.read_text(encoding="utf-8") if isinstance(content, Path) else content
        (folder / name).write_text(text, encoding="utf-8")
    if zipped:
        with zipfile.ZipFile(root / "submission" / zipped, "w") as archive:
            for path in sorted(folder.rglob("*.py")):
                archive.write(path, path.relative_to(root / "submission").as_posix())
        shutil.rmtree(root / "submission" / Path(under).parts[0])
    (root / "submission_metadata.json").write_text('{"users": [{"name": "Ann", "email": "ann@example.org"}]}')
    (root / "results" / "results.json").unlink(missing_ok=True)
    t0 = time.monotonic()
    done = subprocess.run([str(root / "run_autograder")], cwd=root, capture_output=True, text=True, timeout=600,
                          env=_env(AUTOGRADER_ROOT=str(root)))
    print(f"run_autograder in {time.monotonic() - t0:.1f} s")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (root / "submission_metadata.json").stat().st_mode & 0o077 == 0
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8")), done.stdout


def _solutions(**replaced: str | Path) -> dict[str, str | Path]:
    return {p.name: replaced.get(p.stem, p) for p in SOLUTIONS.glob("*.py")}


def _tests_by_exercise(results: dict) -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = {}
    for test in results["tests"]:
        by.setdefault(CHECKS[test["name"].split(":")[0]], []).append(test)
    return by


@pytest.mark.slow
def test_setup_names_the_step_that_failed(bundle, python_listing, tmp_path):
    """A file that is not the one locked (here uv's sha256 changed): setup.sh stops at that step, with
    one line naming it; and uv refuses a Python archive whose sha256 is not the one listed."""
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    _unzip(bundle, root / "source")
    line = (root / "source" / "requirements-uv.txt").read_text()
    (root / "source" / "requirements-uv.txt").write_text(re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, line))
    done = subprocess.run([str(root / "source" / "setup.sh")], capture_output=True, text=True, timeout=300,
                          env=_env(AUTOGRADER_ROOT=str(root), JIT_GRADER_SKIP_APT="1"))
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("setup.sh: error: pip could not install uv ") and "requirements-uv.txt" in last
    (root / "source" / "requirements-uv.txt").write_text(line)  # uv itself, then a Python not the one listed
    entries = json.loads(python_listing.read_text())
    for entry in entries.values():
        entry["sha256"] = "1" * 64
    listing = tmp_path / "python-downloads.json"  # the same archive, listed with another sha256
    listing.write_text(json.dumps(entries))
    done = subprocess.run([str(root / "source" / "setup.sh")], capture_output=True, text=True, timeout=300,
                          env=_env(AUTOGRADER_ROOT=str(root), JIT_GRADER_SKIP_APT="1",
                                   UV_PYTHON_DOWNLOADS_JSON_URL=str(listing)))
    assert done.returncode == 1 and "hash" in done.stderr.lower()
    assert done.stderr.strip().splitlines()[-1].startswith("setup.sh: error: uv could not install Python ")


@pytest.mark.slow
def test_setup_installs_the_grader_afresh_and_locks_the_reference(autograder):
    root, site = autograder["root"], autograder["site"]
    assert any(name.startswith("jit_grader_ch4_gradescope-") and name.endswith(".dist-info")
               for name in autograder["installed"])
    assert "grader" in autograder["installed"]
    # every package at the version this environment has (the lock's), installed with its sha256 checked
    from grader.authoring.gradescope import read_lock

    lock = read_lock()
    for line in lock.packages:
        name, version = line.split()[0].split("==")
        dist = next(p for p in autograder["installed"] if p.lower().replace("_", "-").startswith(f"{name}-{version}")
                    and p.endswith(".dist-info"))
        assert (site / dist / "INSTALLER").read_text().strip() == "pip", dist
        if name not in ("setuptools",):
            assert metadata.version(name) == version, name  # locked from the environment the tests ran in
    python = autograder["root"] / "jit-grader-python" / f"cpython-{lock.python}-linux-x86_64-gnu" / "bin" / "python3.11"
    assert python.is_file()  # uv's Python, the lock's version
    assert f"Python for the grader: {python} {lock.python}" in autograder["setup"]
    assert (site / "grader" / "gradescope.py").is_file() and not (site / "grader").is_symlink()
    assert not list(site.glob("__editable__*"))
    assert "Ready: Python" in autograder["setup"] and f"{FULL:g} points" in autograder["setup"]
    # the image is copied into every submission's container: no seed is drawn ahead there (grader.ahead)
    assert not list((root / "jit-grader-cache").rglob("seeds-ahead")), "the build drew seeds ahead"
    for path in [root / "source", *(root / "source").rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
    assert (root / "source" / "solutions" / "ch4" / "ex02_where.py").is_file()
    assert stat.S_IMODE(autograder["venv"].stat().st_mode) & 0o005 == 0o005  # the jobs' uids reach Python


@pytest.mark.slow
def test_the_reference_solutions_get_full_marks(autograder):
    results, stdout = _run(autograder, _solutions())
    assert results["score"] == FULL and results["output_format"] == "text" and results["stdout_visibility"] == "hidden"
    assert not list((autograder["root"] / "jit-grader-cache").rglob("seeds-ahead"))  # nor does a submission's grading
    assert len(results["tests"]) == len(CHECKS)
    assert [t for t in results["tests"] if t["status"] != "passed" or t["score"] != t["max_score"]] == []
    assert results["output"].startswith(f"Chapter 4: JIT basics: {FULL:g} / {FULL:g}")
    assert "sandbox: " in results["output"] and "Integrity" not in results["output"]
    assert str(autograder["venv"] / "bin" / "python") in stdout.splitlines()[0]  # the fresh environment graded
    assert "seed " in stdout and "All checks passed" in stdout


@pytest.mark.slow
def test_a_mistake_costs_its_checks_and_names_them(autograder):
    """Submitted from GitHub: the chapter's files deep in a checkout."""
    mistake = variant("ex02_where", "python_if_piecewise")
    line = next(n for n, text in enumerate(mistake.splitlines(), start=1) if text.strip() == "if x > 0:")
    results, _ = _run(autograder, _solutions(ex02_where=mistake), under="jax-course/exercises/ch4")
    failed = {t["name"].split(":")[0]: t for t in results["tests"] if t["status"] == "failed"}
    assert set(failed) == {"ex02_where · piecewise.traceable", "ex02_where · piecewise.values",
                           "ex02_where · compiles"}
    assert all(t["score"] == 0 for t in failed.values())
    lost = sum(t["max_score"] for t in failed.values())
    assert results["score"] == pytest.approx(FULL - lost) and results["score"] < FULL
    assert f"ex02_where.py:{line}" in failed["ex02_where · piecewise.traceable"]["output"]
    assert "Hint: " in failed["ex02_where · piecewise.traceable"]["output"]


@pytest.mark.slow
def test_a_crash_at_import_costs_that_exercise_only(autograder):
    """Uploaded as one zip; what the instructor should look at (an import of os) is on the standard
    output only, which students do not see."""
    results, stdout = _run(autograder, _solutions(ex03_static_args="import os\nos._exit(1)\n"),
                           under="ch4", zipped="homework.zip")
    by = _tests_by_exercise(results)
    assert {t["status"] for t in by["ex03_static_args"]} == {"failed"}
    assert sum(t["score"] for t in by["ex03_static_args"]) == 0
    others = [t for ex, tests in by.items() if ex != "ex03_static_args" for t in tests]
    assert others and all(t["status"] == "passed" for t in others)
    assert results["score"] == 70
    line = next(line for line in results["output"].splitlines() if "ex03_static_args" in line)
    assert "0/10" in line and "exit code 1" in line
    assert "For the instructor: ex03_static_args.py:1 imports os" in stdout
    assert "imports os" not in json.dumps(results)


@pytest.mark.slow
def test_an_empty_submission_scores_zero_and_says_what_to_submit(autograder):
    results, _ = _run(autograder, {})
    assert results["score"] == 0 and results["tests"] == []
    english, chinese = results["output"].splitlines()
    assert english.startswith("Your submission could not be graded") and "is empty" in english
    assert "ex01_jit_forms.py … ex08_aot_debug.py" in english and str(autograder["root"]) not in english
    assert chinese.startswith("你的提交无法评测") and "是空的" in chinese


#: a module that tries, when imported, to read what the autograder keeps from students
PROBE = """import os
seen = []
for path in {paths!r}:
    try:
        with open(path, "rb") as handle:
            handle.read(1)
        seen.append("read")
    except OSError as exc:
        seen.append(type(exc).__name__)
raise RuntimeError("uid %d: %s" % (os.getuid(), " ".join(seen)))
"""


@pytest.mark.slow
@pytest.mark.parametrize("setup", ["autograder", "autograder_process"])
def test_students_code_cannot_read_the_reference_nor_who_submitted(setup, request):
    from grader.runner.sandbox import bwrap_works

    if setup == "autograder" and not (os.geteuid() == 0 and bwrap_works()):
        pytest.skip("needs root and bubblewrap (the process sandbox's case is the other one)")
    autograder = request.getfixturevalue(setup)
    root = autograder["root"]
    paths = [str(root / "source" / "solutions" / "ch4" / "ex02_where.py"), str(root / "source" / "jit-grader.json"),
             str(root / "submission_metadata.json")]
    results, _ = _run(autograder, _solutions(ex01_jit_forms=PROBE.format(paths=paths)))
    line = next(line for line in results["output"].splitlines() if "ex01_jit_forms" in line)
    uid, seen = re.search(r"uid (\d+): ([A-Za-z ]+)", line).groups()
    assert 61000 <= int(uid) < 61256, line  # a uid of its own
    assert seen.split() == ["PermissionError" if setup == "autograder_process" else "FileNotFoundError"] * 3, line
    assert results["score"] == 70
    assert ("sandbox: process+uid" if setup == "autograder_process" else "sandbox: bwrap+uid") in results["output"]
