"""The platforms' own rules, as their source states them, read without grading.

Each test names the file and function of the platform's source whose rule it carries (read in
moodle/moodle and instructure/canvas-lms): how a file uploaded again is renamed, how a team's or
an anonymous download is named, which columns the importers require and how they find them.
The downloads and exports here are made from those rules; the grading of each platform's
download end to end is in ``test_batch_downloads.py``.
"""
from __future__ import annotations

import csv
import io
import re
import zipfile
from pathlib import Path

import pytest

from conftest import SOLUTIONS

from grader import platform_names as renames
from grader.batch import filling, gradebook, layouts, worksheets
from grader.batch.gradebook import Row
from grader.i18n import grader_catalog

words = lambda text: grader_catalog().render(text, "en")  # noqa: E731
MISTAKE = "def where_piecewise(x):\n    return x\n"


def _zip(path: Path, members: dict[str, bytes | str], times: dict[str, tuple] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, (times or {}).get(name, (2026, 12, 1, 10, 0, 0)))
            archive.writestr(info, data)
    return path


def _solution(name: str) -> str:
    return (SOLUTIONS / name).read_text(encoding="utf-8")


def _uses(klass) -> dict[str, tuple[str, str]]:
    return {u.file: (u.student, u.use) for u in klass.files}


def _row(student, total: float, status: str = "completed") -> Row:
    report = {"title": f"Chapter 4: {total:g} / 80", "score": total, "exercises": []}
    row = Row(student.name, status, report=report if status == "completed" else None, scores={"ex01": total})
    return row.of(student)


# ------------------------------------------------------------------ re-uploads, by platform
@pytest.mark.parametrize("layout, name, expected", [
    # Moodle: file_storage::get_unused_filename (lib/filestorage/file_storage.php) makes
    # "basename (N).ext" from pathinfo(), the extension being what follows the last dot
    ("moodle", "ex02_where (1).py", ("ex02_where.py", 1)),
    ("moodle", "ex02_where (12).py", ("ex02_where.py", 12)),
    ("moodle", "data.tar (2).gz", ("data.tar.gz", 2)),
    ("moodle", "ex02_where-1.py", ("ex02_where-1.py", 0)),  # a student's own name: not Moodle's rule
    ("moodle", "ex02_where (copy).py", ("ex02_where (copy).py", 0)),  # only digits, as its own check says
    # Canvas: Attachment.make_unique_filename (app/models/attachment.rb) makes "basename-N" + extname,
    # extname = /(\.[A-Za-z][A-Za-z0-9]*)*(\.[A-Za-z0-9]*)$/
    ("canvas", "ex02_where-1.py", ("ex02_where.py", 1)),
    ("canvas", "ex02_where-7.py", ("ex02_where.py", 7)),
    ("canvas", "data-2.tar.gz", ("data.tar.gz", 2)),
    ("canvas", "ex02_where (1).py", ("ex02_where (1).py", 0)),  # a browser's name: not Canvas's rule
    # a browser saving twice (files collected by hand, a Gradescope upload): "name (1).ext"
    ("folders", "ex02_where (1).py", ("ex02_where.py", 1)),
    ("gradescope", "ex02_where-1.py", ("ex02_where-1.py", 0)),
    ("folders", "sub/ch4 (3).ipynb", ("sub/ch4.ipynb", 3)),
])
def test_each_platform_reads_its_own_renaming_rule_and_only_that_one(layout, name, expected):
    assert renames.version(name, layout) == expected


def test_a_moodle_students_own_backup_never_replaces_the_answer(tmp_path):
    """Moodle renames a second upload "ex02_where (1).py" (file_storage::get_unused_filename):
    that one is the newer and is graded; "ex02_where-1.py" is the student's own file."""
    folder = "Jane Doe_101_assignsubmission_file"
    klass = layouts.read_class(_zip(tmp_path / "moodle.zip", {
        f"{folder}/ex01_jit_forms.py": _solution("ex01_jit_forms.py"),
        f"{folder}/ex01_jit_forms (1).py": "# uploaded again\n" + _solution("ex01_jit_forms.py"),
        f"{folder}/ex02_where.py": _solution("ex02_where.py"),
        f"{folder}/ex02_where-1.py": MISTAKE,  # his backup, uploaded by mistake
    }))
    jane = klass.students[0]
    assert jane.files["ex01_jit_forms.py"] == f"{folder}/ex01_jit_forms (1).py"
    assert jane.files["ex02_where.py"] == f"{folder}/ex02_where.py"
    uses = _uses(klass)
    assert uses[f"{folder}/ex01_jit_forms.py"][1] == "superseded"
    assert uses[f"{folder}/ex01_jit_forms (1).py"][1] == "graded"
    assert [u for u in klass.files if u.use == "graded" and "ex01" in u.file] == \
        [layouts.FileUse(f"{folder}/ex01_jit_forms (1).py", "Jane Doe_101", "graded")]


