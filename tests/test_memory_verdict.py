"""One cause, one message (issue 25): a submission that runs out of memory is told so, the same
way, however its process showed it.

The job's address space is capped (``RLIMIT_AS``, :func:`grader.child.job._limit_memory`):
one big allocation fails at once (``MemoryError`` from NumPy or Python, ``RESOURCE_EXHAUSTED``
from JAX's runtime), while gigabytes filled piece by piece take seconds, as long as the
machine needs to fault the pages in; with other exercises' jobs beside it, the import's
time limit can come first ("did not finish within 20 s, stuck at line 25"). Whichever it
is, the student reads one message: the import used more memory than an exercise may.
"""
from __future__ import annotations

import json

import pytest

from conftest import SOLUTIONS, make_submission

from grader.chapter import load_chapter
from grader.i18n import grader_catalog
from grader.runner.job_sessions import JobOutcome
from grader.verdicts import judge

CH4 = load_chapter("ch4")
EX01 = CH4.exercise("ex01_jit_forms")
GIB = 1 << 30


def words(text) -> str:
    return grader_catalog().render(text, "en")


def verdict(outcome: JobOutcome) -> tuple[str, str]:
    result, _ = judge(EX01, outcome, None, inputs={}, seed=1)
    return result.status, words(result.error)


def memory(peak_gib: float) -> dict:
    return {"rss_kb": 400_000, "limit_bytes": 4 * GIB, "peak_kb": 400_000 + int(peak_gib * GIB / 1024)}


@pytest.mark.parametrize("outcome", [
    JobOutcome("import_error", detail={"type": "MemoryError", "where": "ex01_jit_forms.py:25", "memory": memory(0.1),
                                       "message": "Unable to allocate 30.0 GiB for an array with shape (4026531840,)"}),
    JobOutcome("import_error", detail={"type": "JaxRuntimeError", "where": "ex01_jit_forms.py:25", "memory": memory(0),
                                       "message": "RESOURCE_EXHAUSTED: Out of memory allocating 32212254720 bytes."}),
    JobOutcome("import_error", detail={"type": "MemoryError", "message": "", "where": "ex01_jit_forms.py:25",
                                       "memory": memory(3.9)}),  # a list grown to the limit
    JobOutcome("timeout", detail={"hung": {"phase": "importing", "where": "ex01_jit_forms.py:25"},
                                  "memory": memory(2.6)}),  # still filling pages when the time limit came
], ids=["numpy", "jax", "python", "time-limit-first"])
def test_every_way_an_import_runs_out_of_memory_reads_the_same(outcome):
    assert verdict(outcome) == (
        "error", "importing ex01_jit_forms.py used more memory than an exercise may (4096 MiB beyond JAX's own), "
                 "at ex01_jit_forms.py:25")


def reserved(resident_gib: float, reserved_gib: float) -> dict:
    """A job its time limit stopped: ``resident_gib`` held at its peak, ``reserved_gib`` of address space."""
    return {**memory(resident_gib), "vm_kb": 2_000_000, "peak_vm_kb": 2_000_000 + int(reserved_gib * GIB / 1024)}


def test_a_time_limit_that_stops_a_job_filling_reserved_gigabytes_reads_as_memory():
    """A busy machine faults pages in slowly: in a suite run beside four busy processes the 30 GiB
    submission below had reserved its arrays (address space, at once) and filled less than half of them
    when its import's 20 s ran out. Reserved, and partly filled, is memory; reserved and untouched
    (a slow loop's threads each reserve a malloc arena) is still a time limit, as is a crash."""
    hung = {"phase": "importing", "where": "ex01_jit_forms.py:25"}
    expected = ("error", "importing ex01_jit_forms.py used more memory than an exercise may (4096 MiB beyond "
                         "JAX's own), at ex01_jit_forms.py:25")
    assert verdict(JobOutcome("timeout", detail={"hung": hung, "memory": reserved(0.9, 2.5)})) == expected
    status, text = verdict(JobOutcome("timeout", detail={"hung": hung, "memory": reserved(0.1, 2.5)}))
    assert status == "timeout" and "memory" not in text  # reserved, hardly filled: its time went elsewhere
    status, text = verdict(JobOutcome("timeout", detail={"hung": hung, "memory": reserved(0.9, 1.5)}))
    assert status == "timeout" and "memory" not in text  # under half reserved
    crashed = JobOutcome("crashed", detail={"exit": {"signal": 11}, "memory": reserved(0.9, 2.5)}, output="")
    assert "memory" not in verdict(crashed)[1]  # the address space is read only of a job stopped at its limit


