"""Adding a check is three files: the walkthrough of docs/architecture.md ("Adding a check"), done.

In a copy of the repository, ex02 gets a new check, ``piecewise.batched`` ("piecewise works under
``jax.vmap``"), by editing exactly three files:

1. ``grader/chapters/ch4/ex02_where/exercise.toml``: the check's words (points, title, hint, hint layers);
2. ``grader/chapters/ch4/ex02_where/__init__.py``: its record key, an input drawn last (no other draw moves),
   one probe line (``ctx.call(..., under=jax.vmap)``) and the check;
3. ``tests/variants/ch4/ex02_where/piecewise_callback.py``: the mistake it exists for, written as the one
   function it changes (a host callback ``jax.vmap`` cannot batch).

Then, in that copy, the structural tests (variants, record keys, hints, input coverage) and the end-to-end
test of full marks pass with no test file edited: the chapter's total (now 82) is read from the chapter,
and the new variant is graded and judged as its header declares.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FULL

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
EX02 = "grader/chapters/ch4/ex02_where"
VARIANT = "tests/variants/ch4/ex02_where/piecewise_callback.py"

WORDS = '''
[[checks]]
id = "piecewise.batched"
category = "numeric"
points = 2

[checks.title]
en = "piecewise works under jax.vmap"
zh = "piecewise 在 jax.vmap 下可用"

[checks.hint]
en = "Write piecewise with jax.numpy operations, which jax.vmap can batch (section 1)."
zh = "用 jax.numpy 的运算写 piecewise，jax.vmap 才能对它批处理（第一节）。"

[[checks.hint_layers]]
en = "jax.vmap traces your function once more, with a batch axis: each operation must batch (section 1 (一))."
zh = "jax.vmap 会加上批处理轴再追踪一次你的函数：其中每个运算都必须能批处理（第一节）。"

[[checks.hint_layers]]
en = "A host callback without vmap_method cannot batch: run jax.vmap(piecewise) on a 2-D array (section 1 (一))."
zh = "没有 vmap_method 的主机回调无法批处理：对一个二维数组运行 jax.vmap(piecewise) 看看（第一节）。"
'''

KEYS_BEFORE = '''    value="{name}/values/{case}",
    reference=("value",),  # the reference's run only gives the values to compare with'''
KEYS_AFTER = '''    value="{name}/values/{case}", batched="{name}/batched",
    reference=("value", "batched"),  # the reference's run only gives the values to compare with'''
INPUT_BEFORE = '''    drawn["normalize"]["small_positive_sum"] = _small_positive_sum(rng, 12)
    return drawn'''
INPUT_AFTER = '''    drawn["normalize"]["small_positive_sum"] = _small_positive_sum(rng, 12)
    drawn["piecewise_batch"] = rng.normal(size=(4, 6)).astype(F32)  # drawn last: nothing before it moves
    return drawn'''
PROBE_BEFORE = '''        ctx.call(KEYS.value(name="clip_by_norm", case=case), "clip_by_norm", put(x), m)
'''
PROBE_AFTER = PROBE_BEFORE + '''    import jax

    ctx.call(KEYS.batched(name="piecewise"), "piecewise", put(inp["piecewise_batch"]), under=jax.vmap)
'''
CHECK = '''

@check("piecewise.batched", depends=("piecewise.values",))
def piecewise_batched(s: Records, r: Records, ctx: CheckContext) -> dict:
    x = ctx.inputs["piecewise_batch"]
    return numeric.compare_calls(s, r, [(KEYS.batched(name="piecewise"), label("jax.vmap(piecewise)", x))],
                                 dtype="float32")
'''
MISTAKE = '''# expect-failed: piecewise.batched
# expect-hint: piecewise.batched=hint.exception
# why: a host callback without vmap_method: right values one array at a time, but jax.vmap cannot batch it
# base: solution
import numpy as np


def _on_host(a):
    v = np.asarray(a)
    return np.where(v > 0, v * v, 0.5 * v).astype(v.dtype)


@jax.jit
def piecewise(x):
    return jax.pure_callback(_on_host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
'''


def _replace(path: Path, before: str, after: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(before) == 1, f"{path}: the walkthrough's anchor moved: {before!r}"
    path.write_text(text.replace(before, after), encoding="utf-8")


def _digests(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_a_new_ex02_check_is_three_files_and_the_tests_follow(tmp_path):
    repo = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__", ".grade", "*.egg-info")
    for name in ("grader", "tests", "solutions", "exercises"):
        shutil.copytree(ROOT / name, repo / name, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    before = _digests(repo)

    words = repo / EX02 / "exercise.toml"
    words.write_text(words.read_text(encoding="utf-8") + WORDS, encoding="utf-8")
    code = repo / EX02 / "__init__.py"
    _replace(code, KEYS_BEFORE, KEYS_AFTER)
    _replace(code, INPUT_BEFORE, INPUT_AFTER)
    _replace(code, PROBE_BEFORE, PROBE_AFTER)
    code.write_text(code.read_text(encoding="utf-8") + CHECK, encoding="utf-8")
    (repo / VARIANT).write_text(MISTAKE, encoding="utf-8")

    after = _digests(repo)
    touched = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert touched == sorted([f"{EX02}/exercise.toml", f"{EX02}/__init__.py", VARIANT]), touched

    selected = "ex02 or every_check_has_a_variant or named_hint or correct_alternative or reference_scores_full"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-k", selected,
         "tests/test_variants.py", "tests/test_record_keys.py", "tests/test_unit_hints.py",
         "tests/test_input_coverage.py", "tests/test_end_to_end.py"],
        cwd=repo, capture_output=True, text=True, timeout=900,
        env={**os.environ, "PYTHONPATH": str(repo), "GRADER_CHAPTERS": ""})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    passed = set(re.findall(r"^PASSED (\S+)", done.stdout, re.M))
    assert "tests/test_variants.py::test_variant_verdict[ch4/ex02_where/piecewise_callback]" in passed, passed
    assert "tests/test_end_to_end.py::test_reference_scores_full_marks" in passed, passed
    assert "tests/test_unit_hints.py::test_every_check_has_its_layers_in_both_languages" \
           "[ch4/ex02_where:piecewise.batched]" in passed, passed
    assert "tests/test_record_keys.py::test_every_declared_key_is_recorded_and_read[ch4/ex02_where]" in passed
    print(f"\n3 files touched; {len(passed)} tests passed in the copy; full marks {FULL:g} -> {FULL + 2:g}")