@pytest.mark.parametrize("layout, members, graded, note", [
    ("moodle", {"Ann Lee_7_assignsubmission_file/ex02_where (1).py": "x"}, "ex02_where (1).py", "Moodle"),
    ("canvas", {"leeann_7_900_ex02_where-2.py": "x"}, "ex02_where-2.py", "Canvas"),
    ("folders", {"ann/ex02_where (1).py": "x", "bo/ex01_jit_forms.py": "x"}, "ex02_where (1).py", "browser"),
])
def test_a_lone_renamed_file_is_graded_as_its_exercise_with_a_note(tmp_path, layout, members, graded, note):
    klass = layouts.read_class(_zip(tmp_path / "d.zip", members), layout=layout)
    student = klass.students[0]
    assert list(student.files) == ["ex02_where.py"] and student.files["ex02_where.py"].endswith(graded)
    said = " ".join(words(n) for n in student.notes)
    assert f"{graded} is graded as ex02_where.py" in said and note in said


def test_two_versions_the_newer_by_number_then_by_the_files_time(tmp_path):
    """Two Canvas uploads under one name (each file its own attachment id, no number): the one
    the zip dates later is graded, whatever the order of the names."""
    members = {"doejane_5_600_ex02_where.py": "# newer\n", "doejane_5_700_ex02_where.py": "# older\n",
               "doejane_5_701_ex01_jit_forms-1.py": "# second upload\n", "doejane_5_601_ex01_jit_forms.py": "#\n"}
    times = {"doejane_5_600_ex02_where.py": (2026, 12, 2, 9, 0, 0),
             "doejane_5_700_ex02_where.py": (2026, 12, 1, 9, 0, 0),
             "doejane_5_601_ex01_jit_forms.py": (2026, 12, 3, 9, 0, 0)}  # the number wins over the time
    klass = layouts.read_class(_zip(tmp_path / "c.zip", members, times))
    jane = klass.students[0]
    assert jane.files == {"ex02_where.py": "doejane_5_600_ex02_where.py",
                          "ex01_jit_forms.py": "doejane_5_701_ex01_jit_forms-1.py"}
    uses = _uses(klass)
    assert uses["doejane_5_700_ex02_where.py"][1] == "superseded"
    assert uses["doejane_5_601_ex01_jit_forms.py"][1] == "superseded"
    assert sum(use == "graded" for _, use in uses.values()) == 2


# ------------------------------------------------------------------ Moodle: teams
def _team_download(tmp_path: Path) -> Path:
    # mod_assign\downloader::get_student_prefix (mod/assign/classes/downloader.php): a team
    # submission's prefix is the group's name and "_<group id>", or get_string('defaultteam')
    # with no id for students in no group; the folder adds "_assignsubmission_file"
    return _zip(tmp_path / "teams.zip", {
        "Team Alpha_77_assignsubmission_file/ex01_jit_forms.py": _solution("ex01_jit_forms.py"),
        "Default group_assignsubmission_file/ex01_jit_forms.py": _solution("ex01_jit_forms.py"),
        "Team Beta_78_assignsubmission_file/ex01_jit_forms.py": _solution("ex01_jit_forms.py"),
    })


