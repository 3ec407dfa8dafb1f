"""Unit tests of grader/integrity.py: the static scan of a submission's source."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from grader import integrity
from grader.chapter import load_chapter

SOLUTIONS = Path(__file__).resolve().parent.parent / "solutions" / "ch4"


def scan_source(tmp_path: Path, source: str, name: str = "ex01_jit_forms.py", siblings=()) -> list[dict]:
    (tmp_path / name).write_text(textwrap.dedent(source), encoding="utf-8")
    files = [name, *siblings]
    for sibling in siblings:
        (tmp_path / sibling).write_text("x = 1\n", encoding="utf-8")
    return integrity.scan(tmp_path, files)


def codes(found: list[dict]) -> set[tuple[str, str]]:
    return {(f["code"], f["detail"]) for f in found}


@pytest.mark.parametrize("source, expected", [
    ("import os\n", ("import", "os")),
    ("import ctypes\n", ("import", "ctypes")),
    ("import os.path\n", ("import", "os.path")),
    ("import subprocess as sp\n", ("import", "subprocess")),
    ("from inspect import currentframe\n", ("import", "inspect")),
    ("from gc import get_objects\n", ("import", "gc")),
    ("import jax\njax.jit = lambda f: f\n", ("patch", "jax.jit")),
    ("import jax.numpy as jnp\njnp.sum = sum\n", ("patch", "jnp.sum")),
    ("import time\ntime.perf_counter = lambda: 0.0\n", ("patch", "time.perf_counter")),
    ("import time as t\nt.perf_counter = lambda: 0.0\n", ("patch", "t.perf_counter")),
    ("import numpy as np\nnp.allclose = lambda *a, **k: True\n", ("patch", "np.allclose")),
    ("import builtins\nbuiltins.print = None\n", ("patch", "builtins.print")),
    ("import jax\ndel jax.jit\n", ("patch", "jax.jit")),
    ("import jax\nsetattr(jax, 'jit', lambda f: f)\n", ("call", "setattr")),
    ("import jax\njax.config.update('jax_disable_jit', True)\n", ("config", "jax.config.update")),
    ("from jax import config\nconfig.update('jax_enable_x64', True)\n", ("config", "config.update")),
    ("import jax\nwith jax.disable_jit():\n    pass\n", ("config", "jax.disable_jit")),
    ("import sys\nframe = sys._getframe(1)\n", ("attribute", "sys._getframe")),
    ("def f():\n    return f.__globals__\n", ("attribute", "f.__globals__")),
    ("def f(x):\n    return x.f_back.f_locals\n", ("attribute", "x.f_back")),
    ("import jax\njax.clear_caches()\n", ("attribute", "jax.clear_caches")),
    ("import jax\nn = jax.jit(abs)._cache_size()\n", ("attribute", "_cache_size")),
    ("from jax._src import dispatch\n", ("attribute", "jax._src.dispatch")),
    ("from jax import monitoring\n", ("attribute", "jax.monitoring")),
    ("open('report.json', 'w').write('{}')\n", ("file", "open")),
    ("exec('x = 1')\n", ("call", "exec")),
    ("y = eval('1 + 1')\n", ("call", "eval")),
    ("m = __import__('os')\n", ("call", "__import__")),
    ("g = globals()\n", ("call", "globals")),
    ("import os\nos.kill(os.getppid(), 9)\n", ("call", "os.kill")),
    ("import sys\nsys.exit(0)\n", ("call", "sys.exit")),
    ("path = '.grade/report.md'\n", ("report", ".grade/report.md")),
])
def test_scan_flags(tmp_path, source, expected):
    found = scan_source(tmp_path, source)
    assert expected in codes(found), found


def test_report_file_opened_is_flagged_twice_over(tmp_path):
    found = scan_source(tmp_path, "open('report.json', 'w')\n")
    assert {f["code"] for f in found} == {"file", "report"}
    assert {f["message"].key for f in found} == {"integrity.file"}


def test_findings_carry_file_line_and_message(tmp_path):
    found = scan_source(tmp_path, "import jax\n\n\njax.jit = lambda f: f\n")
    assert found == [{
        "file": "ex01_jit_forms.py", "line": 4, "code": "patch", "detail": "jax.jit",
        "message": found[0]["message"],
    }]
    assert found[0]["message"].key == "integrity.patch"
    assert found[0]["message"].args == {"target": "jax.jit", "module": "jax"}


def test_findings_are_deduplicated_and_sorted(tmp_path):
    found = scan_source(tmp_path, "exec('1'); exec('2')\nimport os, os\n")
    assert [(f["line"], f["code"], f["detail"]) for f in found] == [(1, "call", "exec"), (2, "import", "os")]


@pytest.mark.parametrize("source", [
    "import numpy as np\n",
    "from functools import partial\n",
    "import jax\nimport jax.numpy as jnp\nfrom jax import lax\n",
    "import math, statistics, itertools, collections, dataclasses, typing, time\n",
    "from __future__ import annotations\n",
    "import time\nstart = time.perf_counter()\n",
    "import numpy as np\nx = np.zeros(3)\nx[0] = 1.0\n",
    "class A:\n    def __init__(self):\n        self.jit = 1\n",
    "import jax\nf = jax.jit(lambda x: x, static_argnums=(1,))\n",
    "import jax\njax.block_until_ready(1)\n",
    "results = {}\nresults['k'] = 1\n",
    "'''A docstring about grading your report.'''\n",
])
def test_scan_does_not_flag_ordinary_code(tmp_path, source):
    assert scan_source(tmp_path, source) == []


def test_sibling_imports_are_allowed(tmp_path):
    source = "import ex01_jit_forms\nfrom ex02_where import piecewise\n"
    found = scan_source(tmp_path, source, name="ex03_static_args.py", siblings=("ex01_jit_forms.py",
                                                                                "ex02_where.py"))
    assert found == []


def test_non_sibling_unknown_import_is_flagged(tmp_path):
    found = scan_source(tmp_path, "import ex09_not_here\n", name="ex03_static_args.py")
    assert codes(found) == {("import", "ex09_not_here")}


def test_syntax_errors_are_skipped(tmp_path):
    assert scan_source(tmp_path, "def broken(:\n    import os\n") == []


def test_every_message_renders(tmp_path):
    catalog = load_chapter("ch4").catalog
    found = scan_source(tmp_path, "import os\nimport jax\njax.jit = 1\nexec('1')\nopen('x')\nimport sys\n"
                                  "sys._getframe()\njax.config.update('a', 1)\ns = 'report.json'\n")
    assert {f["code"] for f in found} == {"import", "patch", "call", "file", "attribute", "config", "report"}
    for item in found:
        for lang in ("en", "zh"):
            words = catalog.render(item["message"], lang)
            assert words and not words.startswith("["), words


def test_reference_solutions_are_clean():
    files = sorted(p.name for p in SOLUTIONS.glob("*.py"))
    assert len(files) >= 4
    assert integrity.scan(SOLUTIONS, files) == []


def test_stubs_are_clean():
    stubs = SOLUTIONS.parent.parent / "exercises" / "ch4"
    files = sorted(p.name for p in stubs.glob("*.py"))
    assert integrity.scan(stubs, files) == []


def test_plain_import_of_private_jax_modules_is_flagged(tmp_path):
    assert scan_source(tmp_path, "import jax._src.dispatch as d\n") != []
    assert scan_source(tmp_path, "import jax.monitoring as m\n") != []
