"""grade batch on this machine: a class of generated submissions graded with -j 2.

One class is graded once for the module (two exercises, ``-k 1 -k 2``, to keep it
short): full marks (a folder), the stubs (a zip), common mistakes (a notebook), code
that crashes, code that hangs, code that fills memory, a student whose code tries to delete a classmate's
folder and the results and to read the reference, a zip with a path outside the
archive, a zip that inflates to 48 MiB, a file that is not a submission and two
names equal but for case. The tests read what it wrote: the gradebook against each
student's report and against ``grade`` run alone on that student with the same seed,
the exports, the summary (in headless Chromium too), the classmates' folders, and
resuming. About a minute and a half in all on two cores.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import nbformat
import pytest

from browser import needs_browser, render
from conftest import ROOT, SOLUTIONS, STUBS, exercise, grade_to_dict, make_submission, sigint_as_at_a_terminal, variant

from grader.cli import main
from grader.runner import sandbox as sandboxes

pytestmark = pytest.mark.slow
PLAN = sandboxes.plan("auto")
STRONG = PLAN.kind == "bwrap" and PLAN.uid_isolation
needs_strong = pytest.mark.skipif(not STRONG, reason="batch grading needs bubblewrap and per-job uids (run as root "
                                                     "with bwrap installed); tested with --allow-weak-sandbox in "
                                                     "test_batch_dask.py")
SEED = 11
EXERCISES = ["-k", "1", "-k", "2"]
#: short, for the hanging student; long enough for a full-mark exercise on a loaded 2-core machine
EXERCISE_TIMEOUT = 20
CRASH = (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8").replace(
    "    return jnp.where(x > 0, x * x, 0.5 * x)", "    import os\n    os._exit(3)")
#: fills memory: 16 GiB in 256 MiB pieces if nothing stopped it (the batch runs with --memory-limit 1024)
HOARD = (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8").replace(
    "    return jnp.where(x > 0, x * x, 0.5 * x)",
    "    hoard = [bytearray(1 << 28) for _ in range(64)]\n    return jnp.where(x > 0, x * x, 0.5 * x)")
HANG = (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8").replace(
    "    return jnp.where(x > 0, x * x, 0.5 * x)", "    while True:\n        pass")
#: at import: delete a classmate's folder and the results, read the reference (into its output)
ATTACK = '''import os
import shutil

for _victim in (VICTIMS):
    shutil.rmtree(_victim, ignore_errors=True)
for _secret in (SECRETS):
    try:
        with open(_secret) as _f:
            print("STOLEN", _f.read()[:200])
    except OSError as _exc:
        print("could not read", _secret, type(_exc).__name__)
'''


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(nb, str(path))
    return path


def _zip(folder: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w") as archive:
        for file in sorted(folder.glob("*.py")):
            archive.write(file, f"ch4/{file.name}")
    return target


def _student(klass: Path, name: str, replacements: dict | None = None, base: Path = SOLUTIONS) -> Path:
    """``klass/name``: a ch4 folder of ``base``'s modules with some replaced."""
    made = make_submission(klass / f".{name}-tmp", replacements, base=base)
    target = klass / name
    made.rename(target)
    shutil.rmtree(klass / f".{name}-tmp")
    return target


def build_class(root: Path) -> Path:
    """The class folder (``root/class``); the results go to ``root/results``."""
    klass = root / "class"
    klass.mkdir(parents=True)
    _student(klass, "alice")
    _zip(_student(root, "bob-stubs", base=STUBS), klass / "bob.zip")
    ex01 = (SOLUTIONS / "ex01_jit_forms.py").read_text(encoding="utf-8")
    _notebook(klass / "carmen.ipynb", ex01, variant("ex02_where", "python_if_piecewise"))
    _student(klass, "dan", {"ex02_where": CRASH})
    _student(klass, "erin", {"ex02_where": HANG})
    _student(klass, "fay", {"ex02_where": HOARD})
    victims = [str(klass / "alice"), str(root / "results")]
    secrets = [str(ROOT / "solutions" / "ch4" / "ex01_jit_forms.py"), str(klass / "alice" / "ex02_where.py")]
    attack = ATTACK.replace("VICTIMS", repr(victims)[1:-1] + ",").replace("SECRETS", repr(secrets)[1:-1] + ",")
    _student(klass, "mallory", {"ex01_jit_forms": attack + (STUBS / "ex01_jit_forms.py").read_text("utf-8")})
    with zipfile.ZipFile(klass / "oscar.zip", "w") as archive:  # a path outside the archive
        archive.writestr("../../escaped.py", "print('escaped')\n")
        archive.writestr("ex01_jit_forms.py", "x = 1\n")
    with zipfile.ZipFile(klass / "victor.zip", "w", zipfile.ZIP_DEFLATED) as archive:  # inflates to 48 MiB
        archive.writestr("ex01_jit_forms.py", "#" * (48 << 20))
    (klass / "notes.txt").write_text("not a submission\n", encoding="utf-8")
    for name in ("Pat", "pat"):
        _student(klass, name, base=STUBS)
    return klass


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch")
    klass = build_class(root)
    before = _snapshot(klass)
    out = root / "results"
    code = main(["batch", str(klass), "--chapter", "ch4", "--out", str(out), "-j", "2", *EXERCISES,
                 "--seed", str(SEED), "--exercise-timeout", str(EXERCISE_TIMEOUT), "--memory-limit", "1024",
                 "--lang", "en"])
    return {"root": root, "class": klass, "out": out, "code": code, "before": before}


