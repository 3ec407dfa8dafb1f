"""A student's path without traps (issue 25), from the student's side.

Each test does what a student does with a checkout of the course: fills in the modules of
``exercises/ch4/`` (or the notebook ``exercises/ch4.ipynb``), grades ``exercises``, a zip of
it, or one exercise at a time, and reads what the screen and the reports say:

* the work graded is the work done, and the first line says which files were graded;
* every zip has a report of its own;
* ``Next:`` points where the work is, and a path with a space in it can be pasted.
"""
from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import shutil
import zipfile
from pathlib import Path

import pytest

from conftest import SOLUTIONS, STUBS, variant

from grader.cli import main

NOTEBOOK = STUBS.parent / "ch4.ipynb"


@pytest.fixture(autouse=True)
def english(monkeypatch):
    for var in ("LC_ALL", "LC_MESSAGES", "LANGUAGE", "GRADE_SIGN_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    monkeypatch.setenv("COLUMNS", "250")


def grade(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def first_line(out: str) -> str:
    """The report's first line as printed, its continuation lines (wrapped at the terminal's width) joined."""
    lines = out.splitlines()
    more = 1
    while more < len(lines) and lines[more].startswith("  "):
        more += 1
    return " ".join(line.strip() for line in lines[:more])


def note_lines(out: str) -> str:
    """The lines between the first line and the table (the note on the copies found), joined."""
    rest = out.splitlines()
    start = next(i for i, line in enumerate(rest) if line.startswith("Found "))
    end = next(i for i in range(start + 1, len(rest)) if not rest[i].startswith("  "))
    return " ".join(line.strip() for line in rest[start:end])


def fill_notebook(notebook: Path, exercises: list[str]) -> None:
    """Write the reference's answer of ``exercises`` into the notebook's cells, as a student would:
    the first cell that defines one of its functions gets the whole answer, the others are emptied."""
    from grader.chapter import load_chapter

    chapter = load_chapter("ch4")
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    for exercise in exercises:
        ex = chapter.exercise(exercise)
        answer = (SOLUTIONS / ex.filename).read_text(encoding="utf-8")
        cells = [c for c in nb["cells"] if c["cell_type"] == "code"
                 and any(re.search(rf"^(@.*\n)*def {f}\(", "".join(c["source"]), re.M) for f in ex.functions)]
        assert cells, exercise
        cells[0]["source"] = answer
        for cell in cells[1:]:
            cell["source"] = "# answered above\n"
    notebook.write_text(json.dumps(nb), encoding="utf-8")


def checkout(root: Path, modules: tuple[str, ...] = (), notebook: tuple[str, ...] = ()) -> Path:
    """A student's ``exercises/``: ``ch4/`` (the stubs, ``modules`` answered) beside the generated
    ``ch4.ipynb`` (``notebook`` answered in its cells); returns ``exercises/``."""
    exercises = root / "exercises"
    shutil.copytree(STUBS, exercises / "ch4", ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    for name in modules:
        shutil.copy(SOLUTIONS / f"{name}.py", exercises / "ch4" / f"{name}.py")
    shutil.copy(NOTEBOOK, exercises / "ch4.ipynb")
    if notebook:
        fill_notebook(exercises / "ch4.ipynb", list(notebook))
    return exercises


def zipped(folder: Path, archive: Path) -> Path:
    with zipfile.ZipFile(archive, "w") as out:
        for file in sorted(folder.rglob("*")):
            if file.is_file() and ".grade" not in file.parts:
                out.write(file, file.relative_to(folder.parent).as_posix())
    return archive


# ------------------------------------------------------------------ the work graded is the work done
@pytest.mark.slow
def test_grade_exercises_grades_the_modules_a_student_filled_and_says_so(tmp_path):
    exercises = checkout(tmp_path, modules=("ex01_jit_forms",))
    code, out, err = grade(exercises, "-k", "1", "--seed", "3")
    assert code == 0, err
    first = first_line(out)
    # the modules, not the untouched notebook; a partial run names the file it graded, not the folder's eight
    assert f"graded {exercises / 'ch4'} (ex01_jit_forms.py)" in first, out
    assert re.search(r"ex01_jit_forms\s+10/10\s+passed", out), out  # it was 0/10, not attempted
    report = exercises / ".grade"
    data = json.loads((report / "report.partial.json").read_text(encoding="utf-8"))
    assert data["graded"]["path"] == str(exercises / "ch4") and data["graded"]["kind"] == "folder"
    assert data["graded"]["text"] in data["title"]
    md = (report / "report.partial.md").read_text(encoding="utf-8").splitlines()[0]
    html = (report / "report.partial.html").read_text(encoding="utf-8")
    assert "graded" in md and str(exercises / "ch4") in md
    assert re.search(rf"<h1>[^<]*graded {re.escape(str(exercises / 'ch4'))}", html)


@pytest.mark.slow
def test_a_zip_of_exercises_grades_the_modules_a_student_filled(tmp_path):
    archive = zipped(checkout(tmp_path / "work", modules=("ex01_jit_forms",)), tmp_path / "homework.zip")
    code, out, err = grade(archive, "-k", "1", "--seed", "3", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["exercises"][0]["status"] == "passed", data["exercises"][0]  # it was not attempted (the notebook)
    assert data["graded"]["text"] == f"graded {archive}: exercises/ch4 (ex01_jit_forms.py)"
    assert data["title"].endswith(data["graded"]["text"])
    assert data["submission"]["kind"] == "zip+folder" and data["submission"]["inner"] == "exercises/ch4"


def test_work_in_the_notebook_beside_untouched_modules_is_the_notebook_graded(tmp_path):
    from grader.chapter import load_chapter
    from grader.submission import load

    exercises = checkout(tmp_path, notebook=("ex02_where",))
    sub = load(exercises, load_chapter("ch4"), tmp_path / "scratch")
    assert sub.kind == "notebook" and sub.inner == "ch4.ipynb" and not sub.copies
    untouched = checkout(tmp_path / "fresh")  # nothing done yet: the modules, as the README says
    assert load(untouched, load_chapter("ch4"), tmp_path / "scratch2").kind == "folder"


@pytest.mark.slow
def test_when_both_copies_hold_work_it_says_which_was_graded_and_how_to_grade_the_other(tmp_path):
    exercises = checkout(tmp_path, modules=("ex01_jit_forms",), notebook=("ex02_where", "ex03_static_args"))
    code, out, err = grade(exercises, "-k", "2", "--seed", "3")
    assert code == 0, err
    assert first_line(out).endswith(f"graded {exercises / 'ch4.ipynb'}")  # 7 functions written there, 3 in the modules
    note = note_lines(out)
    assert "Found 2 copies of the chapter with your work in them" in note
    assert f"{exercises / 'ch4.ipynb'} (7 of 24 functions written)" in note
    assert f"{exercises / 'ch4'} (3 of 24 functions written)" in note
    assert "the one with the most functions written" in note
    command = re.search(r"To grade the other instead: (grade .*)$", note).group(1)
    assert shlex.split(command) == ["grade", str(exercises / "ch4")]
    md = (exercises / ".grade" / "report.partial.md").read_text(encoding="utf-8")
    assert "Found 2 copies" in md.split("\n## ")[0]
    data = json.loads((exercises / ".grade" / "report.partial.json").read_text(encoding="utf-8"))
    assert [(c["inner"], c["written"], c["graded"]) for c in data["graded"]["copies"]] == \
        [("ch4.ipynb", 7, True), ("ch4", 3, False)]
    code, out, err = grade(*shlex.split(command)[1:], "-k", "1", "--seed", "3")  # the other, as it says
    assert code == 0 and re.search(r"ex01_jit_forms\s+10/10", out), out


@pytest.mark.slow
def test_in_a_zip_the_other_copy_is_chosen_with_inside(tmp_path):
    archive = zipped(checkout(tmp_path / "work", modules=("ex01_jit_forms", "ex02_where"),
                              notebook=("ex03_static_args",)),
                     tmp_path / "hw.zip")
    code, out, err = grade(archive, "-k", "3", "--seed", "3")
    assert code == 0, err
    assert first_line(out).endswith(f"graded {archive}: exercises/ch4 (ex03_static_args.py)")
    command = re.search(r"To grade the other instead: (grade .*)$", note_lines(out)).group(1)
    assert shlex.split(command) == ["grade", str(archive), "--inside", "exercises/ch4.ipynb"]
    code, out, err = grade(*shlex.split(command)[1:], "-k", "3", "--seed", "3")
    assert code == 0 and first_line(out).endswith(f"graded {archive}: exercises/ch4.ipynb (a notebook)"), out + err
    assert re.search(r"ex03_static_args\s+10/10", out), out
    code, out, err = grade(archive, "--inside", "exercises/ch5", "-k", "3")
    assert code == 2 and len(err.splitlines()) == 1 and "--inside takes a folder" in err


@pytest.mark.slow
def test_a_batch_grades_the_same_copy_as_grade_does(tmp_path):
    """A student who hands in the whole ``exercises/`` folder: the batch grades the modules they filled,
    as ``grade`` does (one function decides, :func:`grader.copies.locate`)."""
    klass = tmp_path / "class"
    checkout(klass / "ada", modules=("ex01_jit_forms",))
    out = tmp_path / "results"
    code, _, err = grade("batch", klass, "--chapter", "ch4", "--out", out, "-k", "1", "--seed", "3",
                         "--sandbox", "process", "--allow-weak-sandbox")
    assert code == 0, err
    report = json.loads((out / "ada" / "report.partial.json").read_text(encoding="utf-8"))
    assert report["exercises"][0]["status"] == "passed" and report["submission"]["inner"] == "exercises/ch4"
    assert report["graded"]["path"].endswith("class/ada/exercises/ch4")


# ------------------------------------------------------------------ each zip its own report
@pytest.mark.slow
def test_the_folder_and_its_notebook_have_reports_of_their_own(tmp_path):
    """``grade exercises`` (its modules, ex01 answered) and ``grade exercises/ch4.ipynb`` (the notebook, ex02
    answered) wrote the same exercises/.grade/ and overwrote each other; check() in the kernel too."""
    exercises = checkout(tmp_path, modules=("ex01_jit_forms",))
    code, out, err = grade(exercises, "-k", "1", "-k", "2", "--seed", "3")  # the copy changed: the modules
    assert code == 0, err
    fill_notebook(exercises / "ch4.ipynb", ["ex02_where"])
    code, out, err = grade(exercises / "ch4.ipynb", "-k", "1", "-k", "2", "--seed", "3")
    assert code == 0, err
    folder = json.loads((exercises / ".grade" / "report.partial.json").read_text(encoding="utf-8"))
    notebook = json.loads((exercises / ".grade" / "ch4" / "report.partial.json").read_text(encoding="utf-8"))
    assert [e["score"] for e in folder["exercises"]] == [10, 0]  # the modules: ex01 answered, still there
    assert [e["score"] for e in notebook["exercises"]] == [0, 10]  # the notebook: ex02 answered
    assert notebook["submission"]["kind"] == "notebook" and folder["submission"]["path"] == str(exercises)


@pytest.mark.slow
def test_each_zip_in_a_folder_has_a_report_of_its_own(tmp_path):
    a = zipped(checkout(tmp_path / "a", modules=("ex01_jit_forms",)), tmp_path / "a.zip")
    b = zipped(checkout(tmp_path / "b"), tmp_path / "b.zip")
    outs = {}
    for archive in (a, b):
        code, out, err = grade(archive, "-k", "1", "--seed", "3")
        assert code == 0, err
        outs[archive.stem] = out
    for name, score in (("a", 10), ("b", 0)):
        folder = tmp_path / ".grade" / name
        report = json.loads((folder / "report.partial.json").read_text(encoding="utf-8"))
        assert report["score"] == score and report["submission"]["path"] == str(tmp_path / f"{name}.zip")
        assert f"written to {folder / 'report.partial.json'}" in outs[name]  # the path printed is where it is
    assert not (tmp_path / ".grade" / "report.partial.json").exists()


# ------------------------------------------------------------------ Next: where the work is
@pytest.mark.slow
def test_next_points_at_the_syntax_error_not_at_the_first_stub(tmp_path):
    folder = tmp_path / "my work" / "ch4"  # a space in the path: the Next line can still be pasted
    shutil.copytree(STUBS, folder, ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    (folder / "ex03_static_args.py").write_text("import jax\n\ndef poly(x, coeff:\n    return x\n", encoding="utf-8")
    code, out, err = grade(folder, "-k", "1", "-k", "3", "--seed", "3")
    assert code == 0, err
    nxt = first_line(out[out.index("\nNext:") + 1:])
    assert nxt.startswith("Next: ex03_static_args"), out  # it was ex01_jit_forms, not attempted
    path = shlex.split(nxt.split(": open ", 1)[1])
    assert path == [str(folder / "ex03_static_args.py")] and Path(path[0]).is_file()
    written = first_line(out[out.index("Partial report written"):])
    reports = re.findall(r"'[^']+'", written)
    assert reports and all(Path(shlex.split(r)[0]).is_file() for r in reports), written


@pytest.mark.slow
def test_a_passing_partial_run_points_to_the_next_exercise_not_yet_full(tmp_path):
    folder = tmp_path / "ch4"
    shutil.copytree(STUBS, folder, ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    shutil.copy(SOLUTIONS / "ex02_where.py", folder / "ex02_where.py")
    code, out, err = grade(folder, "-k", "ex02", "--seed", "3")
    assert code == 0, err
    assert "All checks passed" not in out  # it said so, with seven exercises still to do
    nxt = first_line(out[out.index("\nNext:") + 1:])
    assert re.fullmatch(r"Next: ex03_static_args .*open .*ex03_static_args\.py \(not graded in this run\)", nxt), out
    from grader.chapter import load_chapter

    ids = [ex.id for ex in load_chapter("ch4").exercises]  # the last full report: ex01 and ex03 done, ex04 partial
    full = {"schema": "grade-report/1", "exercises": [
        {"id": i, "status": {0: "passed", 2: "passed", 3: "partial"}.get(n, "not_attempted")}
        for n, i in enumerate(ids)]}
    (folder / ".grade" / "report.json").write_text(json.dumps(full), encoding="utf-8")
    code, out, err = grade(folder, "-k", "ex02", "--seed", "3")
    nxt = first_line(out[out.index("\nNext:") + 1:])
    assert re.fullmatch(r"Next: ex04_cache_keys .*\(not graded in this run\)", nxt), out


def test_next_prefers_the_work_started_to_the_work_not_started():
    from grader.chapter import load_chapter
    from grader.i18n import T
    from grader.report.common import next_exercise
    from grader.results import ExerciseResult, Report

    chapter = load_chapter("ch4")

    def result(ex, status, error=None, unrunnable=False):
        return ExerciseResult(id=ex.id, title=ex.title, section=ex.section, checks=[], status=status, error=error,
                              unrunnable=unrunnable)

    ex = chapter.exercises
    report = Report(chapter="ch4", chapter_title=chapter.title, seed=1, started_at="", duration_s=0, submission={},
                    environment={}, exercises=[result(ex[0], "not_attempted"), result(ex[1], "passed"),
                                               result(ex[2], "partial"),
                                               result(ex[3], "error", T("job.file_missing", file="x"), True),
                                               result(ex[4], "error", T("job.import_error", file="x", type="E",
                                                                        message="", where="x:1"), True)])
    assert next_exercise(report) == ex[4].id  # code that does not import first
    report.exercises.pop()
    assert next_exercise(report) == ex[2].id  # then work started
    report.exercises.pop(2)
    assert next_exercise(report) == ex[3].id  # then a missing file, then what is not attempted
    # an exercise that ran past its time limit (an endless loop) is where the student is stuck: before work
    # merely started elsewhere (it pointed at ex01 after a 90 s timeout)
    report.exercises[1] = result(ex[1], "partial")
    report.exercises.append(result(ex[5], "timeout", T("job.timeout", seconds=90)))
    assert next_exercise(report) == ex[5].id


def test_a_quoted_path_is_never_broken_across_lines():
    from grader.report.textwidth import wrap

    lines = wrap("Next: ex03 (Static arguments): open '/home/ada/my work/ex03.py' now", 50, "", "  ")
    assert lines == ["Next: ex03 (Static arguments): open", "  '/home/ada/my work/ex03.py' now"]
    assert wrap("the student's work isn't done", 12) == ["the", "student's", "work isn't", "done"]


# ------------------------------------------------------------------ watch mode, on a terminal
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class OnATerminal:
    """``grade FOLDER --watch`` with a terminal for its output (a pseudo-terminal: colours, redraws),
    its lines read as they come, colours taken out."""

    def __init__(self, folder: Path, *args: str):
        import os
        import pty
        import subprocess
        import sys
        import threading

        master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from grader.cli import main; sys.exit(main())", str(folder),
             "--watch", *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
            env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "160"})
        os.close(slave)
        self.lines: list[str] = []
        self._master = master
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        import os

        buffer = b""
        while True:
            try:
                data = os.read(self._master, 65536)
            except OSError:
                return
            if not data:
                return
            buffer += data
            *done, buffer = buffer.split(b"\n")
            self.lines += [ANSI.sub("", line.decode("utf-8", "replace")).replace("\r", "") for line in done]

    def wait_for(self, text: str, after: int = 0, timeout: float = 180) -> int:
        """The index of the first line from ``after`` on that holds ``text``."""
        import time

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for i in range(after, len(self.lines)):
                if text in self.lines[i]:
                    return i
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never came:\n" + "\n".join(self.lines[after:][-80:]))

    def stop(self) -> None:
        import signal

        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=20)


@pytest.mark.slow
def test_watch_shows_why_first_and_one_next_line_per_save(tmp_path):
    folder = tmp_path / "ch4"
    shutil.copytree(STUBS, folder, ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    (folder / "ex02_where.py").write_text(variant("ex02_where", "nan_on_zero_sum"), encoding="utf-8")
    watching = OnATerminal(folder, "-k", "2", "-k", "3", "--seed", "5", "--lang", "en")
    try:
        first = watching.wait_for("Watching")
        screen = watching.lines[:first]
        assert any(line.strip().startswith("Hint:") for line in screen), "\n".join(screen)  # why ex02 is partial
        assert any("normalize_if_positive.values" in line for line in screen)
        assert [line for line in screen if line.startswith("Next:")] == \
            [line for line in screen if line.startswith("Next: ex02_where")]
        (folder / "ex03_static_args.py").write_text("import jax\n\ndef poly(x, coeff:\n", encoding="utf-8")
        regraded = watching.wait_for("re-graded in", after=first)
        end = watching.wait_for("Watching", after=regraded)
        after_save = watching.lines[regraded:end]
        nexts = [line for line in after_save if line.startswith("Next")]
        assert len(nexts) == 1 and nexts[0].startswith("Next: ex03_static_args"), "\n".join(after_save)
        assert any("ex03_static_args.py has a syntax error at line 3" in line for line in after_save)
        said = " ".join(" ".join(after_save).split())
        assert "fix the syntax error there and save" in said and "run grade again" not in said, said  # saving is enough
        shutil.copy(SOLUTIONS / "ex03_static_args.py", folder / "ex03_static_args.py")  # fixed: it passes
        again = watching.wait_for("re-graded in", after=end)
        last = watching.wait_for("Watching", after=again)
        screen = watching.lines[end:last]
        full = [line for line in screen if re.search(r"ex03_static_args\s+10/\s*10", line)]
        assert len(full) == 1, "\n".join(screen)  # its line once: not the list and a table again
    finally:
        watching.stop()
    assert not any("Traceback" in line for line in watching.lines)


# ------------------------------------------------------------------ the README and --help name what is written
REPORT_FILE = re.compile(r"\breport(?:\.partial)?\.(?:json|md|html)\b")


@pytest.mark.slow
def test_the_readme_and_help_name_every_report_file_written(tmp_path):
    folder = tmp_path / "ch4"
    shutil.copytree(STUBS, folder, ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    for args in ((), ("-k", "1")):
        code, out, err = grade(folder, *args, "--seed", "3")
        assert code == 0, err
    written = {p.name for p in (folder / ".grade").iterdir() if p.name.startswith("report")}
    assert written == {f"report{p}.{s}" for p in ("", ".partial") for s in ("json", "md", "html")}
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    english, chinese = readme.split("\n## 中文\n")
    _, help_text, _ = grade("--help")
    _, check_help, _ = grade("check", "--help")
    report_dir_help = check_help.split("--report-dir", 1)[1].split("\n  -", 1)[0]
    for where, text in (("README (English)", english), ("README (中文)", chinese), ("grade --help", help_text),
                        ("--report-dir's help", report_dir_help)):
        assert set(REPORT_FILE.findall(text)) == written, where


# ------------------------------------------------------------------ where the path was silent
def test_a_typo_in_the_path_names_the_path_meant(tmp_path, monkeypatch):
    exercises = checkout(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, err = grade("exercise/ch4")  # it said only: no such file or folder
    assert code == 2 and err == "grade: error: exercise/ch4: no such file or folder; did you mean exercises/ch4?\n"
    code, out, err = grade("exercises/ch4/ex2_where.py")
    assert code == 2 and err.rstrip().endswith("did you mean exercises/ch4/ex02_where.py?")
    assert (exercises / "ch4" / "ex02_where.py").is_file()
    code, out, err = grade("elsewhere/ch4")  # nothing near: the plain message
    assert code == 2 and "did you mean" not in err and "no such file or folder" in err


@pytest.mark.slow
def test_grading_one_exercise_file_grades_that_exercise(tmp_path):
    folder = tmp_path / "ch4"
    shutil.copytree(STUBS, folder, ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    shutil.copy(SOLUTIONS / "ex02_where.py", folder / "ex02_where.py")
    code, out, err = grade(folder / "ex02_where.py", "--seed", "3")  # it was: expected a folder, ...
    assert code == 0, err
    assert first_line(out).startswith("Partial run: 1 of 8 exercises (ex02_where). Chapter 4: JIT basics: 10 / 10")
    assert (folder / ".grade" / "report.partial.json").is_file()


def test_a_python_file_that_is_no_exercise_says_what_to_grade(tmp_path):
    folder = tmp_path / "ch4"
    shutil.copytree(STUBS, folder, ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    (folder / "scratch.py").write_text("x = 1\n", encoding="utf-8")
    code, out, err = grade(folder / "scratch.py")
    assert code == 2 and len(err.splitlines()) == 1
    assert "scratch.py is not one of chapter ch4's exercise files" in err and err.rstrip().endswith(f"grade {folder}")
