"""Unit tests of grader/integrity.py: the static scan of a submission's source."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import all_chapters

from grader import integrity
from grader.chapter import load_chapter

SOLUTIONS = Path(__file__).resolve().parent.parent / "solutions" / "ch4"
ALLOWED = load_chapter("ch4").allowed_imports


def scan_source(tmp_path: Path, source: str, name: str = "ex01_jit_forms.py", siblings=()) -> list[dict]:
    (tmp_path / name).write_text(textwrap.dedent(source), encoding="utf-8")
    files = [name, *siblings]
    for sibling in siblings:
        (tmp_path / sibling).write_text("x = 1\n", encoding="utf-8")
    return integrity.scan(tmp_path, files, ALLOWED)


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
    ("from jax import monitoring\n", ("attribute", "jax.monitoring")),
    ("from jax._src import monitoring\n", ("attribute", "jax._src.monitoring")),
    ("from urllib.request import urlopen\n", ("import", "urllib.request")),
    ("import shutil\nshutil.rmtree('x')\n", ("call", "shutil.rmtree")),
    ("def f(fn):\n    object.__setattr__(fn, '_schedule', None)\n", ("attribute", "object.__setattr__")),
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


@pytest.mark.parametrize("chapter", all_chapters(), ids=lambda c: c.id)
def test_reference_solutions_and_stubs_are_clean(chapter):
    """Every chapter's solutions and stubs import only what its contract allows, and touch nothing."""
    for folder in (chapter.solutions, chapter.stubs):
        files = sorted(p.name for p in folder.glob("*.py"))
        assert files and {ex.filename for ex in chapter.exercises} <= set(files), folder
        assert integrity.scan(folder, files, chapter.allowed_imports) == [], folder


def test_plain_import_of_jax_monitoring_is_flagged(tmp_path):
    """JAX's compile listeners are how the grader counts compiles: touching them could touch the grader."""
    assert codes(scan_source(tmp_path, "import jax.monitoring as m\n")) == {("attribute", "jax.monitoring")}


# ------------------------------------------------------------------ warnings by what they mean
@pytest.mark.parametrize("source", [
    "import bisect\ni = bisect.bisect_left([1, 2], 1)\n",
    "import heapq\nsmallest = heapq.nsmallest(3, [4, 1, 2, 3])\n",
    "import operator\nfrom operator import itemgetter\n",
    "import timeit\nbest = min(timeit.repeat(lambda: None, repeat=3, number=1))\n",
    "from timeit import default_timer as timer\n",
    "import enum\n\n\nclass Mode(enum.Enum):\n    FAST = 1\n",
    "from enum import Enum\n",
])
def test_every_import_the_contract_allows_gives_no_warning(tmp_path, source):
    """docs/ch4-contract.md ("Layout and imports"): bisect, heapq, operator, timeit and enum join the
    pure standard-library helpers every module may import."""
    assert scan_source(tmp_path, source) == []


@pytest.mark.parametrize("source, expected", [
    ("import os\n", ("import", "os")),
    ("import ctypes\n", ("import", "ctypes")),
    ("import subprocess\n", ("import", "subprocess")),
    ("import socket\n", ("import", "socket")),
])
def test_what_could_touch_the_grader_still_warns(tmp_path, source, expected):
    assert expected in codes(scan_source(tmp_path, source))


PRIVATE = [
    "from jax._src import tree_util\n\n\ndef softmax_raw(x):\n    return tree_util.tree_leaves(x)\n",
    "import jax._src.dispatch as dispatch\n\n\ndef softmax_raw(x):\n    return dispatch\n",
    "import jax\n\n\ndef softmax_raw(x):\n    return jax._src.tree_util.tree_leaves(x)\n",
    "import jax as j\n\n\ndef _helper(x):\n    return j._src.xla_bridge.get_backend()\n\n\n"
    "def softmax_raw(x):\n    return _helper(x)\n",
]


@pytest.mark.parametrize("source", PRIVATE)
def test_private_jax_api_is_not_an_integrity_warning(tmp_path, source):
    assert scan_source(tmp_path, source) == []


