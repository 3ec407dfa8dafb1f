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
