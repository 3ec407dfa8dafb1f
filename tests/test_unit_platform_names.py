"""The names the platforms write, by their own source (grader/platform_names.py), and what the batch
does with them: the row each belongs to, or a blank with a reason. Each rule's examples are the
source's own where it has tests of them (moodle/moodle lib/tests/moodlelib_test.php,
``test_clean_param_file``), else built by the rule as the source states it."""
from __future__ import annotations

import csv
import io
import re
import zipfile
from pathlib import Path

import pytest

from test_unit_platforms import _canvas_import_header, _moodle_import

from grader import platform_names as names
from grader.batch import filling, gradebook, layouts, worksheets
from grader.batch.gradebook import Row
from grader.i18n import grader_catalog

words = lambda text: grader_catalog().render(text, "en")  # noqa: E731


def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, (2026, 12, 1, 10, 0, 0)), data)
    return path


def _sheet(path: Path, header: list[str], rows: list[list[str]], newline: str = "\r\n") -> Path:
    out = io.StringIO()
    csv.writer(out, lineterminator=newline).writerows([header, *rows])
    path.write_bytes(b"\xef\xbb\xbf" + out.getvalue().encode("utf-8"))
    return path


def _graded(student, total: float) -> Row:
    report = {"title": f"Chapter 4: JIT basics: {total:g} / 80 — graded /home/teacher/class/{student.name}",
              "score_line": f"Chapter 4: JIT basics: {total:g} / 80", "score": total, "exercises": []}
    return Row(student.name, "completed", report=report, scores={"ex01": total}).of(student)


MOODLE_EN = ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade", "Grade can be changed",
             "Last modified (submission)", "Last modified (grade)", "Feedback comments"]


# ------------------------------------------------------------------ Moodle's clean_param(PARAM_FILE)
@pytest.mark.parametrize("given, cleaned", [  # moodlelib_test.php, test_clean_param_file, every case
    ("correctfile.txt", "correctfile.txt"), ("b'a<d`\\/fi:l>e.t\"x|t", "badfile.txt"),
    ("../parentdirfile.txt", "..parentdirfile.txt"), ("../../grandparentdirfile.txt", "....grandparentdirfile.txt"),
    ("..\\winparentdirfile.txt", "..winparentdirfile.txt"),
    ("..\\..\\wingrandparentdir.txt", "....wingrandparentdir.txt"),
    ("myfile.a.b.txt", "myfile.a.b.txt"), ("myfile..a..b.txt", "myfile..a..b.txt"),
    ("myfile.a..b...txt", "myfile.a..b...txt"), ("myfile.a.txt", "myfile.a.txt"), ("myfile...txt", "myfile...txt"),
    ("...jpg", "...jpg"), (".a.b.", ".a.b."), (".", ""), ("..", ""), ("...", "..."), (". . . .", ". . . ."),
    ("dontrtrim.me. .. .. . ", "dontrtrim.me. .. .. . "), (" . .dontltrim.me", " . .dontltrim.me"),
    ("here is a tab\t.txt", "here is a tab.txt"), ("here is a line\r\nbreak.txt", "here is a linebreak.txt"),
    ("funny:thing", "funnything"), ("./currentdirfile.txt", ".currentdirfile.txt"),
    ("c:\\temp\\windowsfile.txt", "ctempwindowsfile.txt"), ("/home/user/linuxfile.txt", "homeuserlinuxfile.txt"),
    ("~/myfile.txt", "~myfile.txt"),
    # and what the regular expression says beside them: & and ' go, * and ? (Windows's) stay
    ("R&D", "RD"), ("a*b?c", "a*b?c"),
])
def test_moodles_clean_filename_is_clean_param_file(given, cleaned):
    assert names.moodle_clean_filename(given) == cleaned


