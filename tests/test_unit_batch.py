"""Unit tests of the batch's parts that need no grading: the class roster, packing, the
core slots, the shipped reference, and the gradebook's formats on a hand-made report."""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import ROOT

from grader.batch import cpus, gradebook, layouts, roster
from grader.batch.reference import outcomes_digest, seed_cache
from grader.chapter import load_chapter
from grader.outcomes import ReferenceCache
from grader.i18n import grader_catalog


# ------------------------------------------------------------------ roster
def test_the_roster_names_students_and_says_why_some_are_not_graded(tmp_path):
    klass = tmp_path / "class"
    (klass / "ann").mkdir(parents=True)
    (klass / "Bo").mkdir()
    (klass / "bo.zip").write_bytes(b"PK")
    (klass / "cy.ipynb").write_text("{}", encoding="utf-8")
    (klass / "readme.txt").write_text("hi", encoding="utf-8")
    (klass / ".DS_Store").write_bytes(b"")
    (klass / "results").mkdir()
    (klass / "link").symlink_to(klass / "ann")
    (klass / "grades.csv.zip").write_bytes(b"PK")
    (klass / "ann" / "ex01_jit_forms.py").write_text("x = 1\n", encoding="utf-8")
    students = {s.name: s for s in layouts.read_class(klass, klass / "results").students}
    assert set(students) == {"ann", "Bo", "bo", "cy", "readme.txt", "link", "grades.csv"}
    assert students["grades.csv"].status == "name_clash"
    assert students["ann"].problem is None and students["cy"].problem is None
    # equal but for case: each keeps its name and gets a results folder of its own (issue 27), and says so
    assert students["Bo"].key != students["bo"].key and students["Bo"].key.casefold() != students["bo"].key.casefold()
    assert students["bo"].problem is None and students["bo"].files == {"bo.zip": "bo.zip"}
    words = lambda t: grader_catalog().render(t, "en")  # noqa: E731
    assert "Bo, bo.zip" in words(students["bo"].notes[-1]) and students["bo"].key in words(students["bo"].notes[-1])
    assert students["readme.txt"].status == "not_a_submission"
    assert students["link"].status == "not_a_submission" and "link" in words(students["link"].problem)


def test_an_empty_class_or_a_missing_folder_is_an_error(tmp_path):
    with pytest.raises(roster.ClassError) as empty:
        layouts.read_class(tmp_path)
    assert empty.value.text.key == "batch.error.empty"
    with pytest.raises(roster.ClassError) as missing:
        layouts.read_class(tmp_path / "nowhere")
    assert missing.value.text.key == "batch.error.no_such_path"


def _one(klass: Path, name: str) -> roster.Student:
    return next(s for s in layouts.read_class(klass).students if s.name == name)


def test_packing_leaves_links_out_and_unpacks_the_same_files(tmp_path):
    klass = tmp_path / "class"
    folder = klass / "ann"
    (folder / "data").mkdir(parents=True)
    (folder / "ex01_jit_forms.py").write_text("x = 1\n", encoding="utf-8")
    (folder / "data" / "ex02_where.py").write_text("y = 2\n", encoding="utf-8")
    secret = tmp_path / "secret.py"
    secret.write_text("classmate's\n", encoding="utf-8")
    (folder / "peek.py").symlink_to(secret)
    (folder / "peeks").symlink_to(tmp_path, target_is_directory=True)
    student = _one(klass, "ann")
    packed = roster.pack(student)
    assert set(packed["files"]) == {"ex01_jit_forms.py", "data/ex02_where.py"}  # a link's target is never read
    assert packed["links"] == {"peek.py": str(secret), "peeks": str(tmp_path)}
    assert [str(n.args["file"]) for n in student.notes] == ["peek.py", "peeks"]  # links: said, never followed
    again = roster.unpack(json.loads(json.dumps(packed)), "ann", tmp_path / "there")
    assert again.name == "ann" and (again / "ex01_jit_forms.py").read_text(encoding="utf-8") == "x = 1\n"
    assert (again / "data" / "ex02_where.py").is_file()
    assert (again / "peek.py").is_symlink()  # a link again where it is graded, so that its report says so
    (folder / "ex01_jit_forms.py").write_text("x = 2\n", encoding="utf-8")
    assert roster.pack(_one(klass, "ann"))["digest"] != packed["digest"]


