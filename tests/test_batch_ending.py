"""The end of a local batch: a worker with no student left is told to finish at once (it stops its
hosts while the other workers grade their last students), and every worker is told before the
batch waits for any, so that they stop their hosts side by side (before, each was stopped after the
last student's result, one after another: about 0.1 s each here, at the end of every batch).
"""
from __future__ import annotations

import shutil
import threading
import time

import pytest
from conftest import STUBS

from grader.batch import worker_process as workers
from grader.batch.run import BatchOptions, run_batch
from grader.runner import sandbox as sandboxes

PLAN = sandboxes.plan("auto")
pytestmark = pytest.mark.skipif(not (PLAN.kind == "bwrap" and PLAN.uid_isolation),
                                reason="local batch workers need bubblewrap and per-job uids (root with bwrap)")


def test_a_worker_with_no_student_left_is_let_go_before_the_batch_ends(tmp_path, monkeypatch):
    klass = tmp_path / "class"
    for i in range(3):  # three students, two workers: one of them has none left while the other grades
        shutil.copytree(STUBS, klass / f"student{i}", ignore=shutil.ignore_patterns(".grade", "__pycache__"))
    events: list[tuple[str, float, int]] = []
    lock = threading.Lock()
    let_go = workers.WorkerProcess.let_go

    def spy(self):
        with lock:
            events.append(("let_go", time.monotonic(), id(self)))
        return let_go(self)

    monkeypatch.setattr(workers.WorkerProcess, "let_go", spy)

    def on_result(row, done, total):
        with lock:
            events.append(("result", time.monotonic(), done))

    result = run_batch(klass, BatchOptions(chapter="ch4", out=tmp_path / "out", exercises=("ex01",), seed=5, jobs=2,
                                           force=True), on_result=on_result)
    assert sorted(result.graded) == ["student0", "student1", "student2"]
    last_result = max(t for kind, t, _ in events if kind == "result")
    early = {who for kind, t, who in events if kind == "let_go" and t < last_result}
    assert early, "no worker was told to finish before the last student's result"
    assert len({who for kind, _, who in events if kind == "let_go"}) == 2  # both told, at the end at the latest