def test_a_moodle_team_folder_is_a_group_never_a_participant(tmp_path):
    klass = layouts.read_class(_team_download(tmp_path))
    assert klass.layout == "moodle" and klass.kind == "groups"
    students = {s.name: s for s in klass.students}
    assert set(students) == {"Team Alpha_77", "Default group", "Team Beta_78"}
    assert all(s.problem is None and s.people == [] for s in students.values())  # the default group is graded
    assert (students["Team Alpha_77"].group, students["Team Alpha_77"].group_id) == ("Team Alpha", "77")
    rows = [_row(s, 10) for s in klass.students]
    sheet = gradebook.moodle_csv(rows, 80, "2026-12-01T10:00:00+00:00")
    assert "Participant 77" not in sheet and len(sheet.splitlines()) == 1  # no stranger's row
    said = words(students["Team Alpha_77"].notes[0])
    assert "group id 77" in said and "--gradebook" in said


MOODLE_ZH = ["识别码", "全名", "电子邮件地址", "状态", "群组", "成绩", "最高成绩", "允许更改成绩", "最后修改（学生）",
             "最后修改（教师）", "评语反馈"]


def _worksheet(path: Path, header: list[str], rows: list[list[str]], newline: str = "\r\n") -> Path:
    out = io.StringIO()
    csv.writer(out, lineterminator=newline).writerows([header, *rows])
    path.write_bytes(b"\xef\xbb\xbf" + out.getvalue().encode("utf-8"))
    return path


def test_a_moodle_worksheet_in_chinese_gives_each_team_member_the_grade_scaled_to_its_maximum(tmp_path):
    """The worksheet of a team assignment (assign_grading_table: recordid, fullname, identity
    fields, status, team, grade, grademax, gradecanbechanged, timesubmitted, timemarked, the
    feedback plugins' fields) downloaded in Chinese: its headers are get_string() in zh_cn and the
    identifier is get_string('hiddenuser') . uniqueid ("参与者12345"). The importer finds the
    columns by those names (importgradeslib.php, init()) and skips a grade above the maximum."""
    rows = [["参与者101", "李雷", "li@example.edu", "已经提交", "Team Alpha", "", "100.00", "是", "-", "-", ""],
            ["参与者102", "韩梅梅", "han@example.edu", "已经提交", "Team Alpha", "", "100.00", "是", "-", "-", ""],
            ["参与者103", "Ann Lee", "ann@example.edu", "已经提交", "默认分组", "", "100.00", "是", "-",
             "2026年12月1日 10:00", "good work"],
            ["参与者104", "Bo Chen", "bo@example.edu", "没有提交的作业", "Team Gamma", "", "100.00", "是", "-", "-",
             ""]]
    path = _worksheet(tmp_path / "成绩-C1-作业4-123.csv", MOODLE_ZH, rows)
    original = path.read_bytes()
    download = tmp_path / "teams.zip"
    _zip(download, {"Team Alpha_77_assignsubmission_file/ex01_jit_forms.py": "x",
                    "默认分组_assignsubmission_file/ex01_jit_forms.py": "x"})
    sheet = worksheets.read(path, "moodle")
    assert sheet.prefix == "参与者" and sheet.columns["team"] == 4 and sheet.columns["grade"] == 5
    klass = layouts.read_class(download, teams=True)
    filling.members(sheet, klass.students)
    people = {s.name: [(p.name, p.id) for p in s.people] for s in klass.students}
    assert people == {"Team Alpha_77": [("李雷", "101"), ("韩梅梅", "102")], "默认分组": [("Ann Lee", "103")]}
    done = filling.fill(sheet, [(s, _row(s, 60)) for s in klass.students], 80, words)
    assert done.filled == 3 and [who for who, _ in done.left] == ["参与者104 Bo Chen"]
    assert any("scaled" in words(n) for n in done.notes)
    text = done.text.encode("utf-8")
    assert text.startswith(b"\xef\xbb\xbf") and text.splitlines()[0] == original.splitlines()[0]  # header as it was
    assert text.splitlines()[4] == original.splitlines()[4]  # a row left alone is left byte for byte
    filled = list(csv.reader(io.StringIO(done.text.lstrip("\ufeff"))))
    assert [r[5] for r in filled[1:]] == ["75", "75", "75", ""]  # 60 of 80 is 75 of 100
    assert filled[3][9] == "2026年12月1日 10:00" and filled[3][10] == "Chapter 4: 60 / 80"
    assert _moodle_import(done.text, "zh") == {"101": "75", "102": "75", "103": "75"}


