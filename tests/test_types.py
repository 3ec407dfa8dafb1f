"""The type checker is part of the suite (issue "ready for chapter 5": what crosses the wire typed per
word, checked by a type checker on the core layers): mypy, on the modules pyproject.toml's [tool.mypy]
names (the foundations, words, results' vocabulary, instruments, the exercise package's contract and chapter 4's
packages), finds nothing; and it finds what it is there for (a field of a word, a key of an exercise's inputs)."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib

import pytest

from conftest import ROOT, mypy_cache


def _mypy(*args: str) -> subprocess.CompletedProcess:
    """mypy, with the session's cache (:func:`conftest.mypy_cache`: each run otherwise read JAX's types again)."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed: the test extra is not installed: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", mypy_cache(), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_mypy_finds_nothing_in_the_core_layers():
    files = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]["files"]
    assert "grader/protocol.py" in files and "grader/primitives" in files
    done = _mypy()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_sees_a_field_a_word_does_not_carry(tmp_path):
    """The checker reads the TypedDicts of grader/word_fields.py: a call record whose status is a number fails."""
    wrong = tmp_path / "wrong.py"
    wrong.write_text("from grader.word_fields import CallRecord\n\n"
                     "record: CallRecord = {'status': 1, 'function': 'f'}\n", encoding="utf-8")
    done = _mypy("--config-file", str(ROOT / "pyproject.toml"), str(wrong))
    assert done.returncode == 1 and "TypedDict item \"status\" has type \"str\"" in done.stdout, done.stdout


def _copy_of(exercise: str, tmp_path, name: str, change: tuple[str, str], at_least: int = 1):
    """A copy of a ch4 exercise package as one file (its imports are absolute), with ``change`` made in it."""
    text = (ROOT / "grader" / "chapters" / "ch4" / exercise / "__init__.py").read_text(encoding="utf-8")
    if change[0]:
        assert text.count(change[0]) >= at_least, change
        text = text.replace(change[0], change[1])
    copy = tmp_path / f"{name}.py"
    copy.write_text(text, encoding="utf-8")
    return copy


def test_mypy_names_a_misspelt_input_key_in_an_exercise(tmp_path):
    """An exercise's hidden inputs are a TypedDict (``Inputs``), read typed by ``inputs(rng) -> Inputs``, the probe
    (``ProbeContext[Inputs]``) and the checks (``CheckContext[Inputs]``): a key spelt otherwise in a copy of ex03
    (``coefs`` for ``coeffs``) is an error on each line that reads it, and the copy as it is, none."""
    right = _copy_of("ex03_static_args", tmp_path, "ex03_right", ("", ""))
    # read by regimes, the probe and the checks
    wrong = _copy_of("ex03_static_args", tmp_path, "ex03_wrong", ('["coeffs"]', '["coefs"]'), at_least=3)
    done = _mypy("--config-file", str(ROOT / "pyproject.toml"), str(right), str(wrong))
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert done.returncode == 1 and errors, done.stdout
    assert all(line.startswith(str(wrong)) and 'TypedDict "Inputs" has no key "coefs"' in line for line in errors), \
        done.stdout
    lines = {int(line.split(":")[1]) for line in errors}
    text = wrong.read_text(encoding="utf-8").splitlines()
    assert {n for n, line in enumerate(text, 1) if '["coefs"]' in line} == lines, done.stdout


def test_mypy_holds_each_ch4_package_to_the_exercise_package_protocol(tmp_path):
    """Every ch4 package satisfies ExercisePackage as a module (ex06, TimedPackage; those with regimes,
    CoveredPackage); a package whose probe takes another argument does not."""
    from grader.chapter import load_chapter

    chapter = load_chapter("ch4")
    names = [ex.id for ex in chapter.exercises]
    timed = [ex.id for ex in chapter.exercises if ex.timed]
    covered = [ex.id for ex in chapter.exercises if hasattr(ex.package, "regimes")]
    assert timed == ["ex06_speedup"] and covered
    broken = _copy_of("ex04_cache_keys", tmp_path, "ex04_broken", ("def probe(ctx: ProbeContext[Inputs])",
                                                                  "def probe(ctx: ProbeContext[Inputs], seed: int)"))
    holds = tmp_path / "holds.py"
    holds.write_text("\n".join([
        "from grader.exercise_package import CoveredPackage, ExercisePackage, TimedPackage",
        f"from grader.chapters.ch4 import {', '.join(names)}",
        "import ex04_broken",
        "",
        f"packages: list[ExercisePackage] = [{', '.join(names)}]",
        f"covered: list[CoveredPackage] = [{', '.join(covered)}]",
        f"timed: list[TimedPackage] = [{', '.join(timed)}]",
        "broken: ExercisePackage = ex04_broken",
        ""]), encoding="utf-8")
    done = _mypy("--config-file", str(ROOT / "pyproject.toml"), str(holds), str(broken))
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and errors[0].startswith(f"{holds}:8: error: Incompatible types in assignment"), \
        done.stdout
