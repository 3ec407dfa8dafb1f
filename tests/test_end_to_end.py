"""The student's command, end to end: reference full marks, stubs zero, reports written,
options and exit codes as in the contract, and notebook and zip submissions."""
from __future__ import annotations

import json
import shutil
import zipfile

import nbformat
import pytest

from conftest import FULL, SOLUTIONS, STUBS, make_submission

from grader.cli import main

pytestmark = pytest.mark.slow


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def solutions_report(tmp_path_factory):
    target = tmp_path_factory.mktemp("report")
    assert main([str(SOLUTIONS), "--report-dir", str(target), "--seed", "77", "--lang", "en"]) == 0
    return json.loads((target / "report.json").read_text(encoding="utf-8")), target


def test_reference_scores_full_marks(solutions_report):
    report, target = solutions_report
    assert report["schema"] == "grade-report/1"
    assert [e["id"] for e in report["exercises"]] == [
        "ex01_jit_forms", "ex02_where", "ex03_static_args", "ex04_cache_keys",
        "ex05_timing", "ex06_speedup", "ex07_pitfalls", "ex08_aot_debug"]
    problems = {e["id"]: {c["id"]: c["message"] for c in e["checks"] if c["status"] != "passed"}
                for e in report["exercises"] if e["status"] != "passed"}
    assert not problems
    assert report["score"] == report["max_score"] == FULL
    assert report["seed"] == 77
    assert report["environment"]["backend"] and report["environment"]["jax"]
    assert report["submission"]["sha256"] and report["sandbox"]["kind"] in ("bwrap", "process")
    assert report["integrity"] == []
    md = (target / "report.md").read_text(encoding="utf-8")
    assert f"{FULL:g} / {FULL:g}" in md and "ex08_aot_debug" in md


def test_reference_speedups_are_reported_beside_the_references(solutions_report):
    report, _ = solutions_report
    ex06 = next(e for e in report["exercises"] if e["id"] == "ex06_speedup")
    for check in (c for c in ex06["checks"] if c["category"] == "speedup"):
        measured = check["measured"]
        assert measured["student"]["speedup"] > 1 and measured["reference"]["speedup"] > 1
        assert measured["bar"] < measured["student"]["speedup"]
        assert measured["case"]


def test_stubs_score_zero_and_are_not_attempted(capsys, tmp_path):
    code, out, err = run_cli(capsys, STUBS, "--report-dir", tmp_path, "--json", "--lang", "en")
    assert code == 0, err
    report = json.loads(out)
    assert report["score"] == 0 and report["max_score"] == FULL
    assert {e["status"] for e in report["exercises"]} == {"not_attempted"}
    assert {c["status"] for e in report["exercises"] for c in e["checks"]} == {"not_attempted"}
    assert (tmp_path / "report.json").exists() and (tmp_path / "report.md").exists()


def test_fail_under_and_default_report_dir(capsys, tmp_path):
    sub = tmp_path / "ch4"
    shutil.copytree(STUBS, sub, ignore=shutil.ignore_patterns(".grade"))
    code, out, err = run_cli(capsys, sub, "-k", "ex04", "--fail-under", "1")
    assert code == 1
    assert (sub / ".grade" / "report.partial.json").exists()  # the default: inside the submission
    assert str(sub / ".grade" / "report.partial.json") in out


def test_chinese_report(capsys, tmp_path):
    code, out, err = run_cli(capsys, STUBS, "-k", "1", "--lang", "zh", "--report-dir", tmp_path)
    assert code == 0
    assert "未作答" in out and "第 4 章" in out
    report = json.loads((tmp_path / "report.partial.json").read_text(encoding="utf-8"))
    assert report["lang"] == "zh" and "尚未作答" in report["exercises"][0]["checks"][0]["message"]


def test_seed_replays_the_same_inputs(tmp_path):
    from conftest import grade_to_dict

    a = grade_to_dict(SOLUTIONS, exercises=("ex04",), seed=9)
    b = grade_to_dict(SOLUTIONS, exercises=("ex04",), seed=9)
    assert a["exercises"][0]["checks"][2]["measured"] == b["exercises"][0]["checks"][2]["measured"]


