"""A probe shared by jobs side by side (an exercise's ``parts``): ex05's, whose instruments mostly sleep.

Two jobs each import the student's module and do their shares of the probe (``ctx.does(i)``); the
grader judges their records as one job's (:func:`grader.runner.outcome.combined`). What must hold:
the verdicts are those of one job (every variant of ``tests/variants/ch4/ex05_timing`` is judged in
``test_variants`` with the shares split); a part that crashes costs the checks of its shares only,
and the exercise says how it ended; the combined outcome keeps every record once, ends as its first
part that did not end well, and counts what the parts spent together.
"""
from __future__ import annotations

from pathlib import Path

from grader.runner.outcome import JobOutcome, combined
from tests.conftest import exercise, statuses

EX05 = "ex05_timing"
#: ex05's checks judged on the records of the first share (the harness's runs but the median's) and of the
#: second (the median's run, the speed-up, then the real jitted function's, its calls' CPU after the first's sleeps)
FIRST = {"time_call.seconds", "time_call.waits", "time_call.warmup", "time_call.call_count"}
SECOND = {"time_call.median", "speedup.value", "time_call.jax_async"}

#: the reference's harness, but it exits the process on the one run of nine timed calls: the median's, the
#: second share's
SOLUTION = (Path(__file__).resolve().parent.parent / "solutions" / "ch4" / "ex05_timing.py").read_text(encoding="utf-8")
SIGNATURE = "def time_call(fn, *args, warmup=1, iters=20):\n"
CRASHES_ON_THE_MEDIAN_RUN = SOLUTION.replace(SIGNATURE,
                                             SIGNATURE + "    if iters == 9:\n        __import__('os')._exit(3)\n")


def test_ex05_is_shared_by_two_jobs_and_its_checks_split_between_them():
    from grader.chapter import load_chapter

    assert CRASHES_ON_THE_MEDIAN_RUN.count("_exit(3)") == 1

    ex = load_chapter("ch4").exercise(EX05)
    assert ex.parts == 2 and not ex.needs_reference
    assert {c.id for c in ex.checks} == FIRST | SECOND


def test_a_part_that_crashes_costs_the_checks_of_its_shares_only(grade_cache):
    report = grade_cache({EX05: CRASHES_ON_THE_MEDIAN_RUN}, exercises=(EX05,), seed=11)
    ex = exercise(report, EX05)
    got = statuses(ex)
    assert {c for c in FIRST if got[c] == "passed"} == FIRST, got
    assert all(got[c] != "passed" for c in SECOND), got
    assert "exit code 3" in (ex.get("error") or ""), ex.get("error")


def test_the_solutions_two_jobs_pass_as_one(grade_cache):
    report = grade_cache({}, exercises=(EX05,), seed=12)
    ex = exercise(report, EX05)
    assert set(statuses(ex).values()) == {"passed"}, statuses(ex)
    assert report["timings"][EX05]["student_work"]["parts"] == 2


def _part(end: str = "done", **fields) -> JobOutcome:
    return JobOutcome(end=end, side="student", **fields)


def test_the_parts_outcome_is_one_jobs():
    first = _part(records={"a": 1, "both": "first"}, arrivals={"a": 0.5, "both": 0.1}, names={"f": {}},
                  env={"backend": "cpu"}, output="one", output_bytes=3, duration_s=0.4, xla_compiles=2,
                  work={"cpu_s": 0.1, "programs": 2}, integrity=[{"stage": "import"}])
    second = _part("crashed", records={"b": 2, "both": "second"}, arrivals={"b": 0.2, "both": 0.3},
                   detail={"exit": {"code": 3}}, output="two", output_bytes=4, duration_s=0.6,
                   work={"cpu_s": 0.2, "programs": 1}, integrity=[{"stage": "probe"}])
    third = _part("timeout", detail={"hung": {}}, duration_s=0.1)
    out = combined([first, second, third])
    assert out.end == "crashed" and out.detail == {"exit": {"code": 3}}  # the first part that did not end well
    assert out.records == {"a": 1, "both": "first", "b": 2} and out.arrivals == {"a": 0.5, "both": 0.1, "b": 0.2}
    assert out.names == {"f": {}} and out.env == {"backend": "cpu"}
    assert out.output == "one\ntwo" and out.output_bytes == 7 and out.duration_s == 0.6
    assert out.xla_compiles == 2 and out.integrity == [{"stage": "import"}, {"stage": "probe"}]
    assert out.work == {"cpu_s": 0.3, "programs": 3, "parts": 3}
    assert combined([_part(records={"x": 1}), _part()]).end == "done"


def test_what_every_part_printed_at_the_import_is_shown_once():
    """Each part imports the module: its prints at the import are the first part's, said once; what a
    part printed after them, and a part that printed something else from the start, in full."""
    imported = "loading my harness\nready\n"
    parts = [_part(output=imported + "seconds run\n"), _part(output=imported + "median run\n"), _part(output=imported)]
    assert combined(parts).output == imported + "seconds run\nmedian run\n"
    assert combined([_part(output="a\nb"), _part(output="a\nbc\n")]).output == "a\nb\nbc\n"
    assert combined([_part(output=""), _part(output="late\n")]).output == "late\n"


def test_a_print_at_the_import_is_shown_once_in_the_report(grade_cache):
    printing = 'print("loading my harness")\n' + SOLUTION
    ex = exercise(grade_cache({EX05: printing}, exercises=(EX05,), seed=13), EX05)
    assert set(statuses(ex).values()) == {"passed"}, statuses(ex)
    assert (ex.get("output") or "").count("loading my harness") == 1, ex.get("output")


def test_each_part_is_held_to_its_own_reports_on_its_instruments():
    """A part's compiles against its own report (not the sum of every part's, where one part's honest count
    could cover another's hidden compile), and a part that ended well without its final report is told,
    whatever another part did."""
    from grader.verdicts import tampering

    def honest(compiles: int) -> JobOutcome:
        return _part(xla_compiles=compiles, integrity=[{"stage": "import", "changed": []},
                                                       {"stage": "probe", "changed": [], "compiles_total": compiles}])

    assert tampering(combined([honest(0), honest(1)])) is None  # one compile, in the part that made it
    hiding = _part(xla_compiles=2, integrity=[{"stage": "probe", "changed": [], "compiles_total": 0}])
    over = _part(xla_compiles=0, integrity=[{"stage": "probe", "changed": [], "compiles_total": 5}])
    found = tampering(combined([over, hiding]))
    assert found and [t.key for t in found] == ["integrity.compiles_hidden"], found
    silent = _part(integrity=[{"stage": "import", "changed": []}])  # done, its last report never sent
    found = tampering(combined([_part("crashed", detail={"exit": {"code": 3}}), silent]))
    assert found and [t.key for t in found] == ["integrity.no_report"], found
    changed = _part(integrity=[{"stage": "probe", "changed": ["jax.jit"], "compiles_total": 0}])
    assert [t.key for t in tampering(combined([honest(0), changed]))] == ["integrity.tampered"]