def _moodle_import(text: str, lang: str = "en") -> dict[str, str]:
    """Moodle's offline grading importer, as assignfeedback_offline_grade_importer::init() and next()
    (mod/assign/feedback/offline/importgradeslib.php) read a file: the Identifier, Grade and Last
    modified (grade) columns found by their get_string() names in the uploader's language, or no
    import at all; each row's participant id is the identifier after get_string('hiddenuser')
    (substr by its length); a grade is imported when it is set and at least 0
    (assign_feedback_offline::process_import_grades)."""
    strings = {"en": ("Grade", "Identifier", "Last modified (grade)", "Participant "),
               "zh": ("成绩", "识别码", "最后修改（教师）", "参与者")}[lang]
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    header = rows[0]
    found = [header.index(name) if name in header else -1 for name in strings[:3]]
    if min(found) < 0:
        raise ValueError("Moodle could not read the uploaded worksheet")  # print_error('invalidgradeimport')
    grade, ident, _ = found
    prefix = strings[3].encode("utf-8")
    return {row[ident].encode("utf-8")[len(prefix):].decode("utf-8"): row[grade] for row in rows[1:]
            if row[grade] != "" and float(row[grade]) >= 0}


def test_moodle_csv_passes_moodles_importer_as_written(tmp_path):
    klass = layouts.read_class(_zip(tmp_path / "m.zip", {"Jane Doe_101_assignsubmission_file/ex01_jit_forms.py": "x",
                                                         "李雷_102_assignsubmission_file/ex01_jit_forms.py": "x"}))
    text = gradebook.moodle_csv([_row(s, 40) for s in klass.students], 80, "2026-12-01T10:00:00+00:00")
    assert _moodle_import(text) == {"101": "40", "102": "40"}
    header = next(csv.reader(io.StringIO(text)))
    # every column of the worksheet Moodle downloads (assign_grading_table::__construct, downloading)
    assert header == ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                      "Grade can be changed", "Last modified (submission)", "Last modified (grade)",
                      "Feedback comments"]
    modified = next(csv.DictReader(io.StringIO(text)))["Last modified (grade)"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", modified)  # strtotime() reads ISO 8601


def test_a_worksheet_moodle_would_refuse_is_one_line(tmp_path):
    path = _worksheet(tmp_path / "Grades.csv", ["Identifier", "Full name", "Grade", "Maximum Grade"],
                      [["Participant 1", "A", "", "80"]])
    with pytest.raises(worksheets.WorksheetError) as error:
        worksheets.read(path, "moodle")
    line = words(error.value.text)
    assert "Last modified (grade)" in line and "\n" not in line and "refuses" in line
    scale = _worksheet(tmp_path / "Scale.csv", ["Identifier", "Full name", "Grade", "Scale", "Last modified (grade)"],
                       [["Participant 1", "A", "", "Good\nBad", "-"]])
    with pytest.raises(worksheets.WorksheetError) as error:
        worksheets.read(scale, "moodle")
    assert "scale" in words(error.value.text)


# ------------------------------------------------------------------ Canvas
def test_canvas_anonymous_downloads_are_read_as_canvas_names_them(tmp_path):
    """ContentZipper#get_filename (lib/content_zipper.rb): with anonymous grading the id is
    "anon_#{submission.anonymous_id}" and there is no user name; a late one is "LATE_anon_...";
    each file then gets "_#{attachment id}_#{name}" (#add_upload_submission)."""
    klass = layouts.read_class(_zip(tmp_path / "anon.zip", {
        "anon_Xy3kP_900_ex01_jit_forms.py": "x", "anon_Xy3kP_901_ex02_where.py": "x",
        "LATE_anon_q8RtZ_902_ex01_jit_forms.py": "x", "anon_12345_903_ex01_jit_forms.py": "x",
    }), layout="canvas")
    students = {s.name: s for s in klass.students}
    assert klass.kind == "anonymous" and set(students) == {"anon_Xy3kP", "anon_q8RtZ", "anon_12345"}
    assert sorted(students["anon_Xy3kP"].files) == ["ex01_jit_forms.py", "ex02_where.py"]
    assert students["anon_q8RtZ"].late and not students["anon_Xy3kP"].late
    assert all(p.id == "" for s in klass.students for p in s.people)  # no user id to import by
    paths = gradebook.write_exports([_row(s, 10) for s in klass.students], {"ex01": 80}, tmp_path / "out", "ch4",
                                    layout="canvas", kind=klass.kind)
    assert "canvas" not in paths and "canvas_anonymous" in paths
    by_anon = {r["anonymous id"]: r for r in csv.DictReader(paths["canvas_anonymous"].open(encoding="utf-8"))}
    assert set(by_anon) == {"Xy3kP", "q8RtZ", "12345"} and by_anon["q8RtZ"]["late"] == "yes"


def _canvas_import_header(row: list[str]) -> bool:
    """GradebookImporter#header? with #row_has_student_headers? and #update_column_count
    (lib/gradebook_importer.rb): "Student" and "ID" first, and the student columns ending with
    "Section"."""
    if not (len(row) > 3 and "Student" in row[0] and "ID" in row[1]):
        return False
    columns = 3
    if re.search(r"SIS\s+Login\s+ID", row[2]):
        columns += 1
    elif re.search(r"SIS\s+User\s+ID", row[2]) and re.search(r"SIS\s+Login\s+ID", row[3]):
        columns += 2 + (1 if len(row) > 4 and re.search(r"Integration\s+ID", row[4]) else 0)
    return "Section" in row[columns - 1]


CANVAS_EXPORT = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Quiz 1 (111)",
                  "Chapter 4: JIT basics (98765)", "Current Score", "Final Score"],
                 ["    Points Possible", "", "", "", "", "10.00", "100.00", "(read only)", "(read only)"],
                 ["Doe, Jane", "12345", "s1", "jdoe", "A", "9.00", "", "90", "90"],
                 ["Lee, Ann", "222", "s2", "alee", "A", "8.00", "N/A", "80", "80"],
                 ["Roe, Bo", "333", "s3", "broe", "A", "7.00", "", "70", "70"]]


