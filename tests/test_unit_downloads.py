"""A class as the platforms give it: Canvas's, Moodle's and Gradescope's downloads, read
without grading (made here from small synthetic files), and the roster check that
every file of a download belongs to a row or says why it does not.

The grading of each layout, end to end from the instructor's side, is in
``test_batch_downloads.py``.
"""
from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path

import pytest

from conftest import SOLUTIONS, STUBS

from grader.batch import gradebook, layouts, roster
from grader.chapter import load_chapter
from grader.i18n import grader_catalog
from grader.submission import SubmissionError, load

words = lambda text: grader_catalog().render(text, "en")  # noqa: E731
CHAPTER_FILES = sorted(p.name for p in SOLUTIONS.glob("*.py"))


def _zip(path: Path, members: dict[str, bytes | str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _solution(name: str) -> str:
    return (SOLUTIONS / name).read_text(encoding="utf-8")


def _all_files(path: Path) -> set[str]:
    """Every file of a download, as the platform wrote it (the roster check's reference)."""
    if path.is_file():
        with zipfile.ZipFile(path) as archive:
            return {i.filename for i in archive.infolist() if not i.is_dir()}
    return {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file() or p.is_symlink()}


def _accounted(klass: layouts.Klass, prefix: str = "") -> None:
    """The roster check: every file of the download is listed once, with a student or a reason."""
    listed = [prefix + use.file for use in klass.files]
    assert len(listed) == len(set(listed))
    assert set(listed) == _all_files(klass.download.path)
    known = {s.key for s in klass.students}
    for use in klass.files:
        assert use.use in ("graded", "superseded", "not_graded", "system", "link", "unsafe", "unmatched", "metadata")
        assert use.student in known or (use.student == "" and use.use in ("system", "metadata"))


# ------------------------------------------------------------------ Canvas
def _canvas_download(tmp_path: Path) -> Path:
    members: dict[str, bytes | str] = {}
    for i, name in enumerate(CHAPTER_FILES):
        members[f"doejane_12345_{6000 + i}_{name}"] = _solution(name)
    members["doejane_12345_7001_ex02_where-1.py"] = "# second upload\n" + _solution("ex02_where.py")
    members["doejane_12345_7002_ex02_where-2.py"] = "# third upload\n" + _solution("ex02_where.py")
    for i, name in enumerate(CHAPTER_FILES):
        members[f"smithbob_LATE_222_{8000 + i}_{name}"] = (STUBS / name).read_text(encoding="utf-8")
    homework = io.BytesIO()
    with zipfile.ZipFile(homework, "w") as inner:
        inner.writestr("jit-course-main/exercises/ch4/ex01_jit_forms.py", _solution("ex01_jit_forms.py"))
    members["lilei_333_9001_homework.zip"] = homework.getvalue()
    members["wangfang_444_9100_report.pdf"] = b"%PDF-1.4"
    members["notes.txt"] = "the TA's notes"
    members["__MACOSX/._notes.txt"] = b"\0"
    return _zip(tmp_path / "submissions.zip", members)


def test_canvas_download_one_row_per_student_by_canvas_id(tmp_path):
    klass = layouts.read_class(_canvas_download(tmp_path))
    assert klass.layout == "canvas"
    students = {s.name: s for s in klass.students}
    assert set(students) == {"doejane_12345", "smithbob_222", "lilei_333", "wangfang_444", "notes.txt"}
    jane = students["doejane_12345"]
    assert [(p.name, p.id) for p in jane.people] == [("doejane", "12345")] and not jane.late
    assert sorted(jane.files) == CHAPTER_FILES
    assert jane.files["ex02_where.py"] == "doejane_12345_7002_ex02_where-2.py"  # the latest upload is graded
    assert {n.args["old"] for n in jane.notes} == {"doejane_12345_6001_ex02_where.py",
                                                    "doejane_12345_7001_ex02_where-1.py"}
    assert students["smithbob_222"].late and students["smithbob_222"].problem is None
    assert students["lilei_333"].single and list(students["lilei_333"].files) == ["homework.zip"]
    assert students["wangfang_444"].status == "unreadable"
    assert "report.pdf" in words(students["wangfang_444"].problem)
    stray = students["notes.txt"]
    assert stray.status == "not_a_submission" and "notes.txt" in words(stray.problem)
    assert "Canvas" in words(stray.problem) and "rename" in words(stray.problem)
    _accounted(klass)
    uses = {u.file: u.use for u in klass.files}
    assert uses["doejane_12345_6001_ex02_where.py"] == "superseded"
    assert uses["wangfang_444_9100_report.pdf"] == "not_graded" and uses["__MACOSX/._notes.txt"] == "system"


def test_canvas_csv_imports_by_canvas_user_id(tmp_path):
    klass = layouts.read_class(_canvas_download(tmp_path))
    rows = [gradebook.row_from_failure(s.name, "crash", "x").of(s) for s in klass.students]
    rows[0] = gradebook.row_from_report(rows[0].name, {"exercises": [{"id": "ex01", "score": 7.5, "status": "partial"}]}
                                        ).of(klass.students[0])
    lines = list(csv.reader(io.StringIO(gradebook.canvas_csv(rows, 80, "Chapter 4 (98765)"))))
    assert lines[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Chapter 4 (98765)"]
    # an assignment Canvas has ("Title (id)"): its points possible left alone, as a Ruby CSV nil
    # (GradebookImporter#process_pp sets them from this row: lib/gradebook_importer.rb)
    assert lines[1][0].strip() == "Points Possible" and lines[1][5] == ""
    by_id = {line[1]: line for line in lines[2:]}
    assert set(by_id) == {"12345", "222", "333", "444"}  # the stray file has no Canvas id: not imported
    assert by_id["12345"][0] == "doejane" and by_id["12345"][5] == "7.5"
    assert {by_id[i][5] for i in ("222", "333", "444")} == {""}  # not graded: blank, never a 0 Canvas would record
    new = list(csv.reader(io.StringIO(gradebook.canvas_csv(rows, 80, "Chapter 4: JIT basics (ch4)"))))
    assert new[1][5] == "80"  # a new assignment: the chapter's points
    graded = list(csv.DictReader(io.StringIO(gradebook.grades_csv(rows, {"ex01": 10}))))
    late = {r["id"]: r["late"] for r in graded if r["id"]}
    assert late == {"12345": "", "222": "yes", "333": "", "444": ""}


def test_an_unzipped_download_in_a_folder_of_its_own_is_read_the_same(tmp_path):
    with zipfile.ZipFile(_canvas_download(tmp_path)) as archive:
        archive.extractall(tmp_path / "unzipped" / "submissions")
    klass = layouts.read_class(tmp_path / "unzipped")
    assert klass.layout == "canvas"
    assert {s.name for s in klass.students if s.problem is None} == {"doejane_12345", "smithbob_222", "lilei_333"}
    _accounted(klass, prefix="submissions/")


# ------------------------------------------------------------------ Moodle
def test_moodle_download_by_participant_id(tmp_path):
    members: dict[str, bytes | str] = {
        "Jane Doe_101_assignsubmission_file_/ex01_jit_forms.py": _solution("ex01_jit_forms.py"),
        "Jane Doe_101_assignsubmission_file_/ex02_where.py": _solution("ex02_where.py"),
        "Jane Doe_101_assignsubmission_onlinetext_/onlinetext.html": "<p>see my files</p>",
        "李雷_102_assignsubmission_file_/作业/ch4.ipynb": "{}",
        "Bob Roe_103_assignsubmission_file_ch4.zip": b"PK\x05\x06" + b"\0" * 18,
        "grading worksheet.csv": "Identifier,Full name\n",
    }
    klass = layouts.read_class(_zip(tmp_path / "moodle.zip", members))
    assert klass.layout == "moodle"
    students = {s.name: s for s in klass.students}
    assert set(students) == {"Jane Doe_101", "李雷_102", "Bob Roe_103", "grading worksheet.csv"}
    assert [(p.name, p.id) for p in students["李雷_102"].people] == [("李雷", "102")]
    assert students["李雷_102"].files == {"作业/ch4.ipynb": "李雷_102_assignsubmission_file_/作业/ch4.ipynb"}
    assert students["Bob Roe_103"].single and list(students["Bob Roe_103"].files) == ["ch4.zip"]
    assert sorted(students["Jane Doe_101"].files) == ["ex01_jit_forms.py", "ex02_where.py"]
    assert students["grading worksheet.csv"].status == "not_a_submission"
    _accounted(klass)
    assert {u.file: u.use for u in klass.files}["Jane Doe_101_assignsubmission_onlinetext_/onlinetext.html"] \
        == "not_graded"
    rows = [gradebook.row_from_failure(s.name, "crash", "x").of(s) for s in klass.students]
    sheet = list(csv.DictReader(io.StringIO(gradebook.moodle_csv(rows, 80, "2026-12-01T10:00:00+00:00"))))
    assert {r["Identifier"] for r in sheet} == {"Participant 101", "Participant 102", "Participant 103"}
    assert all(r["Maximum Grade"] == "80" for r in sheet)


# ------------------------------------------------------------------ Gradescope
METADATA = """\
submission_111:
  :submitters:
  - :name: Ann Lee
    :sid: '3031'
    :email: ann@example.edu
  - :name: Bo Chen
    :sid: '3032'
    :email: bo@example.edu
  :created_at: 2026-11-30 21:14:05.000000000 -08:00
  :score: 0.0
submission_222:
  :submitters:
  - :name: Cy Park
    :sid: '3033'
    :email: cy@example.edu
  :created_at: 2026-12-01 09:00:00.000000000 -08:00
"""


def test_gradescope_export_with_a_group_and_a_whole_checkout(tmp_path):
    members: dict[str, bytes | str] = {"assignment_7_export/submission_metadata.yml": METADATA}
    for name in CHAPTER_FILES:
        members[f"assignment_7_export/submission_111/{name}"] = _solution(name)
        members[f"assignment_7_export/submission_222/jit-course-main/exercises/ch4/{name}"] = _solution(name)
    members["assignment_7_export/submission_222/jit-course-main/README.md"] = "# my checkout"
    members["assignment_7_export/submission_999/ex01_jit_forms.py"] = _solution("ex01_jit_forms.py")
    klass = layouts.read_class(_zip(tmp_path / "export.zip", members))
    assert klass.layout == "gradescope"
    students = {s.name: s for s in klass.students}
    assert set(students) == {"Ann Lee_111", "Cy Park_222", "submission_999"}
    group = students["Ann Lee_111"]
    assert [(p.name, p.id, p.email) for p in group.people] == [("Ann Lee", "3031", "ann@example.edu"),
                                                                 ("Bo Chen", "3032", "bo@example.edu")]
    assert group.submitted_at.startswith("2026-11-30")
    assert "jit-course-main/exercises/ch4/ex02_where.py" in students["Cy Park_222"].files
    assert students["submission_999"].status == "not_a_submission"
    assert "submission_metadata.yml" in words(students["submission_999"].problem)
    _accounted(klass, prefix="assignment_7_export/")
    rows = [gradebook.row_from_failure(s.name, "crash", "x").of(s) for s in klass.students]
    graded = list(csv.DictReader(io.StringIO(gradebook.grades_csv(rows, {"ex01": 10}))))
    assert [(r["student"], r["id"]) for r in graded if r["student"] == "Ann Lee_111"] == \
        [("Ann Lee_111", "3031"), ("Ann Lee_111", "3032")]  # a row for each member of the group


def test_a_broken_gradescope_metadata_file_is_one_line(tmp_path):
    download = _zip(tmp_path / "export.zip", {"submission_metadata.yml": "submission_1: [unclosed",
                                              "submission_1/a.py": "x = 1\n"})
    with pytest.raises(roster.ClassError) as error:
        layouts.read_class(download)
    assert error.value.text.key == "batch.error.bad_metadata" and "\n" not in words(error.value.text)


# ------------------------------------------------------------------ telling layouts apart
def test_the_layout_is_told_from_the_names_and_can_be_said(tmp_path):
    klass = tmp_path / "class"
    for name in ("ann", "bo"):
        (klass / name).mkdir(parents=True)
        (klass / name / "ex01_jit_forms.py").write_text("x = 1\n", encoding="utf-8")
    assert layouts.read_class(klass).layout == "folders"
    with pytest.raises(roster.ClassError) as error:
        layouts.read_class(klass, layout="canvas")
    line = words(error.value.text)
    assert error.value.text.key == "batch.error.layout_mismatch" and "doejane_12345_6789012" in line
    # half the names Canvas's: Canvas (the rest are rows that say they do not follow it) ...
    (klass / "doejane_1_2_ex01_jit_forms.py").write_text("x = 1\n", encoding="utf-8")
    (klass / "roe_3_4_ex01_jit_forms.py").write_text("x = 1\n", encoding="utf-8")
    read = layouts.read_class(klass)
    assert read.layout == "canvas" and {s.status for s in read.students if s.name in ("ann", "bo")} == \
        {"not_a_submission"}
    # ... and --layout folders reads the same download as folders
    assert layouts.read_class(klass, layout="folders").layout == "folders"


def test_links_in_a_download_are_listed_and_never_read(tmp_path):
    klass = tmp_path / "class"
    (klass / "ann").mkdir(parents=True)
    (klass / "ann" / "ex01_jit_forms.py").write_text("x = 1\n", encoding="utf-8")
    (klass / "ann" / "passwd.py").symlink_to("/etc/passwd")
    (klass / "bo").symlink_to(klass / "ann", target_is_directory=True)
    read = layouts.read_class(klass)
    ann = next(s for s in read.students if s.name == "ann")
    assert list(ann.files) == ["ex01_jit_forms.py"] and "passwd.py" in words(ann.notes[0])
    assert b"root:" not in b"".join(__import__("base64").b64decode(v) for v in roster.pack(ann)["files"].values())
    assert next(s for s in read.students if s.name == "bo").status == "not_a_submission"
    _accounted(read)


# ------------------------------------------------------------------ results folder names
@pytest.mark.parametrize("name, key", [
    ("doejane_12345", "doejane_12345"), ("Jane Doe_101", "Jane Doe_101"), ("李雷_102", "李雷_102"),
    ("-rf", "rf"), ("..", "student"), (".hidden", "hidden"), ("a/b\\c", "a_b_c"), ("tab\there", "tab_here"),
    ("x" * 200, "x" * 80), ("Jose\u0301", "José")])
def test_a_results_folder_name_is_safe_on_any_disk(name, key):
    assert roster.safe_key(name) == key


# ------------------------------------------------------------------ a whole checkout in a submission
def _copy(folder: Path, source: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for file in source.glob("*.py"):
        (folder / file.name).write_bytes(file.read_bytes())


def test_a_whole_checkout_is_graded_from_its_exercises_folder(tmp_path):
    chapter = load_chapter("ch4")
    checkout = tmp_path / "jit-course-main"
    _copy(checkout / "exercises" / "ch4", SOLUTIONS)
    _copy(checkout / "solutions" / "ch4", STUBS)  # the same file names elsewhere: exercises/ wins
    (checkout / ".venv" / "lib").mkdir(parents=True)
    (checkout / ".venv" / "lib" / "ex01_jit_forms.py").write_text("never graded\n", encoding="utf-8")
    sub = load(tmp_path, chapter, tmp_path / "scratch")
    assert sub.inner == "jit-course-main/exercises/ch4" and sub.describe()["inner"] == sub.inner
    assert (sub.module_dir / "ex02_where.py").read_bytes() == (SOLUTIONS / "ex02_where.py").read_bytes()


def test_two_equal_places_for_the_chapter_are_one_line(tmp_path):
    chapter = load_chapter("ch4")
    _copy(tmp_path / "sub" / "a" / "ch4", SOLUTIONS)
    _copy(tmp_path / "sub" / "b" / "ch4", SOLUTIONS)
    with pytest.raises(SubmissionError) as error:
        load(tmp_path / "sub", chapter, tmp_path / "scratch")
    line = words(error.value.text)
    assert error.value.text.key == "error.many_chapter_folders" and "a/ch4" in line and "b/ch4" in line


def test_untouched_stubs_beside_a_notebook_mean_the_work_is_in_the_notebook(tmp_path):
    chapter = load_chapter("ch4")
    release = tmp_path / "checkout" / "exercises"
    _copy(release / "ch4", STUBS)
    notebook = Path(__file__).resolve().parent.parent / "exercises" / "ch4.ipynb"
    (release / "ch4.ipynb").write_bytes(notebook.read_bytes())
    sub = load(tmp_path / "checkout", chapter, tmp_path / "scratch")  # nothing done in either: the modules
    assert sub.kind == "folder" and sub.inner == "exercises/ch4"
    answered = notebook.read_text(encoding="utf-8").replace(
        'raise NotImplementedError(\\"ex02: piecewise\\")', "return jnp.where(x > 0, x * x, 0.5 * x)")
    assert answered != notebook.read_text(encoding="utf-8")
    (release / "ch4.ipynb").write_text(answered, encoding="utf-8")  # work in the notebook (issue 25)
    sub = load(tmp_path / "checkout", chapter, tmp_path / "scratch1")
    assert sub.kind == "notebook" and sub.inner == "exercises/ch4.ipynb"
    (release / "ch4" / "ex02_where.py").write_text(_solution("ex02_where.py"), encoding="utf-8")
    assert load(tmp_path / "checkout", chapter, tmp_path / "scratch2").kind == "folder"  # more work in the files