def test_a_submission_too_large_to_send_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(roster, "MAX_TOTAL_BYTES", 10)
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "big.zip").write_bytes(b"x" * 100)
    with pytest.raises(roster.ClassError) as too_large:
        roster.pack(_one(tmp_path / "class", "big"))
    assert too_large.value.text.key == "error.too_large"


# ------------------------------------------------------------------ core slots
def test_slots_split_the_cores_and_none_when_too_few():
    assert cpus.slots(2, [0, 1, 2, 3]) == [[0, 1], [2, 3]]
    assert cpus.slots(3, [0, 1, 2, 3]) == [[0], [1], [2, 3]]
    assert cpus.slots(1, [0, 1]) == [[0, 1]]
    assert cpus.slots(3, [0, 1]) == []


def test_two_gradings_never_hold_the_same_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(cpus, "LOCK_DIR", tmp_path)
    monkeypatch.setattr(cpus, "machine_cpus", lambda: [0, 1])
    first = cpus.acquire(2, wait_s=0)
    second = cpus.acquire(2, wait_s=0)
    assert first is not None and second is not None
    assert sorted(first.cores + second.cores) == [0, 1]
    assert cpus.acquire(2, wait_s=0) is None  # both slots held: no third
    first.release()
    third = cpus.acquire(2, wait_s=0)
    assert third is not None and third.cores == first.cores
    second.release()
    third.release()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv: the locks are made by root and taken as an ordinary uid")
def test_the_core_locks_are_shared_by_every_user_and_an_older_closed_folder_is_no_crash():
    """Every grader on the machine takes its cores from the same locks, whoever runs it: a folder and locks made
    by root are open to an ordinary user (its batch took the same locks), and one made closed by an older
    grader (root's, 0o755 with locks of 0o600: another user's batch crashed on PermissionError for every
    student) gives way to that user's own folder beside it."""
    take = ("import sys; from pathlib import Path; from grader.batch import cpus; cpus.LOCK_DIR = Path(sys.argv[1]); "
            "cpus.machine_cpus = lambda: [0, 1]; slot = cpus.acquire(2, wait_s=0); "
            "print(slot.cores if slot else None, sorted(p.name for p in cpus.LOCK_DIR.parent.iterdir()))")
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", take]
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="cpu-locks-"))  # in /tmp itself: pytest's folders are root's alone
    os.chmod(root, 0o1777)
    try:
        _shared_and_closed(root, as_nobody)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _shared_and_closed(root: Path, as_nobody: list[str]) -> None:
    shared = root / "grader-cpu-locks"
    mine = cpus._lock_dir(shared, shared=True)
    assert oct(mine.stat().st_mode & 0o7777) == "0o1777"
    held = cpus._lock_all(shared, [0])  # root holds core 0: nobody's batch must take core 1
    assert held is not None and oct((shared / "cpu-0.lock").stat().st_mode & 0o777) == "0o666"
    done = subprocess.run([*as_nobody, str(shared)], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "GRADER_NO_PIN"})
    assert done.returncode == 0 and done.stdout.split(" [")[0] == "[1]", done.stderr[-2000:]
    for fd in held:
        os.close(fd)
    closed = root / "closed" / "grader-cpu-locks"  # as an older grader left it
    closed.mkdir(parents=True, mode=0o755)
    os.chmod(closed.parent, 0o1777)
    os.chmod(closed, 0o755)
    for core in (0, 1):
        os.close(os.open(closed / f"cpu-{core}.lock", os.O_CREAT | os.O_RDWR, 0o600))
    done = subprocess.run([*as_nobody, str(closed)], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "GRADER_NO_PIN"})
    assert done.returncode == 0, done.stderr[-2000:]
    cores, names = done.stdout.split(" [", 1)
    assert cores in ("[0]", "[1]") and "grader-cpu-locks-65534" in names, done.stdout