def test_moodle_writes_a_participants_and_a_teams_folder():
    """downloader::get_student_prefix: clean_filename(str_replace('_', ' ', fullname) . '_' . uniqueid);
    a team's name through format_string first (& to &amp;), its id after, the default group none."""
    assert names.moodle_user_prefix("Bob O'Brien", "1002") == "Bob OBrien_1002"
    assert names.moodle_user_prefix("Ann_Marie Lee", "7") == "Ann Marie Lee_7"
    assert names.moodle_group_prefix("R&D", "79") == "Ramp;D_79"
    assert names.moodle_group_prefix("R&amp;D", "79") == "Ramp;D_79"  # an entity stays one
    assert names.moodle_group_prefix("Team_Alpha", "77") == "Team Alpha_77"
    assert names.moodle_group_prefix("Default group") == "Default group"
    assert names.moodle_format_string("A <b>bold</b> & x > y") == "A bold &amp; x &gt; y"


# ------------------------------------------------------------------ Canvas's [[:word:]]
def test_canvas_keeps_rubys_word_characters_marks_included():
    """ContentZipper#sanitize_file_name: gsub(/[^[[:word:]]]/, ""), Onigmo's word class being Letter, Mark,
    Decimal_Number and Connector_Punctuation: a Devanagari name keeps its vowel signs (marks), which
    Python's \\w does not match."""
    name = "सुनीलकुमार"
    assert re.fullmatch(r"\w+", name) is None  # Python: the vowel signs are no word characters
    assert names.is_canvas_name(name) and names.canvas_sanitize_file_name(f"{name}!") == name
    assert names.is_canvas_name("anne\u0301")  # a combining accent, as a decomposed name holds it
    assert not names.is_canvas_name("x²") and not names.is_canvas_name("a-b")  # No, Pd: not Ruby's word
    assert names.canvas_user_name("Kumar, Sunil") == "kumarsunil"
    assert names.canvas_user_name("Doe_12_Jane") == "doe12jane"  # sanitize_user_name: _(\d+)_ -> \1


def test_a_canvas_name_with_marks_is_its_students(tmp_path):
    klass = layouts.read_class(_zip(tmp_path / "canvas.zip", {
        "सुनीलकुमार_2009_90019_ex02_where.py": "x", "doejane_12345_600_ex02_where.py": "x"}))
    students = {s.name: s for s in klass.students}
    assert set(students) == {"सुनीलकुमार_2009", "doejane_12345"}
    assert list(students["सुनीलकुमार_2009"].files) == ["ex02_where.py"] and students["सुनीलकुमार_2009"].problem is None


# ------------------------------------------------------------------ Canvas's eighth upload
@pytest.mark.parametrize("name, expected", [
    ("ex02_where-3f2504e0-4f89-41d3-9a0c-0305e82c3301.py", ("ex02_where.py", 8)),
    ("ex02_where-12345678-1234-4234-8234-123456789012.py", ("ex02_where.py", 8)),  # digits alone: still a uuid
    ("data-3f2504e0-4f89-41d3-9a0c-0305e82c3301.tar.gz", ("data.tar.gz", 8)),
    ("ex02_where-7.py", ("ex02_where.py", 7)),
    ("ex02_where-3f2504e0.py", ("ex02_where-3f2504e0.py", 0)),  # no uuid: the student's own name
])
def test_canvas_names_the_eighth_upload_with_a_uuid(name, expected):
    """Attachment.make_unique_filename (app/models/attachment.rb): "-1" to "-7", then
    "#{basename}-#{SecureRandom.uuid}#{extname}" (attempts >= 8, or addition >= 8)."""
    assert names.version(name, "canvas") == expected


def test_a_canvas_upload_named_with_a_uuid_is_graded_as_its_exercise(tmp_path):
    klass = layouts.read_class(_zip(tmp_path / "s.zip", {
        "doejane_12345_601_ex02_where-3f2504e0-4f89-41d3-9a0c-0305e82c3301.py": "x",
        "doejane_12345_600_ex02_where-7.py": "older"}))
    student = klass.students[0]
    assert student.problem is None and list(student.files) == ["ex02_where.py"]
    assert student.files["ex02_where.py"].endswith("3301.py")  # the eighth upload is the newest
    uses = {u.file: u.use for u in klass.files}
    assert uses["doejane_12345_600_ex02_where-7.py"] == "superseded"


