"""check() in a notebook is served by the user's warm service, as ``grade`` is (issue 47, "fast on the slower
machine too"; :mod:`grader.runner.service`): its first grading starts its own hosts and, once the cell has its
result, the service; the next check() of the same notebook forks its two hosts from the service's templates
instead of importing JAX twice.

One real ipykernel, run headless by nbclient, every stub filled from the solutions, the service on
(``GRADER_WARM_S``, which conftest turns off for every other test) with a cache of its own:

* the first ``check()``: full marks, hosts of its own (no ``hosts_from`` in its report's timings);
* the second: the same verdicts, check by check, its hosts from the warm service;
* a wrong ``piecewise`` (a Python ``if`` on a traced value) run in the kernel, then ``check("ex02")``: served too,
  and its value check fails as it does without the service: the served hosts grade the cells as they last ran;
* once the kernel is gone, nothing of the gradings is left: the service's templates have no child.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

from conftest import FULL
from grader.authoring.notebook import build
from grader.chapter import load_chapter
from grader.runner import sandbox as sandboxes

nbclient = pytest.importorskip("nbclient", reason="the notebook extra is not installed: pip install -e '.[notebook]'")
pytest.importorskip("ipykernel", reason="the notebook extra is not installed: pip install -e '.[notebook]'")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sandboxes.bwrap_works() is None,
                                 reason="the service serves gradings whose hosts run in bubblewrap: none works here")]

SEED = 4322
WRONG_PIECEWISE = "@jax.jit\ndef piecewise(x):\n    if x > 0:\n        return x * x\n    return 0.5 * x\n"
SHOW = "import json\nprint(json.dumps({'report': %s.report, 'score': %s.score}))"
# the student's pause between two checks: the service the first one started listens (a moment after the cell)
SERVICE_UP = """\
import os, time
from grader.runner import service
mine = lambda: [s for s in service.running() if s["settings"].get("submission", "").startswith(os.getcwd())]
end = time.monotonic() + 60
while not mine() and time.monotonic() < end:
    time.sleep(0.1)
assert mine(), service.running()
"""


def _shown(cell) -> dict:
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert not errors, errors[0].get("traceback")
    return json.loads("".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream"))


def _verdicts(report: dict) -> dict:
    return {c["id"]: c["status"] for e in report["exercises"] for c in e["checks"]}


def test_the_next_check_in_a_notebook_forks_its_hosts_from_the_warm_service(tmp_path, monkeypatch):
    from test_notebook import JupyterLabLikeClient
    from test_warm_service import _hosts_left, _services, _stop, _wait

    cache = tmp_path / "cache"
    monkeypatch.setenv("GRADER_CACHE_DIR", str(cache))  # the kernel's environment, and so check()'s
    monkeypatch.setenv("GRADER_WARM_S", "60")
    nb = build(load_chapter("ch4"), solved=True)
    nb.cells = [c for c in nb.cells if c.metadata["grader"]["role"] != "check"]
    filled = len(nb.cells)
    nb.cells += [nbformat.v4.new_code_cell(f"first = check(seed={SEED})\n" + SHOW % ("first", "first")),
                 nbformat.v4.new_code_cell(SERVICE_UP),
                 nbformat.v4.new_code_cell(f"second = check(seed={SEED})\n" + SHOW % ("second", "second")),
                 nbformat.v4.new_code_cell(WRONG_PIECEWISE),
                 nbformat.v4.new_code_cell(f'third = check("ex02", seed={SEED})\n' + SHOW % ("third", "third"))]
    folder = tmp_path / "work"
    folder.mkdir()
    try:
        JupyterLabLikeClient(nb, timeout=600, kernel_name="python3",
                             resources={"metadata": {"path": str(folder)}}).execute()
        first, _, second, _, third = (_shown(cell) if i % 2 == 0 else None for i, cell in enumerate(nb.cells[filled:]))

        assert first["score"] == second["score"] == FULL
        assert "hosts_from" not in first["report"]["timings"]  # the first starts its own hosts, and the service
        assert second["report"]["timings"].get("hosts_from") == "warm service"
        assert _verdicts(second["report"]) == _verdicts(first["report"])
        assert second["report"]["seed"] == first["report"]["seed"] == SEED

        assert third["report"]["timings"].get("hosts_from") == "warm service"
        ex02 = next(e for e in third["report"]["exercises"] if e["id"] == "ex02_where")
        statuses = {c["id"]: c["status"] for c in ex02["checks"]}
        assert statuses["piecewise.values"] != "passed" and ex02["score"] < ex02["max_score"], statuses
        assert _verdicts(first["report"])["piecewise.values"] == "passed"

        services = _services(cache)
        assert len(services) == 1, services  # one service, for the notebook's session
        service = services[0]["pid"]
        assert _wait(lambda: not _hosts_left(service), 15), _hosts_left(service)  # every host forked has ended
        assert Path(services[0]["settings"]["submission"]).parent.is_relative_to(folder / ".grade")
    finally:
        _stop(cache)
    assert not _services(cache) and os.environ["GRADER_WARM_S"] == "60"