def test_pinning_restricts_this_process_and_what_it_starts():
    before = os.sched_getaffinity(0)
    try:
        cpus.CoreSlot([min(before)], []).pin()
        assert os.sched_getaffinity(0) == {min(before)}
        import subprocess
        import sys

        child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                               capture_output=True, text=True, check=True)
        assert child.stdout.strip() == f"[{min(before)}]"
    finally:
        os.sched_setaffinity(0, before)


# ------------------------------------------------------------------ the shipped reference
def test_a_shipped_reference_is_used_only_for_the_same_chapter_code_and_seed(tmp_path):
    from grader.runner.job_sessions import JobOutcome
    from grader import wire
    import dataclasses

    chapter = load_chapter("ch4")
    ex = chapter.exercises[0]
    outcome = JobOutcome(end="done", side="reference", records={"k": [1.5]})
    shipped = {"digest": outcomes_digest(chapter), "seed": 4,
               "outcomes": {ex.id: wire.encode(dataclasses.asdict(outcome))}}
    cache, used = seed_cache(shipped, chapter, 4, None)
    assert used and cache.get(ReferenceCache.key(chapter, ex, 4, chapter.solutions)) == outcome
    assert seed_cache(shipped, chapter, 5, None)[1] is False
    assert seed_cache({**shipped, "digest": "other"}, chapter, 4, None)[1] is False
    timed = next(e for e in chapter.exercises if e.timed)
    shipped["outcomes"][timed.id] = shipped["outcomes"][ex.id]
    cache, _ = seed_cache(shipped, chapter, 4, None)
    assert cache.get(ReferenceCache.key(chapter, timed, 4, chapter.solutions)) is None  # timed: never shipped


# ------------------------------------------------------------------ formats
def _report() -> dict:
    check = lambda cid, status, points: {"id": cid, "title": f"title {cid}", "category": "numeric",  # noqa: E731
                                        "points": points, "max_points": 2, "status": status,
                                        "message": f"seen {cid}", "hint": "reread section 1", "hint_id": "check"}
    return {"score": 3, "max_score": 6, "title": "Chapter 4: 3 / 6", "duration_s": 4.0, "partial": True,
            "sandbox": {"kind": "bwrap", "uid_isolation": True},
            "exercises": [{"id": "ex01", "score": 2, "max_score": 4, "status": "partial", "duration_s": 2.0,
                           "error": None, "checks": [check("a", "passed", 2), check("b", "failed", 0)]},
                          {"id": "ex02", "score": 1, "max_score": 2, "status": "timeout", "duration_s": 2.0,
                           "error": "ran past 5 s", "checks": [check("c", "timeout", 1)]}]}


def test_rows_and_gradebook_from_a_report():
    row = gradebook.row_from_report("ann", _report())
    assert row.status == "timeout" and "ex02: timeout (ran past 5 s)" in row.detail and row.total == 3
    failed = gradebook.row_from_failure("bo", "unreadable", "bad zip")
    text = gradebook.grades_csv([row, failed], {"ex01": 4, "ex02": 2})
    lines = list(csv.reader(io.StringIO(text)))
    assert lines[0] == ["student", "name", "id", "email", "late", "submitted", "ex01", "ex02", "total", "percent",
                        "status", "detail"]
    assert lines[1] == ["(max points)", "", "", "", "", "", "4", "2", "6", "100", "", ""]
    assert lines[2][:11] == ["ann", "ann", "", "", "", "", "2", "1", "3", "50", "timeout"]
    assert lines[3] == ["bo", "bo", "", "", "", "", "0", "0", "0", "0", "unreadable", "bad zip"]


def test_gradescope_and_junit_from_a_report():
    row = gradebook.row_from_report("ann", _report())
    results = gradebook.gradescope(row)
    assert results["score"] == 3 and [t["status"] for t in results["tests"]] == ["passed", "failed", "failed"]
    assert results["tests"][1]["output"] == "seen b\nHint: reread section 1"
    root = ET.fromstring(gradebook.junit_xml([row, gradebook.row_from_failure("bo", "crash", "died")], "ch4"))
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "1", "2")
    suite = root.find("testsuite[@name='ann']")
    assert suite.find("testcase[@name='b']/failure").get("message") == "seen b"
    assert suite.find("testcase[@name='c']/error").get("type") == "timeout"