# ------------------------------------------------------------------ Moodle's worksheet, matched
def test_a_moodle_name_cleaned_by_moodle_fills_its_row(tmp_path):
    download = _zip(tmp_path / "m.zip", {"Bob OBrien_1002_assignsubmission_file/ex01_jit_forms.py": "x",
                                         "Zoë Ng_1003_assignsubmission_file/ex01_jit_forms.py": "x"})
    sheet = worksheets.read(_sheet(tmp_path / "Grades.csv", MOODLE_EN, [
        ["Participant 1002", "Bob O'Brien", "b@x", "", "", "80.00", "Yes", "-", "-", ""],
        ["Participant 1003", "Zoë Ng", "z@x", "", "", "80.00", "Yes", "-", "-", ""]]), "moodle")
    klass = layouts.read_class(download)
    done = filling.fill(sheet, [(s, _graded(s, 40)) for s in klass.students], 80, words)
    assert done.filled == 2 and done.left == [], [(w, words(t)) for w, t in done.left]
    rows = list(csv.reader(io.StringIO(done.text.lstrip("\ufeff"))))
    assert [r[4] for r in rows[1:]] == ["40", "40"]
    assert rows[1][8] == "-"  # Last modified (grade): as Moodle wrote it, never "'-"
    assert rows[1][9] == "Chapter 4: JIT basics: 40 / 80" and "/home/teacher" not in done.text  # no local path
    assert _moodle_import(done.text) == {"1002": "40", "1003": "40"}  # Moodle's importer, as ported


def test_a_moodle_group_named_with_an_ampersand_gives_its_members_the_grade(tmp_path):
    header = MOODLE_EN[:4] + ["Group"] + MOODLE_EN[4:]
    sheet = worksheets.read(_sheet(tmp_path / "Grades.csv", header, [
        ["Participant 1", "Ann", "a@x", "", "R&D", "", "100.00", "Yes", "-", "-", ""],
        ["Participant 2", "Bo", "b@x", "", "R&D", "", "100.00", "Yes", "-", "-", ""]]), "moodle")
    klass = layouts.read_class(_zip(tmp_path / "t.zip", {"Ramp;D_79_assignsubmission_file/ex01_jit_forms.py": "x"}),
                               teams=True)
    filling.members(sheet, klass.students)
    assert [(p.name, p.id) for p in klass.students[0].people] == [("Ann", "1"), ("Bo", "2")]
    done = filling.fill(sheet, [(s, _graded(s, 80)) for s in klass.students], 80, words)
    assert done.filled == 2


def test_groups_that_moodle_writes_alike_are_refused_never_filled(tmp_path):
    """"Team_Alpha" and "Team Alpha" are both the folder "Team Alpha_<id>" (str_replace('_', ' ')): the
    worksheet names groups by name only, so neither's members get the folder's grade. "team   ALPHA" is a
    folder of its own name: it is not Team Alpha's."""
    header = MOODLE_EN[:4] + ["Group"] + MOODLE_EN[4:]
    sheet = worksheets.read(_sheet(tmp_path / "Grades.csv", header, [
        ["Participant 1", "Ann", "a@x", "", "Team_Alpha", "", "100.00", "Yes", "-", "-", ""],
        ["Participant 2", "Bo", "b@x", "", "Team Alpha", "", "100.00", "Yes", "-", "-", ""],
        ["Participant 3", "Cy", "c@x", "", "team   ALPHA", "", "100.00", "Yes", "-", "-", ""]]), "moodle")
    klass = layouts.read_class(_zip(tmp_path / "t.zip", {
        "Team Alpha_77_assignsubmission_file/ex01_jit_forms.py": "x",
        "team   ALPHA_78_assignsubmission_file/ex01_jit_forms.py": "x"}), teams=True)
    filling.members(sheet, klass.students)
    by_group = {s.group: s for s in klass.students}
    assert by_group["Team Alpha"].people == [] and "(Team Alpha, Team_Alpha)" in words(by_group["Team Alpha"].notes[-1])
    assert [p.id for p in by_group["team   ALPHA"].people] == ["3"]
    done = filling.fill(sheet, [(s, _graded(s, 80)) for s in klass.students], 80, words)
    rows = list(csv.reader(io.StringIO(done.text.lstrip("\ufeff"))))
    assert [r[5] for r in rows[1:]] == ["", "", "100"]