def _notes(tmp_path: Path, files: dict[str, str], *, notebook: bool = False) -> dict:
    for name, source in files.items():
        (tmp_path / name).write_text(textwrap.dedent(source), encoding="utf-8")
    exercises = load_chapter("ch4").exercises
    return integrity.student_notes(tmp_path, list(files), exercises, lambda where: where, notebook=notebook)


@pytest.mark.parametrize("source", PRIVATE)
def test_private_jax_api_is_a_note_for_the_student_in_both_languages(tmp_path, source):
    notes = _notes(tmp_path, {"ex01_jit_forms.py": source, "ex02_where.py": "import jax\n"})
    assert set(notes) == {"ex01_jit_forms"}, notes
    catalog = load_chapter("ch4").catalog
    (note,) = notes["ex01_jit_forms"]
    assert note.key == "note.private_jax" and note.args["where"].startswith("ex01_jit_forms.py:")
    en, zh = (catalog.render(note, lang) for lang in ("en", "zh"))
    assert "_src" in en and "private API" in en and "public API" in en, en
    assert "_src" in zh and "私有 API" in zh and "公开 API" in zh, zh


def test_a_notebook_notes_private_api_in_the_exercises_whose_functions_reach_it(tmp_path):
    """A notebook is one module: a use belongs to the graded functions that reach it (through
    helpers too), and an import no graded function uses costs no note."""
    source = (
        "import jax\nfrom jax._src import tree_util as tu\nfrom jax._src import dispatch\n\n\n"
        "def _leaves(x):\n    return tu.tree_leaves(x)\n\n\n"
        "def time_call(fn, *args, warmup=1, iters=20):\n    return _leaves(fn(*args))\n\n\n"
        "def piecewise(x):\n    return jax._src.numpy.where(x > 0, x, 0)\n")
    notes = _notes(tmp_path, {"ex01_jit_forms.py": source}, notebook=True)
    assert {ex: [n.args["name"] for n in found] for ex, found in notes.items()} == {
        "ex05_timing": ["jax._src.tree_util"], "ex02_where": ["jax._src.numpy.where"]}


@pytest.mark.slow
def test_a_graded_submission_tells_the_student_of_private_api_and_warns_nobody(tmp_path):
    """End to end: the note reaches the exercise's report in both languages; ``integrity`` stays empty."""
    from conftest import exercise, grade_to_dict, make_submission

    source = (SOLUTIONS / "ex05_timing.py").read_text(encoding="utf-8").replace(
        "import jax\n", "import jax\nfrom jax._src import tree_util\n", 1).replace(
        "        jax.block_until_ready(fn(*args))\n        samples",
        "        jax.block_until_ready(tree_util.tree_leaves(fn(*args)))\n        samples")
    assert "tree_util.tree_leaves" in source
    path = make_submission(tmp_path, {"ex05_timing": source})
    for lang, words in (("en", "private API"), ("zh", "私有 API")):
        report = grade_to_dict(path, lang=lang, exercises=("ex05",), seed=3)
        ex05 = exercise(report, "ex05_timing")
        assert ex05["score"] == ex05["max_score"]
        assert any(words in note and "ex05_timing.py:" in note for note in ex05["notes"]), ex05["notes"]
        assert report["integrity"] == [], report["integrity"]


def test_a_chapter_says_which_imports_it_allows(tmp_path):
    """The allowed imports are the chapter's contract (chapter.toml's ``allowed_imports``), not the core's: a
    chapter that allows ``scipy`` gets no warning for it, ch4 (which does not) does."""
    (tmp_path / "ex01_jit_forms.py").write_text("import scipy.special\nimport numpy\n", encoding="utf-8")
    assert codes(integrity.scan(tmp_path, ["ex01_jit_forms.py"], ALLOWED)) == {("import", "scipy.special")}
    assert integrity.scan(tmp_path, ["ex01_jit_forms.py"], ALLOWED | {"scipy"}) == []
    assert "numpy" in ALLOWED and "os" not in ALLOWED
