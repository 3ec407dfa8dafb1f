"""Unit tests of grader/cli.py: user mistakes that fail before any grading starts."""
from __future__ import annotations

from pathlib import Path

import pytest

from grader import __version__
from grader.cli import main

ROOT = Path(__file__).resolve().parent.parent
STUBS = ROOT / "exercises" / "ch4"


@pytest.fixture(autouse=True)
def english(monkeypatch):
    for var in ("LC_ALL", "LC_MESSAGES", "LANGUAGE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "en_US.UTF-8")


@pytest.fixture(autouse=True)
def no_grading(monkeypatch):
    """Reading the submission (the step before any child process) fails the test at once."""
    import grader.submission

    def refuse(*args, **kwargs):
        raise AssertionError("grading went past its checks of the command line")

    monkeypatch.setattr(grader.submission, "load", refuse)


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("grade: error: ")
    return lines[0]


def test_missing_path(capsys, tmp_path):
    missing = tmp_path / "nowhere"
    assert main([str(missing)]) == 2
    line = one_error_line(capsys)
    assert f"{missing}: no such file or folder" in line


def test_missing_path_in_chinese(capsys, tmp_path):
    assert main([str(tmp_path / "nowhere"), "--lang", "zh"]) == 2
    assert "文件或文件夹不存在" in one_error_line(capsys)


def test_missing_path_with_explicit_check_command(capsys, tmp_path):
    assert main(["check", str(tmp_path / "nowhere")]) == 2
    one_error_line(capsys)


@pytest.mark.parametrize("argv", [
    [str(STUBS), "--no-such-option"],
    ["--no-such-option"],
    [str(STUBS), "--lang", "fr"],
    [str(STUBS), "--seed", "-5"],
    [str(STUBS), "--timeout", "0"],
])
def test_bad_options(capsys, argv):
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert line.endswith("(see grade --help)")


def test_unknown_exercise(capsys):
    assert main([str(STUBS), "-k", "99"]) == 2
    line = one_error_line(capsys)
    assert "no exercise '99' in chapter ch4" in line
    assert "ex01_jit_forms" in line


def test_unknown_chapter(capsys):
    assert main([str(STUBS), "--chapter", "ch99"]) == 2
    assert "ch99" in one_error_line(capsys)


def test_folder_of_no_chapter(capsys, tmp_path, two_chapters):
    bob = tmp_path / "bob"
    bob.mkdir()
    assert main([str(bob)]) == 2
    line = one_error_line(capsys)
    assert "cannot tell which chapter the folder 'bob' is for" in line and "pass --chapter" in line


def test_dev_unknown_chapter(capsys):
    assert main(["dev", "stubs", "ch99", "--check"]) == 2
    assert "ch99" in one_error_line(capsys)


def test_version(capsys):
    assert main(["--version"]) == 0
    captured = capsys.readouterr()
    assert __version__ in captured.out and captured.err == ""


def test_help(capsys):
    assert main(["--help"]) == 0
    captured = capsys.readouterr()
    assert "grade exercises/ch4" in captured.out and captured.err == ""


def test_dev_stubs_check_passes_on_the_repository(capsys):
    assert main(["dev", "stubs", "--check"]) == 0
    assert "ch4: stubs match their solutions" in capsys.readouterr().out


def test_no_arguments_gives_help_or_one_line(capsys):
    code = main([])
    captured = capsys.readouterr()
    if code == 0:
        assert "grade exercises/ch4" in captured.out
    else:
        assert code == 2
        assert len(captured.err.splitlines()) == 1


def test_ctrl_c_inside_a_class_being_made_is_an_interruption_not_a_grader_error(monkeypatch, capsys):
    """Ctrl-C as a module is imported can land in a dataclass field's ``__set_name__``, and Python 3.11 wraps
    what that raises in a RuntimeError (the KeyboardInterrupt its cause): still "interrupted", status 130 (it
    was once "internal error in the grader", status 3, in test_ctrl_c's SIGINT 0.3 s in)."""
    from grader.cli import app

    class Interrupts:
        def __set_name__(self, owner, name):
            raise KeyboardInterrupt

    def imports(*args, **kwargs):
        type("Made", (), {"field": Interrupts()})

    monkeypatch.setattr(app.cli, "main", imports)
    assert app.main(["check", "somewhere"]) == 130
    err = capsys.readouterr().err
    assert "grade: interrupted" in err and "internal error" not in err


@pytest.mark.parametrize("lang, says", [("en", "interrupted before this run graded any student"),
                                        ("zh", "已中断：本次运行尚未为任何学生评分")])
def test_ctrl_c_before_a_batch_is_planned_says_how_to_resume(monkeypatch, capsys, tmp_path, lang, says):
    """Ctrl-C while the batch probes the sandbox and reads the download (before run_batch has a partial result) is
    the batch's own line, how to resume, and 130: under load tests/test_ctrl_c.py's Ctrl-C 1 s in landed there, and
    the batch said only ``grade: interrupted``."""
    import grader.batch.run

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(grader.batch.run, "run_batch", interrupted)
    monkeypatch.setenv("GRADER_BUILD", "0")
    klass = tmp_path / "class"
    (klass / "ann").mkdir(parents=True)
    code = main(["batch", str(klass), "--chapter", "ch4", "--out", str(tmp_path / "out"), "--lang", lang])
    err = capsys.readouterr().err
    assert code == 130 and says in err and str(tmp_path / "out") in err and "Traceback" not in err, err
    assert "grade: interrupted" not in err