# ------------------------------------------------------------------ the file read as the csv module reads it
def test_a_name_with_a_line_separator_keeps_its_row_and_a_short_row_is_left(tmp_path):
    """str.splitlines() ends a line at U+2028 (and \\x1c, \\x85 ...): a roster name holding one split its row
    and the filling crashed after the class was graded. A line is what the csv module reads; a row with
    fewer cells than the grade's column is left as it was, with a reason."""
    path = _sheet(tmp_path / "Grades.csv", MOODLE_EN, [
        ["Participant 1", "Ann\u2028Lee", "a@x", "", "", "80.00", "Yes", "-", "-", ""],
        ["Participant 2", "Bo"],
        ["Participant 3", "Cy\x85Wu", "c@x", "", "", "80.00", "Yes", "-", "-", ""]])
    sheet = worksheets.read(path, "moodle")
    assert len(sheet.rows) == 4 and sheet.rows[1][1] == "Ann\u2028Lee"
    download = _zip(tmp_path / "m.zip", {f"{n}_{i}_assignsubmission_file/ex01_jit_forms.py": "x"
                                         for i, n in ((1, "Ann\u2028Lee"), (2, "Bo"), (3, "Cy\x85Wu"))})
    klass = layouts.read_class(download)
    done = filling.fill(sheet, [(s, _graded(s, 80)) for s in klass.students], 80, words)
    left = {who: words(why) for who, why in done.left}
    assert done.filled == 2 and left == {"Participant 2 Bo": "this row has 2 cells where the file's grade column "
                                                            "needs 10: left as it was"}
    assert done.text.encode("utf-8").splitlines()[2] == path.read_bytes().splitlines()[2]  # byte for byte


# ------------------------------------------------------------------ nothing ungraded written as a number
def test_online_text_alone_is_said_and_written_as_no_grade(tmp_path):
    klass = layouts.read_class(_zip(tmp_path / "m.zip", {
        "Ann Lee_1_assignsubmission_onlinetext_/onlinetext.html": "<p>see attached</p>",
        "Bo Wu_2_assignsubmission_file_/ex01_jit_forms.py": "x"}))
    ann = next(s for s in klass.students if s.name.startswith("Ann"))
    assert ann.status == "unreadable" and words(ann.problem) == ("Ann Lee_1 handed in online text only "
                                                                  "(assignsubmission_onlinetext), no file: nothing to "
                                                                  "grade; its grade is left blank")
    rows = [gradebook.row_from_failure(ann.name, "unreadable", words(ann.problem)).of(ann)]
    moodle = list(csv.DictReader(io.StringIO(gradebook.moodle_csv(rows, 80, "now"))))
    assert moodle[0]["Grade"] == ""
    canvas = layouts.read_class(_zip(tmp_path / "c.zip", {"leeann_11_text.html": "<p>x</p>"}))
    assert "online text only (text.html)" in words(canvas.students[0].problem)


def test_a_partial_run_writes_no_import_file(tmp_path):
    klass = layouts.read_class(_zip(tmp_path / "s.zip", {"doejane_12345_600_ex01_jit_forms.py": "x"}))
    rows = [_graded(s, 10) for s in klass.students]
    paths = gradebook.write_exports(rows, {"ex01": 10}, tmp_path / "out", "ch4", layout="canvas", partial=True)
    assert "canvas" not in paths and (tmp_path / "out" / "grades.csv").exists()
    paths = gradebook.write_exports(rows, {"ex01": 10}, tmp_path / "whole", "ch4", layout="canvas")
    assert "canvas" in paths and _canvas_import_header(next(csv.reader(paths["canvas"].open(encoding="utf-8"))))
