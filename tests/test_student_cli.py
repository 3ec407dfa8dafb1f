"""What a new student saw, command by command (issue 7, items 4, 6, 7, 8 and 9).

Each test runs ``grade`` as a student does (``grader.cli.main``), then looks at what
it printed and what the reports hold. Real grading is done once per module fixture
(one exercise, a few seconds); the option tests replay its report through the
command line without grading again.
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import shutil
import subprocess
import unicodedata
import zipfile
from pathlib import Path

import nbformat
import pytest

from conftest import FULL, ROOT, SOLUTIONS, STUBS, variant

from grader.cli import main
from grader.report.render import render_terminal

WIDE = "200"


@pytest.fixture(autouse=True)
def english(monkeypatch):
    for var in ("LC_ALL", "LC_MESSAGES", "LANGUAGE", "GRADE_SIGN_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    monkeypatch.setenv("COLUMNS", WIDE)


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_quietly(*args) -> tuple[int, str, str]:
    """``run`` for module fixtures, which have no capsys."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------ fixtures: real grading, once
@pytest.fixture(scope="module")
def partial_run(tmp_path_factory):
    """``grade ch4 -k ex02 --sign-key KEY`` on a submission whose ex02 divides by a zero sum,
    in a folder that already holds the full report of an earlier run."""
    import grader.grading

    base = tmp_path_factory.mktemp("partial")
    folder = base / "ch4"
    shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns(".grade"))
    (folder / "ex02_where.py").write_text(variant("ex02_where", "nan_on_zero_sum"), encoding="utf-8")
    (folder / ".grade").mkdir()
    full = {"report.json": '{"schema": "grade-report/1", "score": 80, "max_score": 80}\n',
            "report.md": "# Chapter 4: JIT basics: 80 / 80\n"}
    for name, text in full.items():
        (folder / ".grade" / name).write_text(text, encoding="utf-8")
    key = base / "grading.key"
    key.write_text("k" * 32, encoding="utf-8")
    key.chmod(0o600)  # a key others may read is refused (issue 27)
    reports = []
    real_grade = grader.grading.grade

    def recording_grade(*args, **kwargs):
        reports.append(real_grade(*args, **kwargs))
        return reports[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LANG", "en_US.UTF-8")
        mp.setenv("COLUMNS", WIDE)
        mp.setattr(grader.grading, "grade", recording_grade)
        code, out, err = run_quietly(folder, "-k", "ex02", "--sign-key", key, "--seed", "5")
    return {"code": code, "out": out, "err": err, "folder": folder, "key": key, "full": full,
            "report": reports[0]}


@pytest.fixture
def replay(partial_run, monkeypatch):
    """Later ``grade`` commands get the partial run's report without grading again."""
    import grader.grading

    monkeypatch.setattr(grader.grading, "grade", lambda *a, **k: copy.deepcopy(partial_run["report"]))
    return partial_run


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory):
    """A folder with one file, of a syntax error, and seven files missing (nothing runs)."""
    folder = tmp_path_factory.mktemp("broken") / "ch4"
    folder.mkdir()
    (folder / "ex02_where.py").write_text("import jax\n\ndef piecewise(x:\n    pass\n", encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LANG", "en_US.UTF-8")
        mp.setenv("COLUMNS", WIDE)
        code, out, err = run_quietly(folder)
    return {"code": code, "out": out, "err": err, "folder": folder}


# ------------------------------------------------------------------ 4: a module that cannot run is one line
def exercise_lines(out: str) -> dict[str, list[str]]:
    """The table's lines by exercise id (an exercise's line and the lines under it)."""
    table: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines()[2:]:
        match = re.match(r"^ \S (ex\d\d_\w+) ", line)
        if match:
            current = match.group(1)
        elif not line.startswith("  "):
            current = None
        if current:
            table.setdefault(current, []).append(line)
    return table


@pytest.mark.slow
def test_syntax_error_and_missing_files_are_one_line_each_without_hints(broken_run):
    out = broken_run["out"]
    assert broken_run["code"] == 0, broken_run["err"]
    table = {ex: " ".join(line.strip() for line in lines) for ex, lines in exercise_lines(out).items()}
    assert len(table) == 8 and all(len(lines) <= 2 for lines in exercise_lines(out).values()), out
    assert all(entry.endswith("run grade again") and entry.count(";") == 1 for entry in table.values()), out
    assert "Hint" not in out and "Seen" not in out and "jnp.where(" not in out
    ex02 = table["ex02_where"]
    assert "ex02_where.py has a syntax error at line 3" in ex02 and "fix the syntax error" in ex02
    ex03 = table["ex03_static_args"]
    assert "ex03_static_args.py is missing" in ex03 and "copy it from" in ex03
    assert str(Path("exercises") / "ch4" / "ex03_static_args.py") in ex03
    assert "?" not in out.split("Next:")[1].splitlines()[1]  # no "? (?), JAX ?, Python ?"
    assert len(out.splitlines()) <= 8 * 2 + 8  # it was 197


@pytest.mark.slow
def test_report_md_of_a_module_that_cannot_run_has_no_checks(broken_run):
    md = (broken_run["folder"] / ".grade" / "report.md").read_text(encoding="utf-8")
    assert "Hint" not in md and "| Check |" not in md
    assert "fix the syntax error there and run grade again" in md
    data = json.loads((broken_run["folder"] / ".grade" / "report.json").read_text(encoding="utf-8"))
    assert {e["status"] for e in data["exercises"]} == {"error"}  # the report holds the same verdicts


# ------------------------------------------------------------------ 6: grade dev stubs keeps a student's work
def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True,
                   capture_output=True)


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A student's checkout: the chapter's solutions, stubs and notebook committed; ``grade
    dev stubs`` works on it."""
    import dataclasses

    import grader.cli.dev
    from grader.chapter import load_chapter

    root = tmp_path / "course"
    for folder, source in (("solutions", SOLUTIONS), ("exercises", STUBS)):
        shutil.copytree(source, root / folder / "ch4", ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    shutil.copy(STUBS.parent / "ch4.ipynb", root / "exercises" / "ch4.ipynb")
    chapter = dataclasses.replace(load_chapter("ch4"), solutions=root / "solutions" / "ch4",
                                  stubs=root / "exercises" / "ch4")
    monkeypatch.setattr(grader.cli.dev, "load_chapter", lambda chapter_id: chapter)
    return root


def commit(root: Path) -> None:
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "course")


def test_dev_stubs_refuses_to_overwrite_a_students_work(checkout, capsys):
    commit(checkout)
    work = checkout / "exercises" / "ch4" / "ex02_where.py"
    answer = work.read_text(encoding="utf-8").replace('raise NotImplementedError("ex02: piecewise")',
                                                      "return jnp.where(x > 0, x * x, 0.5 * x)")
    work.write_text(answer, encoding="utf-8")
    code, out, err = run(capsys, "dev", "stubs")
    assert code == 1
    assert work.read_text(encoding="utf-8") == answer
    assert not [p.name for p in work.parent.iterdir() if ".bak-" in p.name]
    lines = err.splitlines()
    assert len(lines) == 1 and str(work) in lines[0]
    assert "--force" in lines[0] and "nothing was written" in lines[0]


def test_dev_stubs_force_keeps_a_backup(checkout, capsys):
    commit(checkout)
    work = checkout / "exercises" / "ch4" / "ex02_where.py"
    work.write_text("# my answer\n", encoding="utf-8")
    code, out, err = run(capsys, "dev", "stubs", "--force")
    assert code == 0, err
    assert work.read_text(encoding="utf-8") == (STUBS / "ex02_where.py").read_text(encoding="utf-8")
    backups = list(work.parent.glob("ex02_where.py.bak-*"))
    assert len(backups) == 1 and backups[0].read_text(encoding="utf-8") == "# my answer\n"
    assert str(backups[0]) in out


def test_dev_stubs_replaces_an_old_stub_after_a_solution_changes(checkout, capsys):
    commit(checkout)
    solution = checkout / "solutions" / "ch4" / "ex02_where.py"
    solution.write_text(solution.read_text(encoding="utf-8").replace("Run:", "Run it:"), encoding="utf-8")
    code, out, err = run(capsys, "dev", "stubs")
    assert code == 0, err
    stub = checkout / "exercises" / "ch4" / "ex02_where.py"
    assert "Run it:" in stub.read_text(encoding="utf-8")
    assert not list(stub.parent.glob("*.bak-*")) and not list(stub.parent.parent.glob("*.bak-*"))
    assert f"wrote {stub}" in out
    notebook = checkout / "exercises" / "ch4.ipynb"  # an old notebook too: replaced without asking
    assert f"wrote {notebook}" in out and "Run it:" in notebook.read_text(encoding="utf-8")


def test_dev_stubs_without_every_solution_writes_the_stubs_and_says_why_not_the_notebook(checkout, capsys):
    commit(checkout)
    (checkout / "solutions" / "ch4" / "ex01_jit_forms.py").unlink()
    (checkout / "exercises" / "ch4" / "ex02_where.py").unlink()
    code, out, err = run(capsys, "dev", "stubs", "--lang", "en")
    assert code == 0, err
    assert (checkout / "exercises" / "ch4" / "ex02_where.py").is_file()
    assert err.splitlines() == [f"{checkout / 'exercises' / 'ch4.ipynb'} is not generated: 1 solution module(s) "
                                f"of the chapter missing, such as "
                                f"{checkout / 'solutions' / 'ch4' / 'ex01_jit_forms.py'}"
                                f"; the stubs of the others are"]


def test_dev_stubs_without_git_cannot_tell_an_old_stub_from_work(checkout, capsys):
    solution = checkout / "solutions" / "ch4" / "ex02_where.py"
    solution.write_text(solution.read_text(encoding="utf-8").replace("Run:", "Run it:"), encoding="utf-8")
    before = (checkout / "exercises" / "ch4" / "ex02_where.py").read_text(encoding="utf-8")
    code, out, err = run(capsys, "dev", "stubs")
    assert code == 1 and "ex02_where.py" in err
    assert (checkout / "exercises" / "ch4" / "ex02_where.py").read_text(encoding="utf-8") == before


# ------------------------------------------------------------------ 7: a partial run is a partial report
@pytest.mark.slow
def test_partial_run_leaves_the_full_report_alone(partial_run):
    assert partial_run["code"] == 0, partial_run["err"]
    grade_dir = partial_run["folder"] / ".grade"
    for name, text in partial_run["full"].items():
        assert (grade_dir / name).read_text(encoding="utf-8") == text
    assert (grade_dir / "report.partial.json").exists() and (grade_dir / "report.partial.md").exists()


@pytest.mark.slow
def test_partial_report_says_so_on_its_first_line(partial_run):
    grade_dir = partial_run["folder"] / ".grade"
    first = "Partial run: 1 of 8 exercises (ex02_where)"
    assert partial_run["out"].splitlines()[0].startswith(first)
    assert (grade_dir / "report.partial.md").read_text(encoding="utf-8").startswith(f"# {first}")
    data = json.loads((grade_dir / "report.partial.json").read_text(encoding="utf-8"))
    assert data["partial"] is True and data["selected"] == ["ex02_where"] and data["chapter_exercises"] == 8
    assert data["title"].startswith(first)
    assert list(data)[:3] == ["schema", "title", "partial"]  # on the file's first lines too
    assert "report.partial.json" in partial_run["out"] and "report.partial.md" in partial_run["out"]


@pytest.mark.slow
def test_signed_partial_report_verifies_as_partial_and_its_flag_is_signed(partial_run, capsys, tmp_path):
    report = partial_run["folder"] / ".grade" / "report.partial.json"
    code, out, err = run(capsys, "verify", report, "--key", partial_run["key"])
    assert code == 0, err
    assert "valid signature" in out and "PARTIAL" in out and "1 of 8 exercises" in out
    assert "8.5 / 10 for these exercises only" in out
    forged = json.loads(report.read_text(encoding="utf-8"))
    forged["partial"] = False
    (tmp_path / "forged.json").write_text(json.dumps(forged), encoding="utf-8")
    code, out, err = run(capsys, "verify", tmp_path / "forged.json", "--key", partial_run["key"])
    assert code == 1 and "INVALID" in err


def test_a_partial_report_signed_before_the_flag_existed_verifies_as_partial(capsys, tmp_path):
    from grader.signing import sign

    key = tmp_path / "grading.key"
    key.write_text("k" * 32, encoding="utf-8")
    key.chmod(0o600)
    old = {"schema": "grade-report/1", "chapter": "ch4", "score": 10, "max_score": 10,
           "exercises": [{"id": "ex02_where", "score": 10, "max_score": 10}]}
    (tmp_path / "report.json").write_text(json.dumps(sign(old, b"k" * 32)), encoding="utf-8")
    code, out, err = run(capsys, "verify", tmp_path / "report.json", "--key", key)
    assert code == 0 and "PARTIAL" in out and "1 of 8 exercises (ex02_where)" in out


# ------------------------------------------------------------------ 8: names, help and --fail-under
def make_zip(path: Path, members: dict[str, Path]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, source in members.items():
            archive.write(source, name)
    return path


def make_notebook(path: Path, exercises: list[str]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 第 4 章作业")]
    nb.cells += [nbformat.v4.new_code_cell((SOLUTIONS / f"{ex}.py").read_text(encoding="utf-8")) for ex in exercises]
    nbformat.write(nb, str(path))
    return path


@pytest.mark.slow
def test_a_zip_of_exercises_named_homework_grades(capsys, tmp_path):
    archive = make_zip(tmp_path / "homework.zip", {f"exercises/ch4/{p.name}": p for p in SOLUTIONS.glob("*.py")})
    code, out, err = run(capsys, archive, "-k", "3", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["chapter"] == "ch4" and report["submission"]["kind"] == "zip+folder"
    assert report["exercises"][0]["status"] == "passed"


@pytest.mark.slow
def test_my_homework_notebook_grades(capsys, tmp_path):
    notebook = make_notebook(tmp_path / "my_homework.ipynb", ["ex01_jit_forms"])
    code, out, err = run(capsys, notebook, "-k", "1", "--json")
    assert code == 0, err
    assert json.loads(out)["exercises"][0]["status"] == "passed"


@pytest.mark.parametrize("kind", ["flat zip", "zip of exercises", "notebook", "folder with a notebook"])
def test_the_chapter_is_told_from_the_contents(tmp_path, two_chapters, kind):
    from grader.submission import resolve_chapter

    files = {p.name: p for p in SOLUTIONS.glob("*.py")}
    if kind == "flat zip":
        path = make_zip(tmp_path / "homework.zip", files)
    elif kind == "zip of exercises":
        path = make_zip(tmp_path / "exercises.zip", {f"exercises/ch4/{n}": p for n, p in files.items()})
    elif kind == "notebook":
        path = make_notebook(tmp_path / "my_homework.ipynb", ["ex02_where", "ex07_pitfalls"])
    else:
        path = tmp_path / "homework"
        path.mkdir()
        make_notebook(path / "answers.ipynb", ["ex03_static_args"])
    assert resolve_chapter(path, None).id == "ch4"


@pytest.mark.parametrize("name, what", [("homework.zip", "the file 'homework.zip'"),
                                        ("my_homework.ipynb", "the file 'my_homework.ipynb'"),
                                        ("homework", "the folder 'homework'")])
def test_an_undecidable_chapter_calls_a_file_a_file(capsys, tmp_path, two_chapters, name, what):
    path = tmp_path / name
    if name.endswith(".zip"):
        make_zip(path, {"notes.py": SOLUTIONS / "ex01_jit_forms.py"})
    elif name.endswith(".ipynb"):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("x = 1")]
        nbformat.write(nb, str(path))
    else:
        path.mkdir()
    code, out, err = run(capsys, path)
    assert code == 2 and len(err.splitlines()) == 1
    assert f"cannot tell which chapter {what} is for" in err and "pass --chapter" in err
    assert "name the folder" not in err


def test_grade_help_lists_the_grading_options(capsys):
    code, out, err = run(capsys, "--help")
    assert code == 0
    for option in ("-k, --exercise", "--fail-under", "--report-dir", "--seed", "--lang", "--json", "--chapter",
                   "--sign-key"):
        assert option in out, option
    commands = [line for line in out.split("Commands:")[1].splitlines() if line.strip()]
    assert {line.split()[0] for line in commands} == {"batch", "check", "dev", "similarity", "verify"}
    assert not any(line.rstrip().endswith("...") for line in commands), commands


@pytest.mark.parametrize("argv", [["dev", "--help"], ["verify", "--help"], ["dev", "validate", "--help"],
                                  ["batch", "--help"]])
def test_other_help_is_not_cut_off(capsys, argv):
    code, out, err = run(capsys, *argv)
    body = out.split("\n", 1)[1]  # after the usage line, which ends in [ARGS]...
    assert code == 0 and not any(line.rstrip().endswith("...") for line in body.splitlines())
    if argv[1:] == ["validate", "--help"]:
        assert re.search(r"--seed INTEGER RANGE\s+\S", out)


def test_fail_under_help_says_points_or_percentage(capsys):
    out = run(capsys, "check", "--help")[1]
    assert re.search(r"--fail-under[\s\S]*points[\s\S]*percentage", out)


@pytest.mark.slow
@pytest.mark.parametrize("bar, code", [("90%", 1), ("85%", 0), ("9", 1), ("8.5", 0)])
def test_fail_under_takes_points_or_a_percentage_and_says_why(replay, capsys, tmp_path, bar, code):
    got, out, err = run(capsys, replay["folder"], "-k", "ex02", "--report-dir", tmp_path, "--fail-under", bar)
    assert got == code
    if code:
        assert err.splitlines() == [f"grade: score 8.5 / 10 is below --fail-under {bar}"
                                    + (" (9 / 10)" if bar.endswith("%") else "")]
    else:
        assert err == ""


@pytest.mark.parametrize("bar", ["abc", "150%", "-3"])
def test_a_bad_fail_under_is_one_line(capsys, bar):
    code, out, err = run(capsys, STUBS, "--fail-under", bar)
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("grade: error: ")


# ------------------------------------------------------------------ 9: display
def display_width(line: str) -> int:
    """Terminal columns: wide and fullwidth characters (Chinese) take two."""
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in line)


@pytest.mark.slow
def test_chinese_lines_fit_the_terminal(replay, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    code, out, err = run(capsys, replay["folder"], "-k", "ex02", "--lang", "zh", "--report-dir", tmp_path)
    assert code == 0, err
    table = out.split("部分评测的报告已写入")[0].splitlines()
    assert any(re.search(r"[\u4e00-\u9fff]", line) for line in table[3:])
    assert max(display_width(line) for line in table) <= 60, "\n".join(table)


@pytest.mark.slow
def test_the_hint_line_stands_out(replay):
    from grader.chapter import load_chapter

    text = render_terminal(replay["report"], load_chapter("ch4").catalog, "en", color=True, width=100)
    hint = next(line for line in text.splitlines() if "Hint" in line)
    assert "\x1b[2m" not in hint  # not dimmed
    assert re.search(r"\x1b\[(36|1)m", hint.split("Hint")[0])  # its label in colour


@pytest.mark.slow
def test_a_wrapped_check_title_continues_deeper(replay, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "70")
    out = run(capsys, replay["folder"], "-k", "ex02", "--report-dir", tmp_path)[1].splitlines()
    first = next(i for i, line in enumerate(out) if "✗ normalize_if_positive.values" in line)
    text_starts = out[first].index("✗") + 2
    following = out[first + 1]
    assert not following.lstrip().startswith("Seen"), "the title should wrap at 70 columns"
    assert len(following) - len(following.lstrip()) > text_starts


@pytest.mark.slow
def test_next_names_the_file_and_the_end_names_both_reports(partial_run):
    lines = partial_run["out"].splitlines()
    folder = partial_run["folder"]
    # the line as a reader reads it: wrapped at the terminal's width (120 at most), where a long temporary folder
    # (pytest-xdist's adds one) puts the path on a line of its own
    start = next(i for i, line in enumerate(lines) if line.startswith("Next: ex02_where"))
    end = next((j for j in range(start + 1, len(lines)) if not lines[j].startswith("  ")), len(lines))
    assert " ".join(line.strip() for line in lines[start:end]).endswith(f"open {folder / 'ex02_where.py'}"), \
        lines[start:end]
    written = next(line for line in lines if "written to" in line)
    assert str(folder / ".grade" / "report.partial.json") in written
    assert str(folder / ".grade" / "report.partial.md") in written


@pytest.mark.slow
def test_sign_key_says_the_report_was_signed(partial_run):
    from grader.signing import key_id, read_key

    signed = partial_run["out"].splitlines()[-1]
    assert signed.startswith("Report signed (HMAC-SHA256, key ")
    assert key_id(read_key(partial_run["key"])) in signed and "grade verify" in signed


def test_readme_sample_shows_the_real_totals():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sample = readme.split("## Reading the report")[1].split("```")[1]
    title = sample.strip().splitlines()[0]
    score, total = re.search(r": ([\d.]+) / (\d+)(?: — graded \S+ \(8 \.py files\))?$", title).groups()
    rows = re.findall(r"^ \S (ex\d\d_\w+)\s+([\d.]+)/(\d+) ", sample, re.M)
    assert len(rows) == 8 and float(total) == sum(float(r[2]) for r in rows) == FULL
    assert float(score) == sum(float(r[1]) for r in rows)
    assert re.search(r"Hint: .*?\(section \d\)", re.sub(r"\s+", " ", sample))