def test_canvas_export_is_filled_in_the_assignment_column_and_keeps_the_rest(tmp_path):
    path = _worksheet(tmp_path / "2026-12-01T1000_Grades-JAX.csv", CANVAS_EXPORT[0], CANVAS_EXPORT[1:], newline="\n")
    # Canvas names a group's files after the group (Assignment#representatives: the representative's
    # sortable_name becomes the group's) and the representative's user id
    klass = layouts.read_class(_zip(tmp_path / "s.zip", {"doejane_12345_900_ex01_jit_forms.py": "x",
                                                         "leeann_222_901_ex01_jit_forms.py": "x",
                                                         "teamalpha_333_902_ex01_jit_forms.py": "x",
                                                         "smithbob_444_903_ex01_jit_forms.py": "x"}))
    sheet = worksheets.read(path, "canvas", chapter_names=("Chapter 4: JIT basics", "ch4"))
    assert sheet.columns["grade"] == 6 and sheet.most == 100
    done = filling.fill(sheet, [(s, _row(s, 40)) for s in klass.students], 80, words)
    rows = list(csv.reader(io.StringIO(done.text.lstrip("\ufeff"))))
    assert _canvas_import_header(rows[0]) and rows[0] == CANVAS_EXPORT[0] and rows[1] == CANVAS_EXPORT[1]
    assert [r[6] for r in rows[2:]] == ["50", "N/A", "50"] and [r[5] for r in rows[2:]] == ["9.00", "8.00", "7.00"]
    assert {who: words(why) for who, why in done.left}["Lee, Ann (222)"].startswith("Canvas shows N/A")
    assert [name for name, _ in done.missing] == ["smithbob_444"]
    assert any("teamalpha" in words(n) and "group" in words(n) for n in done.notes)
    assert _canvas_import_header(next(csv.reader(io.StringIO(gradebook.canvas_csv([], 80, "Chapter 4 (98765)")))))


def test_an_export_without_the_chapters_column_says_which_columns_it_has(tmp_path):
    path = _worksheet(tmp_path / "grades.csv.export", CANVAS_EXPORT[0][:6], [r[:6] for r in CANVAS_EXPORT[1:]])
    with pytest.raises(worksheets.WorksheetError) as error:
        worksheets.read(path, "canvas", chapter_names=("Chapter 4: JIT basics", "ch4"))
    assert "Quiz 1 (111)" in words(error.value.text) and "--assignment" in words(error.value.text)


