"""What a student's code prints is kept as a head and a tail with the size of what was left
out between them, flushed or not; a flood of output costs no point of a correct answer; and
nothing the grader's own machinery logs (JAX's notes on the persistent compilation cache,
which it writes while cache misses are explained) is shown as the student's output."""
from __future__ import annotations

import re

from conftest import SOLUTIONS, exercise, grade_to_dict, make_submission

from grader.runner.job_output import OUTPUT_HEAD, OUTPUT_TAIL

FLOOD = '''
print("FIRST LINE OF OUTPUT", flush=True)
for _i in range(4000):
    print(f"line {_i:05d} " + "x" * 40, flush=_i % 2 == 0)
print("LAST LINE OF OUTPUT", end="")  # no newline and no flush: still kept
'''


def test_a_flood_of_output_is_kept_as_head_and_tail_and_costs_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))  # empty caches: every program a miss
    source = (SOLUTIONS / "ex01_jit_forms.py").read_text(encoding="utf-8") + FLOOD
    report = grade_to_dict(make_submission(tmp_path, {"ex01_jit_forms": source}), exercises=("1",), seed=3)
    ex = exercise(report, "ex01_jit_forms")
    assert ex["status"] == "passed" and ex["score"] == ex["max_score"]
    output = ex["output"]
    printed = len("FIRST LINE OF OUTPUT\n") + 4000 * len("line 00000 " + "x" * 40 + "\n") + len("LAST LINE OF OUTPUT")
    assert output.startswith("FIRST LINE OF OUTPUT\nline 00000 ")
    assert output.endswith("line 03999 " + "x" * 40 + "\nLAST LINE OF OUTPUT")
    gap = re.search(r"\[… (\d+) bytes …\]", output)
    assert gap, output[OUTPUT_HEAD - 100:OUTPUT_HEAD + 100]
    # the import printed once per job that imports the module: the gap is what was not kept of it all
    assert int(gap.group(1)) >= printed - OUTPUT_HEAD - OUTPUT_TAIL
    assert len(output.encode("utf-8")) <= OUTPUT_HEAD + OUTPUT_TAIL + 64


def test_the_grader_s_cache_notes_are_not_the_student_s_output(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    source = (SOLUTIONS / "ex01_jit_forms.py").read_text(encoding="utf-8") + '\nprint("printed at import")\n'
    report = grade_to_dict(make_submission(tmp_path, {"ex01_jit_forms": source}), exercises=("1",), seed=3)
    output = exercise(report, "ex01_jit_forms")["output"]
    assert output == "printed at import\n", output
