"""``grade PATH --hint CHECK`` from the student's side: after a run, each call shows the next
layer of that check's hint (the nudge came with the report), the last one says so, the
progress is kept in ``.grade/hints.json`` beside the reports, and a check that does not
exist is one line naming the known ones."""
from __future__ import annotations

import json

import pytest

from conftest import VARIANTS, make_submission

from grader.chapter import load_chapter
from grader.cli import main


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A submission whose ex02 uses a Python ``if`` on a traced value, graded once (ex02 only)."""
    tmp = tmp_path_factory.mktemp("hints")
    sub = make_submission(tmp, {"ex02_where": VARIANTS / "ex02_where" / "python_if_piecewise.py"})
    out = tmp / "out"
    assert main([str(sub), "-k", "2", "--seed", "5", "--report-dir", str(out), "--json"]) == 0
    report = json.loads((out / "report.partial.json").read_text(encoding="utf-8"))
    checks = report["exercises"][0]["checks"]
    failed = next(c for c in checks if c["status"] == "failed")
    return sub, out, failed


def test_layers_come_one_at_a_time_and_are_remembered(graded, capsys):
    sub, out, failed = graded
    check = next(c for c in load_chapter("ch4").exercise("ex02_where").checks if c.id == failed["id"])
    total = 1 + len(check.hint_layers)
    assert total >= 3
    capsys.readouterr()
    seen = []
    for number in range(2, total + 2):  # one call more than there are layers: the last one stays
        assert main([str(sub), "--hint", f"ex02/{failed['id']}", "--report-dir", str(out)]) == 0
        text = capsys.readouterr().out
        shown = min(number, total)
        assert f"Hint {shown} of {total} for ex02_where/{failed['id']}" in text, text
        assert "failed in your last run" in text, text  # the status of the last report, as it was
        seen.append(text)
        assert json.loads((out / "hints.json").read_text(encoding="utf-8")) == \
            {f"ex02_where/{failed['id']}": shown}
    assert len(set(seen[:-1])) == total - 1  # every layer a text of its own
    assert "That was the last layer" in seen[-2] and seen[-1] == seen[-2]
    assert f"--hint ex02/{failed['id']}" in seen[0]  # how to ask for more


def test_the_nudge_of_the_last_failure_is_layer_one_and_not_repeated(graded, capsys):
    sub, out, failed = graded
    (out / "hints.json").unlink(missing_ok=True)
    assert main([str(sub), "--hint", f"2/{failed['id']}", "--report-dir", str(out), "--lang", "zh"]) == 0
    text = capsys.readouterr().out
    assert "第 2/" in text and "层提示" in text
    assert failed["hint"] not in text  # the report already showed layer 1


def test_an_unknown_check_is_one_line_naming_the_known_ones(graded, capsys):
    sub, out, _ = graded
    assert main([str(sub), "--hint", "ex02/no.such.check", "--report-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no check 'ex02/no.such.check'" in err and "ex02/piecewise.values" in err
