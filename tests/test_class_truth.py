"""Grading truth where a class meets: links in a submission, the results folder, odd names.

* **Links** (to ``/etc/passwd``, to a classmate's folder, to the results folder) are never
  followed: the exercise whose file is a link is graded as missing and says so, and the
  report lists every link for the instructor; a classmate's correct file reached by a
  link earns nothing.
* **The results folder**: a student's code that looks for ``--out`` (walking up, the
  environment, other processes' command lines in ``/proc``) and writes a fake gradebook
  row or a classmate's report changes nothing; the gradebook comes from the grader's own
  records, the manifest is sealed, ``grade verify RESULTS/`` names any file changed
  afterwards, and a resumed batch grades again a student whose report was changed.
* **Odd names** (spaces, scripts other than Latin, a leading dash, dots): graded under
  that name, and nothing written outside ``--out``.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SOLUTIONS, STUBS, make_submission

from grader.cli import main
from grader.runner import sandbox as sandboxes

pytestmark = pytest.mark.slow
PLAN = sandboxes.plan("auto")
STRONG = PLAN.kind == "bwrap" and PLAN.uid_isolation
WEAK = [] if STRONG else ["--allow-weak-sandbox"]


def _grades(out: Path) -> dict[str, dict]:
    """grades.csv by student, each name as a spreadsheet shows it (a name it would read as a formula,
    ``-rf``, is written ``'-rf``: issue 27)."""
    from grader.safetext import formula

    with (out / "grades.csv").open(encoding="utf-8") as handle:
        return {row["student"][1:] if row["student"].startswith("'") and formula(row["student"][1:])
                else row["student"]: row for row in csv.DictReader(handle)}


# ------------------------------------------------------------------ links
def _linked(root: Path) -> Path:
    """Bob's ex02 is a link to Alice's correct one; he also links /etc/passwd and the results folder."""
    alice = make_submission(root / "class" / "alice-tmp")
    shutil.move(str(alice), root / "class" / "alice")
    bob = make_submission(root / "bob-tmp")
    shutil.move(str(bob), root / "class" / "bob")
    bob = root / "class" / "bob"
    (bob / "ex02_where.py").unlink()
    (bob / "ex02_where.py").symlink_to("../alice/ex02_where.py")
    (bob / "passwd.py").symlink_to("/etc/passwd")
    (bob / "results").symlink_to(root / "results", target_is_directory=True)
    return bob


def _link_verdict(report: dict) -> tuple[dict, set[str]]:
    ex02 = next(e for e in report["exercises"] if e["id"] == "ex02_where")
    return ex02, {i["file"] for i in report["integrity"] if i["code"] == "link"}


def test_grade_never_follows_a_link_out_of_the_submission(tmp_path):
    bob = _linked(tmp_path)
    out = tmp_path / "report"
    assert main([str(bob), "-k", "2", "--seed", "3", "--report-dir", str(out), "--lang", "en"]) == 0
    ex02, links = _link_verdict(json.loads((out / "report.partial.json").read_text(encoding="utf-8")))
    assert ex02["score"] == 0 and ex02["status"] == "error"  # Alice's correct file earns Bob nothing
    assert "ex02_where.py is a link (to ../alice/ex02_where.py)" in ex02["error"] and "never followed" in ex02["error"]
    assert links == {"ex02_where.py", "passwd.py", "results"}
    markdown = (out / "report.partial.md").read_text(encoding="utf-8")
    assert "passwd.py is a link to /etc/passwd" in markdown  # the instructor reads it in the report too


def test_a_batch_never_follows_a_link_either(tmp_path):
    _linked(tmp_path)
    out = tmp_path / "results"
    assert main(["batch", str(tmp_path / "class"), "--chapter", "ch4", "--out", str(out), "-k", "2", "--seed", "3",
                 "--lang", "en", *WEAK]) == 0
    rows = _grades(out)
    assert rows["alice"]["total"] == "10" and rows["bob"]["total"] == "0"
    ex02, links = _link_verdict(json.loads((out / "bob" / "report.partial.json").read_text(encoding="utf-8")))
    assert "is a link (to ../alice/ex02_where.py)" in ex02["error"]
    assert links == {"ex02_where.py", "passwd.py", "results"}
    uses = {row["file"]: row["use"] for row in csv.DictReader((out / "download.csv").open(encoding="utf-8"))}
    assert uses["bob/passwd.py"] == uses["bob/results"] == "link"
    assert "passwd.py is a link" in (out / "summary.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------ the results folder
#: Mallory looks for the results folder everywhere she can, and writes a fake gradebook row and a
#: perfect report for herself and a zero for Alice
FORGE = '''import glob, json, os

_found = set()
_here = os.path.dirname(os.path.abspath(__file__))
_up = _here
for _ in range(8):
    _up = os.path.dirname(_up)
    _found.update(os.path.dirname(p) for p in glob.glob(os.path.join(_up, "*", "grades.csv")))
    _found.update(os.path.dirname(p) for p in glob.glob(os.path.join(_up, "grades.csv")))
for _value in os.environ.values():
    if os.path.isdir(_value):
        _found.add(_value)
for _cmdline in glob.glob("/proc/*/cmdline"):
    try:
        _args = open(_cmdline, "rb").read().split(b"\\0")
    except OSError:
        continue
    if b"--out" in _args and _args.index(b"--out") + 1 < len(_args):
        _found.add(_args[_args.index(b"--out") + 1].decode())
_wrote = []
for _out in _found:
    for _name, _text in (("grades.csv", "student,total\\nmallory,80\\n"),
                         ("alice/report.partial.json", json.dumps({"score": 0, "exercises": []})),
                         ("mallory/report.partial.json", json.dumps({"score": 10, "exercises": []}))):
        try:
            os.makedirs(os.path.dirname(os.path.join(_out, _name)), exist_ok=True)
            with open(os.path.join(_out, _name), "w") as _f:
                _f.write(_text)
            _wrote.append(os.path.join(_out, _name))
        except OSError:
            pass
print("FOUND", sorted(_found), "WROTE", _wrote)
'''


def _class_with_a_forger(root: Path) -> Path:
    klass = root / "class"
    for name, base, source in (("alice", SOLUTIONS, None), ("mallory", STUBS, FORGE)):
        made = make_submission(root / f"{name}-tmp", {"ex02_where": source + (STUBS / "ex02_where.py").read_text(
            "utf-8")} if source else None, base=base)
        shutil.move(str(made), klass / name)
    return klass


@pytest.mark.parametrize("sandbox", ["auto", "process"])
def test_a_student_who_finds_the_results_folder_changes_nothing(tmp_path, sandbox):
    """In bubblewrap the results folder is not there at all. In the weaker process sandbox Mallory
    finds it in /proc (the batch's command line); where her code runs as the grader's own user (on a
    machine whose Python other users cannot read) she even overwrites Alice's report and the
    gradebook. Either way, once the batch ends, the gradebook, Alice's report and the manifest are the
    grader's, written from its own records, grade verify says so, and the summary says what was
    written again."""
    if sandbox == "auto" and not STRONG:
        pytest.skip("needs bubblewrap and per-job uids (root with bwrap installed)")
    out = tmp_path / "results"
    batch = subprocess.run([sys.executable, "-m", "grader", "batch", str(_class_with_a_forger(tmp_path)), "--chapter",
                            "ch4", "--out", str(out), "-k", "2", "--seed", "3", "--lang", "en", "-j", "1", "--sandbox",
                            sandbox, "--allow-weak-sandbox"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert batch.returncode == 0, batch.stderr[-2000:]  # its command line names --out, for /proc to show
    rows = _grades(out)
    assert (rows["alice"]["total"], rows["mallory"]["total"]) == ("10", "0")
    alice = json.loads((out / "alice" / "report.partial.json").read_text(encoding="utf-8"))
    assert alice["score"] == 10
    output = json.loads((out / "mallory" / "report.partial.json").read_text(encoding="utf-8"))["exercises"][0]["output"]
    found, wrote = output.split("WROTE", 1)
    summary = (out / "summary.md").read_text(encoding="utf-8")
    if sandbox == "auto":
        assert str(out) not in found + wrote, output  # in bubblewrap she never even sees it
    else:
        assert str(out) in found, output  # the batch's command line, in /proc
        if str(out / "alice" / "report.partial.json") in wrote:  # her code ran as the grader's own user
            assert "alice/report.partial.json" in summary and "written again" in summary
        else:
            assert str(out) not in wrote
    unknown = out / "mallory" / "grades.csv"
    if unknown.exists():  # a file she left there, never the batch's: verify names it
        assert main(["verify", str(out), "--lang", "en"]) == 1
        unknown.unlink()
    assert main(["verify", str(out), "--lang", "en"]) == 0


def test_grade_verify_names_every_file_changed_and_a_resumed_batch_grades_again(tmp_path, capsys):
    """What a forger with write access (a weaker sandbox, anyone on the machine) could do afterwards is
    told: grade verify names each file changed since the batch wrote it, and the same command again
    grades again the student whose report was changed, and writes the gradebook afresh."""
    out = tmp_path / "results"
    command = ["batch", str(_class_with_a_forger(tmp_path)), "--chapter", "ch4", "--out", str(out), "-k", "2",
               "--seed", "3", "--lang", "en", "-j", "1", *WEAK]
    assert main(command) == 0
    assert main(["verify", str(out), "--lang", "en"]) == 0
    assert "every file is as the batch wrote it" in capsys.readouterr().out
    report = out / "alice" / "report.partial.json"
    forged = json.loads(report.read_text(encoding="utf-8"))
    forged["score"], forged["exercises"][0]["score"] = 0, 0
    report.write_text(json.dumps(forged), encoding="utf-8")
    with (out / "grades.csv").open("a", encoding="utf-8") as handle:
        handle.write("mallory,,,,,,80,80,100,completed,\n")
    assert main(["verify", str(out), "--lang", "en"]) == 1
    err = capsys.readouterr().err
    assert f"{report} was changed" in err and f"{out / 'grades.csv'} was changed" in err and "2 files" in err
    assert main(command) == 0
    assert "1 to grade, 1 already graded (kept)" in capsys.readouterr().err  # Alice again, Mallory kept
    assert _grades(out)["alice"]["total"] == "10" and "mallory,,,,,,80" not in (out / "grades.csv").read_text()
    assert main(["verify", str(out), "--lang", "en"]) == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    manifest["students"]["mallory"]["status"] = "completed!"
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert main(["verify", str(out), "--lang", "en"]) == 1
    assert "manifest.json was changed" in capsys.readouterr().err


# ------------------------------------------------------------------ odd names
ODD = ["José García", "李雷 韩梅梅", "-rf", "a..b", "x y.ipynb", "--help.zip"]


def test_odd_names_grade_under_that_name_and_nothing_is_written_outside_out(tmp_path):
    klass = tmp_path / "class"
    klass.mkdir()
    for name in ODD:
        if name.endswith(".zip"):
            shutil.make_archive(str(klass / name[:-4]), "zip", STUBS)
        elif name.endswith(".ipynb"):
            shutil.copy(Path(__file__).resolve().parent.parent / "exercises" / "ch4.ipynb", klass / name)
        else:
            shutil.copytree(STUBS, klass / name)
    before = sorted(p.name for p in tmp_path.iterdir())
    out = tmp_path / "results"
    assert main(["batch", str(klass), "--chapter", "ch4", "--out", str(out), "-k", "1", "--seed", "3",
                 "--lang", "en", *WEAK]) == 0
    rows = _grades(out)
    assert {name: rows[name]["status"] for name in ("José García", "李雷 韩梅梅", "-rf", "a..b", "x y", "--help")} \
        == dict.fromkeys(("José García", "李雷 韩梅梅", "-rf", "a..b", "x y", "--help"), "completed")
    assert sorted(p.name for p in tmp_path.iterdir()) == before + ["results"]  # nothing beside --out
    folders = {p.name for p in out.iterdir() if p.is_dir()}
    assert folders == {"José García", "李雷 韩梅梅", "rf", "a..b", "x y", "help"}
    for folder in folders:  # each under --out, holding that student's own report
        report = json.loads((out / folder / "report.partial.json").read_text(encoding="utf-8"))
        assert report["exercises"][0]["status"] == "not_attempted"
    assert os.path.realpath(out / "rf") == str(out / "rf")