def _notebook_from(folder, path, exercises):
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# 第 4 章作业 / Chapter 4 homework"))
    for ex in exercises:
        nb.cells.append(nbformat.v4.new_code_cell((folder / f"{ex}.py").read_text(encoding="utf-8")))
    nb.cells.append(nbformat.v4.new_code_cell("%timeit softmax(jnp.ones(3))\n!nvidia-smi"))
    nbformat.write(nb, str(path))
    return path


def test_notebook_submission(tmp_path):
    from conftest import grade_to_dict

    path = _notebook_from(SOLUTIONS, tmp_path / "homework.ipynb", ["ex01_jit_forms", "ex07_pitfalls"])
    report = grade_to_dict(path, chapter="ch4", exercises=("1", "7"))
    assert report["submission"]["kind"] == "notebook"
    assert [e["status"] for e in report["exercises"]] == ["passed", "passed"]


def test_notebook_error_names_the_cell(tmp_path):
    """A statement that raises costs what needs its names (softmax), named by its cell; a
    statement nothing graded needs (a stray expression) is not run at all."""
    from conftest import grade_to_dict

    text = (SOLUTIONS / "ex01_jit_forms.py").read_text(encoding="utf-8").replace(
        "softmax = jax.jit(softmax_raw)", "softmax = jax.jit(softmax_raw) if undefined_name else None\n"
        "other_undefined + 1")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("notes"), nbformat.v4.new_code_cell(text)]
    path = tmp_path / "ch4.ipynb"
    nbformat.write(nb, str(path))
    report = grade_to_dict(path, exercises=("1",))
    ex = report["exercises"][0]
    assert ex["status"] == "partial" and ex["error"] is None
    line = text.splitlines().index("softmax = jax.jit(softmax_raw) if undefined_name else None") + 1
    assert [n for n in ex["notes"] if f"notebook cell 2, line {line} raised NameError" in n]
    assert "other_undefined" not in json.dumps(report)


def test_zip_submission_with_a_top_folder(tmp_path):
    from conftest import grade_to_dict

    folder = make_submission(tmp_path / "src")
    archive = tmp_path / "alice.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for file in folder.glob("*.py"):
            zf.write(file, f"alice-ch4/{file.name}")
    report = grade_to_dict(archive, chapter="ch4", exercises=("3",))
    assert report["submission"]["kind"] == "zip+folder"
    assert report["exercises"][0]["status"] == "passed"


def test_one_broken_file_costs_only_its_exercise(tmp_path):
    from conftest import grade_to_dict

    folder = make_submission(tmp_path, {"ex02_where": "def piecewise(x:\n    pass\n"})
    (folder / "ex03_static_args.py").unlink()
    report = grade_to_dict(folder, exercises=("1", "2", "3"))
    by_id = {e["id"]: e for e in report["exercises"]}
    assert by_id["ex01_jit_forms"]["status"] == "passed"
    assert by_id["ex02_where"]["status"] == "error" and "line 1" in by_id["ex02_where"]["error"]
    assert by_id["ex03_static_args"]["status"] == "error" and "missing" in by_id["ex03_static_args"]["error"]


def test_missing_function_is_named(tmp_path):
    from conftest import grade_to_dict

    text = (SOLUTIONS / "ex02_where.py").read_text(encoding="utf-8").replace("def clip_by_norm", "def clip_norm")
    report = grade_to_dict(make_submission(tmp_path, {"ex02_where": text}), exercises=("2",))
    ex = report["exercises"][0]
    statuses = {c["id"]: c["status"] for c in ex["checks"]}
    assert statuses["piecewise.values"] == "passed"
    assert statuses["clip_by_norm.traceable"] == "failed"
    message = next(c["message"] for c in ex["checks"] if c["id"] == "clip_by_norm.traceable")
    assert "clip_by_norm is not defined in ex02_where.py" == message