def _grades(out: Path) -> dict[str, dict]:
    with (out / "grades.csv").open(encoding="utf-8") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


def _report(out: Path, name: str) -> dict:
    return json.loads((out / name / "report.partial.json").read_text(encoding="utf-8"))


@needs_strong
def test_the_batch_runs_to_its_end_and_gives_every_student_a_row(batch):
    assert batch["code"] == 0
    rows = _grades(batch["out"])
    assert list(rows)[0] == "(max points)"
    assert rows["(max points)"]["ex01_jit_forms"] == "10" and rows["(max points)"]["total"] == "20"
    statuses = {name: row["status"] for name, row in rows.items() if name != "(max points)"}
    assert statuses == {"alice": "completed", "bob": "completed", "carmen": "completed", "dan": "crash",
                        "erin": "timeout", "fay": "completed", "mallory": "completed", "oscar": "unreadable",
                        "victor": "unreadable", "notes.txt": "not_a_submission", "Pat": "completed", "pat": "completed"}
    assert rows["alice"]["total"] == "20" and rows["alice"]["percent"] == "100"
    assert rows["bob"]["total"] == "0"
    assert "escaped.py" in rows["oscar"]["detail"] and "unsafe path" in rows["oscar"]["detail"]
    # one name on a case-insensitive disk: each graded into a results folder of its own (issue 27)
    folders = sorted(p.name for p in batch["out"].iterdir() if p.name.casefold().startswith("pat-"))
    assert len(folders) == 2 and all((batch["out"] / f / "report.partial.json").exists() for f in folders)
    assert "victor.zip" in rows["victor"]["detail"] and "more than" in rows["victor"]["detail"]
    assert "ex02_where: timeout" in rows["erin"]["detail"]
    assert float(rows["fay"]["ex01_jit_forms"]) == 10 and float(rows["fay"]["ex02_where"]) < 10  # memory: ex02 only


@needs_strong
def test_the_gradebook_matches_each_students_report(batch):
    rows = _grades(batch["out"])
    for name in ("alice", "bob", "carmen", "dan", "erin", "fay", "mallory"):
        report = _report(batch["out"], name)
        assert report["seed"] == SEED
        assert float(rows[name]["total"]) == report["score"]
        for ex in report["exercises"]:
            assert float(rows[name][ex["id"]]) == ex["score"], (name, ex["id"])


@needs_strong
@pytest.mark.parametrize("name", ["carmen", "dan"])
def test_a_students_report_is_what_grade_gives_alone_with_that_seed(batch, name):
    path = next(p for p in batch["class"].iterdir() if p.name == name or p.stem == name)
    alone = grade_to_dict(path, exercises=("1", "2"), seed=SEED, exercise_timeout_s=EXERCISE_TIMEOUT)
    graded = _report(batch["out"], name)
    assert graded["submission"]["sha256"] == alone["submission"]["sha256"]
    assert graded["submission"]["path"] == str(path)
    for ex_batch, ex_alone in zip(graded["exercises"], alone["exercises"], strict=True):
        assert (ex_batch["id"], ex_batch["score"], ex_batch["status"]) == (ex_alone["id"], ex_alone["score"],
                                                                           ex_alone["status"])
        assert [(c["id"], c["status"], c["message"]) for c in ex_batch["checks"]] == \
            [(c["id"], c["status"], c["message"]) for c in ex_alone["checks"]]