@pytest.mark.parametrize("filled_gib, expected", [(0, "timeout"), (0.75, "error")], ids=["untouched", "filling"])
def test_a_job_stopped_at_its_limit_reports_the_address_space_it_reserved(tmp_path, monkeypatch, filled_gib, expected):
    """The host reads the job's ``VmPeak`` as it is stopped (the grader's DUMP order). A real job reserves
    2.5 GiB and sleeps past its import's limit: untouched, it ran out of time; with 0.75 GiB of it filled
    (what a busy machine had filled when the time came, as slowly as the pages fault in), it ran out of
    memory, as it would have on a quiet machine."""
    from grader import verdicts
    from grader.cli import main

    seen: list[tuple[dict, str]] = []
    judged = verdicts._memory_held

    def held(memory: dict, end: str) -> bool:
        seen.append((dict(memory), end))
        return judged(memory, end)

    monkeypatch.setattr(verdicts, "_memory_held", held)
    fill = f"_kept[:{int(filled_gib * GIB)}] = 1\n" if filled_gib else ""
    sleeper = (SOLUTIONS / "ex01_jit_forms.py").read_text(encoding="utf-8").replace(
        "import jax\n", "import jax\nimport time as _t\nimport numpy as _np\n"
                        f"_kept = _np.empty(5 << 29, _np.uint8)\n{fill}_t.sleep(60)\n", 1)
    folder = make_submission(tmp_path, {"ex01_jit_forms": sleeper})
    out = tmp_path / "out"
    assert main([str(folder), "-k", "1", "--seed", "4", "--lang", "en", "--exercise-timeout", "5",
                 "--report-dir", str(out)]) == 0
    ex01 = json.loads((out / "report.partial.json").read_text(encoding="utf-8"))["exercises"][0]
    assert ex01["status"] == expected, ex01
    if expected == "error":
        assert ex01["error"].startswith("importing ex01_jit_forms.py used more memory than an exercise may")
    ((memory_seen, end),) = seen
    assert end == "timeout" and memory_seen["limit_bytes"] == 4 * GIB
    assert (memory_seen["peak_vm_kb"] - memory_seen["vm_kb"]) * 1024 >= 5 << 29, memory_seen  # reserved
    resident = (memory_seen["peak_kb"] - memory_seen["rss_kb"]) * 1024
    assert filled_gib * GIB <= resident + (64 << 20) and resident < (filled_gib + 0.25) * GIB, memory_seen


def test_a_time_limit_with_little_memory_held_is_still_a_time_limit():
    outcome = JobOutcome("timeout", detail={"hung": {"phase": "importing", "where": "ex01_jit_forms.py:25"},
                                            "memory": memory(0.3)})
    status, text = verdict(outcome)
    assert status == "timeout" and "did not finish within" in text and "memory" not in text


def test_a_crash_that_says_memory_reads_the_same_as_the_others():
    outcome = JobOutcome("crashed", detail={"exit": {"signal": 6}, "memory": memory(0.1)},
                         output="terminate called after throwing an instance of 'std::bad_alloc'\n")
    assert verdict(outcome)[1].startswith("importing ex01_jit_forms.py used more memory than an exercise may")


# ------------------------------------------------------------------ the real thing, alone and with another exercise
#: 30 GiB at import, a gigabyte at a time: how far it gets before a limit depends on the machine
GREEDY = (SOLUTIONS / "ex01_jit_forms.py").read_text(encoding="utf-8").replace(
    "import jax\n", "import jax\nimport numpy as _np\n_kept = [_np.ones(1 << 27) for _ in range(30)]\n", 1)


@pytest.fixture(scope="module")
def greedy(tmp_path_factory):
    return make_submission(tmp_path_factory.mktemp("greedy"), {"ex01_jit_forms": GREEDY})


@pytest.mark.slow
def test_a_submission_that_allocates_30_gib_at_import_is_told_memory_alone_and_with_another(greedy, capsys):
    from grader.cli import main

    line = GREEDY.splitlines().index("_kept = [_np.ones(1 << 27) for _ in range(30)]") + 1
    seen = {}
    for name, args in (("alone", ["-k", "1"]), ("with ex02", ["-k", "1", "-k", "2"])):
        assert main([str(greedy), *args, "--seed", "4", "--lang", "en", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        ex01 = report["exercises"][0]
        seen[name] = (ex01["status"], ex01["error"])
        if name == "with ex02":
            assert report["exercises"][1]["status"] == "passed"  # costs that exercise only
    expected = ("error", "importing ex01_jit_forms.py used more memory than an exercise may (4096 MiB beyond "
                         f"JAX's own), at ex01_jit_forms.py:{line}")
    assert seen == {"alone": expected, "with ex02": expected}