def test_a_gradescope_roster_gets_a_column_matched_by_sid(tmp_path):
    path = _worksheet(tmp_path / "roster.csv", ["Full Name", "Email", "SID", "Role"],
                      [["Ann Lee", "ann@example.edu", "3031", "Student"], ["Zed", "z@example.edu", "9", "Student"]])
    download = _zip(tmp_path / "e.zip", {"submission_metadata.yml": (
        "submission_1:\n  :submitters:\n  - :name: Ann Lee\n    :sid: '3031'\n"),
        "submission_1/ex01_jit_forms.py": "x"})
    klass = layouts.read_class(download)
    sheet = worksheets.read(path, "gradescope", chapter_names=("Chapter 4: JIT basics (ch4)",))
    done = filling.fill(sheet, [(s, _row(s, 80)) for s in klass.students], 80, words)
    rows = list(csv.reader(io.StringIO(done.text.lstrip("\ufeff"))))
    assert rows == [["Full Name", "Email", "SID", "Role", "Chapter 4: JIT basics (ch4)"],
                    ["Ann Lee", "ann@example.edu", "3031", "Student", "80"],
                    ["Zed", "z@example.edu", "9", "Student", ""]]
    assert [words(why) for _, why in done.left] == ["no submission in the download"]


def test_grade_path_grades_a_lone_file_a_browser_saved_again(tmp_path):
    """``grade PATH`` (and the Gradescope bundle, which grades its submission folder the same way):
    a browser saving ex02_where.py a second time names it "ex02_where (1).py"; alone, it is the
    exercise's file, and the report says so."""
    from grader.chapter import load_chapter
    from grader.submission import load

    chapter = load_chapter("ch4")
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "ex01_jit_forms.py").write_text(_solution("ex01_jit_forms.py"), encoding="utf-8")
    (folder / "ex02_where (1).py").write_text("# first save\n", encoding="utf-8")
    (folder / "ex02_where (2).py").write_text(_solution("ex02_where.py"), encoding="utf-8")
    (folder / "ex03_static_args (1).py").write_text("# not graded: the exercise's own file is there\n")
    (folder / "ex03_static_args.py").write_text(_solution("ex03_static_args.py"), encoding="utf-8")
    sub = load(folder, chapter, tmp_path / "scratch")
    assert "ex02_where" not in sub.problems
    assert (sub.module_dir / "ex02_where.py").read_text(encoding="utf-8") == _solution("ex02_where.py")
    assert (sub.module_dir / "ex03_static_args.py").read_text(encoding="utf-8") == _solution("ex03_static_args.py")
    assert [words(n) for n in sub.notes["ex02_where"]] == [
        "ex02_where (2).py is graded as ex02_where.py: that is how a browser names a file saved again, and there is "
        "no ex02_where.py beside it"]
    only = tmp_path / "only"
    only.mkdir()
    (only / "ex02_where (1).py").write_text(_solution("ex02_where.py"), encoding="utf-8")
    assert load(only, chapter, tmp_path / "scratch2").files == ["ex02_where.py"]


def test_a_team_folder_taken_for_a_participant_never_fills_a_strangers_row(tmp_path):
    """A team download with every student in a group (no Default group folder) looks like one of
    participants; with the worksheet, the folder's name must be the worksheet's name for that id
    (Moodle writes both with fullname(): assign_grading_table::col_fullname, downloader's prefix)."""
    path = _worksheet(tmp_path / "Grades.csv", ["Identifier", "Full name", "Grade", "Maximum Grade",
                                               "Last modified (grade)", "Feedback comments"],
                      [["Participant 77", "Zed Stranger", "", "80", "-", ""], ["Participant 101", "Jane Doe", "", "80",
                                                                             "-", ""]])
    klass = layouts.read_class(_zip(tmp_path / "m.zip", {"Team Alpha_77_assignsubmission_file/a.py": "x",
                                                         "Jane Doe_101_assignsubmission_file/a.py": "x"}))
    sheet = worksheets.read(path, "moodle")
    done = filling.fill(sheet, [(s, _row(s, 40)) for s in klass.students], 80, words)
    assert done.filled == 1 and _moodle_import(done.text) == {"101": "40"}
    (who, why), = done.left
    assert who == "Participant 77 Zed Stranger" and "--teams" in words(why)