@needs_strong
def test_each_grading_ran_on_cores_of_its_own_with_the_shipped_reference(batch):
    """-j 2: each worker held one slot of the machine's cores (the timed exercise's, had there been one),
    and graded against the reference run once for the class, not a reference run of its own."""
    cores = sorted(os.sched_getaffinity(0))
    manifest = json.loads((batch["out"] / "manifest.json").read_text(encoding="utf-8"))
    graded = [entry for entry in manifest["students"].values() if entry.get("report")]
    assert len(graded) == 9 and {entry["reference_source"] for entry in graded} == {"shipped"}  # run once, here
    used = {tuple(entry["cpus"]) for entry in graded}
    if len(cores) >= 2:
        assert used <= {tuple(cores[:len(cores) // 2]), tuple(cores[len(cores) // 2:])}, used
    else:
        assert used == {None}


@needs_strong
def test_common_mistakes_crashes_and_hangs_cost_only_their_exercise(batch):
    carmen = {e["id"]: e for e in _report(batch["out"], "carmen")["exercises"]}
    assert carmen["ex01_jit_forms"]["status"] == "passed"
    assert {c["id"]: c["status"] for c in carmen["ex02_where"]["checks"]}["piecewise.traceable"] == "failed"
    dan = {e["id"]: e for e in _report(batch["out"], "dan")["exercises"]}
    assert dan["ex01_jit_forms"]["status"] == "passed" and dan["ex02_where"]["status"] == "error"
    erin = {e["id"]: e for e in _report(batch["out"], "erin")["exercises"]}
    assert erin["ex01_jit_forms"]["status"] == "passed" and erin["ex02_where"]["status"] == "timeout"
    fay = {e["id"]: e for e in _report(batch["out"], "fay")["exercises"]}
    assert fay["ex01_jit_forms"]["status"] == "passed"  # the memory limit stopped ex02 (MemoryError, or killed)
    assert fay["ex02_where"]["status"] in ("partial", "failed", "error")
    assert "MemoryError" in json.dumps(fay["ex02_where"]) or "memory" in (fay["ex02_where"]["error"] or "")


@needs_strong
def test_a_student_cannot_touch_classmates_results_or_the_reference(batch):
    assert _snapshot(batch["class"]) == batch["before"]  # every classmate's files as they were
    mallory = exercise(_report(batch["out"], "mallory"), "ex01_jit_forms")
    assert mallory["status"] == "not_attempted" and mallory["score"] == 0
    assert "STOLEN" not in json.dumps(_report(batch["out"], "mallory"))
    for name in ("alice", "bob", "dan"):  # the results of those graded before or beside it
        assert (batch["out"] / name / "report.partial.json").exists()


@needs_strong
def test_gradescope_results_and_junit_come_from_the_same_reports(batch):
    for name in ("alice", "carmen", "dan"):
        results = json.loads((batch["out"] / name / "results.json").read_text(encoding="utf-8"))
        report = _report(batch["out"], name)
        assert results["score"] == report["score"]
        assert {"score", "execution_time", "tests"} <= set(results)
        assert len(results["tests"]) == sum(len(e["checks"]) for e in report["exercises"])
        assert sum(t["score"] for t in results["tests"]) == pytest.approx(report["score"])
        for test in results["tests"]:
            assert {"name", "score", "max_score", "status", "output", "visibility"} <= set(test)
            assert test["status"] in ("passed", "failed")
    oscar = json.loads((batch["out"] / "oscar" / "results.json").read_text(encoding="utf-8"))
    assert oscar["score"] == 0 and "unsafe path" in oscar["output"]
    suites = ET.parse(batch["out"] / "junit.xml").getroot()
    by_name = {s.get("name"): s for s in suites.iter("testsuite")}
    assert set(by_name) == set(_grades(batch["out"])) - {"(max points)"}
    carmen = by_name["carmen"]
    failed = {c.get("name") for c in carmen.iter("testcase") if c.find("failure") is not None}
    assert "piecewise.traceable" in failed
    assert int(suites.get("tests")) == sum(int(s.get("tests")) for s in by_name.values())
    assert by_name["oscar"].find("testcase/error").get("type") == "unreadable"


@needs_strong
def test_the_summary_says_what_the_class_got_wrong(batch):
    text = (batch["out"] / "summary.md").read_text(encoding="utf-8")
    assert text.startswith("# Class summary: Chapter 4")
    checks = text.split("## Pass rate of each check, most failed first")[1].split("##")[0]
    rates = [int(m) for m in re.findall(r"^\| `.*\| (\d+)% \| \d+ / \d+ \|$", checks, re.M)]
    assert rates == sorted(rates) and len(rates) == 15
    common = text.split("## Most common failures")[1].split("##")[0]
    assert "ex02_where · piecewise.traceable" in common
    assert "**oscar**: unreadable" in text and "Pat, pat are one name once made safe for a folder" in text
    slowest = text.split("## Slowest submissions (seconds)")[1].split("##")[0]
    assert "erin" in slowest  # the hang, stopped after EXERCISE_TIMEOUT seconds


@needs_strong
@needs_browser
def test_the_html_summary_in_a_browser(batch, tmp_path):
    page = batch["out"] / "summary.html"
    source = page.read_text(encoding="utf-8")
    assert "<script" not in source and "http://" not in source.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in source
    shot = tmp_path / "summary.png"
    text = render(page, shot)
    assert "Class summary: Chapter 4: JIT basics" in text
    assert "Pass rate of each check, most failed first" in text
    assert "ex02_where · piecewise.traceable" in text
    assert "Most common failures" in text and "Slowest submissions" in text
    assert "oscar" in text and "unreadable" in text
    assert shot.stat().st_size > 10_000


@needs_strong
def test_rerunning_the_command_resumes_and_regrades_only_what_changed(batch, capsys):
    out, klass = batch["out"], batch["class"]
    alice_report = (out / "alice" / "report.partial.json").read_bytes()
    # the same command, without --seed: the manifest's seed, every graded student kept
    code = main(["batch", str(klass), "--chapter", "ch4", "--out", str(out), "-j", "2", *EXERCISES,
                 "--exercise-timeout", str(EXERCISE_TIMEOUT), "--lang", "en"])
    err = capsys.readouterr().err
    assert code == 0 and "0 to grade, 11 already graded (kept), seed 11" in err
    assert (out / "alice" / "report.partial.json").read_bytes() == alice_report
    # bob hands in ex01 done: only bob is graded again
    done = _student(batch["root"], "bob-ex01", {"ex01_jit_forms": SOLUTIONS / "ex01_jit_forms.py"}, base=STUBS)
    _zip(done, klass / "bob.zip")
    code = main(["batch", str(klass), "--chapter", "ch4", "--out", str(out), "-j", "2", *EXERCISES,
                 "--exercise-timeout", str(EXERCISE_TIMEOUT), "--lang", "en"])
    err = capsys.readouterr().err
    assert code == 0 and "1 to grade, 10 already graded (kept)" in err
    assert _grades(out)["bob"]["ex01_jit_forms"] == "10"
    assert (out / "alice" / "report.partial.json").read_bytes() == alice_report


def test_an_interrupted_batch_keeps_what_was_graded_and_says_how_to_resume(tmp_path):
    """Ctrl-C after the first student: exit 130, that student's reports and manifest entry kept."""
    klass = tmp_path / "class"
    klass.mkdir()
    for name in ("ann", "ben", "cat"):
        _student(klass, name, base=STUBS)
    out = tmp_path / "results"
    args = [sys.executable, "-m", "grader", "batch", str(klass), "--chapter", "ch4", "--out", str(out), "-k", "1",
            "--lang", "en", "--allow-weak-sandbox"]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, cwd=ROOT, preexec_fn=sigint_as_at_a_terminal)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("[1/3]"):
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.communicate(timeout=120)[1]
    assert proc.returncode == 130, lines + [rest]
    assert "run the same command again to resume" in rest
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    graded = set(manifest["students"])
    assert len(graded) >= 1 and all((out / n / "report.partial.json").exists() for n in graded)
    rows = _grades(out)
    assert sum(row["status"] == "interrupted" for row in rows.values()) == 3 - len(graded)
    assert "interrupted" in (out / "summary.md").read_text(encoding="utf-8")


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["batch", str(empty), "--chapter", "ch4", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no submission" in err
    assert main(["batch", str(tmp_path / "nowhere"), "--chapter", "ch4", "--out", str(tmp_path / "out")]) == 2
    assert "nowhere does not exist" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("hi", encoding="utf-8")
    assert main(["batch", str(tmp_path / "notes.txt"), "--chapter", "ch4", "--out", str(tmp_path / "out")]) == 2
    assert "neither a folder nor a .zip" in capsys.readouterr().err
    assert main(["batch", str(empty), "--chapter", "ch9", "--out", str(tmp_path / "out")]) == 2
    assert "ch9" in capsys.readouterr().err
    assert main(["batch", str(empty), "--chapter", "ch4", "--out", str(tmp_path / "o"), "--scheduler", "x"]) == 2


def test_a_weaker_sandbox_is_refused_without_the_flag(tmp_path, capsys):
    make_submission(tmp_path / "class" / "ann", base=STUBS)
    code = main(["batch", str(tmp_path / "class"), "--chapter", "ch4", "--out", str(tmp_path / "out"),
                 "--sandbox", "process", "--lang", "en"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "--allow-weak-sandbox" in err and "process" in err
    assert not (tmp_path / "out" / "grades.csv").exists()


def test_a_terminal_shows_a_progress_bar_with_an_eta(tmp_path):
    """On a terminal (a pseudo-terminal here) the batch draws rich's progress bar, with the count and an ETA."""
    import pty

    klass = tmp_path / "class"
    klass.mkdir()
    _student(klass, "ann", base=STUBS)
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "grader", "batch", str(klass), "--chapter", "ch4", "--out",
                             str(tmp_path / "results"), "-k", "1", "--lang", "en", "--allow-weak-sandbox"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the process closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=300) == 0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", errors="replace"))
    assert re.search(r"grading the class .*\b1/1 +\d+:\d\d:\d\d ETA \d+:\d\d:\d\d", text), text[-600:]
    assert "[1/1] ann: 0 / 10 (completed)" in text  # a line per student above the bar
