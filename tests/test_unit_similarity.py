"""grader.similarity: a class's unusually alike submissions, from their source (MOSS's fingerprints) and
from what they trace to (the canonical jaxpr), on the chapter's real ex02 (``jnp.where``) material: its
reference solution, its stub, its variants, and students' modules made as the variants are (the solution
with functions replaced), traced with ``jax.make_jaxpr`` in this process."""
from __future__ import annotations

import itertools
import random
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from grader.authoring.variants import module_text, splice
from grader.similarity.ranking import FLOOR, Baseline, Pair, Submission, rank, scores
from grader.similarity.source import K, WINDOW, fingerprints, tokens
from grader.similarity.traced import canonical

ROOT = Path(__file__).resolve().parent.parent
SOLUTION_FILE = ROOT / "solutions" / "ch4" / "ex02_where.py"
SOLUTION = SOLUTION_FILE.read_text(encoding="utf-8")
STUB = (ROOT / "exercises" / "ch4" / "ex02_where.py").read_text(encoding="utf-8")
VARIANTS = ROOT / "tests" / "variants" / "ch4" / "ex02_where"
X = jnp.linspace(-1.0, 1.0, 6, dtype=jnp.float32)
CALLS = [("piecewise", (X,)), ("normalize_if_positive", (X,)), ("clip_by_norm", (X, 1.0))]
EX = "ex02_where"

#: the solution with every name of its own renamed, its docstrings and comments changed
RENAMED = """
@jax.jit
def piecewise(values):
    '''My piecewise.'''
    return jnp.where(values > 0, values * values, 0.5 * values)

@jax.jit
def normalize_if_positive(arr):
    s = jnp.sum(arr)  # the sum
    is_pos = s > 0
    denom = jnp.where(is_pos, s, 1.0)
    return jnp.where(is_pos, arr / denom, arr)

@jax.jit
def clip_by_norm(vec, limit):
    length = jnp.sqrt(jnp.sum(vec * vec))
    over = length > limit
    factor = limit / jnp.where(over, length, 1.0)
    return jnp.where(over, vec * factor, vec)
"""
#: the solution's piecewise with its two branches computed first, in either order
BIG_FIRST = """
@jax.jit
def piecewise(x):
    big = x * x
    small = 0.5 * x
    return jnp.where(x > 0, big, small)
"""
SMALL_FIRST = """
@jax.jit
def piecewise(x):
    small = 0.5 * x
    big = x * x
    return jnp.where(x > 0, big, small)
"""
#: jnp.where written as lax.select, in all three functions
SELECT = """
from jax import lax

@jax.jit
def piecewise(x):
    return lax.select(x > 0, x * x, 0.5 * x)

@jax.jit
def normalize_if_positive(x):
    total = jnp.sum(x)
    positive = total > 0
    safe_total = lax.select(positive, total, jnp.ones_like(total))
    return lax.select(positive, x / safe_total, x)

@jax.jit
def clip_by_norm(x, max_norm):
    norm = jnp.sqrt(jnp.sum(x * x))
    too_long = norm > max_norm
    scale = max_norm / lax.select(too_long, norm, jnp.float32(1.0))
    return lax.select(too_long, x * scale, x)
"""
#: clip_by_norm's norm in a helper: called plainly, called jitted, and written out (the solution)
HELPER = """
def l2(v):
    return jnp.sqrt(jnp.sum(v * v))

@jax.jit
def clip_by_norm(x, max_norm):
    norm = l2(x)
    too_long = norm > max_norm
    scale = max_norm / jnp.where(too_long, norm, 1.0)
    return jnp.where(too_long, x * scale, x)
"""
HELPER_JITTED = HELPER.replace("def l2(v):", "@jax.jit\ndef l2(v):")
#: a clip_by_norm of a student's own (not the reference's), and a copy of it disguised: renamed, reordered,
#: jnp.where as lax.select, jnp.square as ** 2, a line merged into another
OWN = """
@jax.jit
def clip_by_norm(x, max_norm):
    sq = jnp.sum(jnp.square(x))
    norm = jnp.sqrt(sq)
    ratio = jnp.minimum(max_norm / jnp.where(norm > 0, norm, 1.0), 1.0)
    return jnp.where(norm > max_norm, x * ratio, x)
"""
DISGUISED = """
from jax import lax

@jax.jit
def clip_by_norm(v, limit):
    length = jnp.sqrt(jnp.sum(v ** 2))
    too_long = length > limit
    r = jnp.minimum(limit / lax.select(length > 0, length, jnp.float32(1.0)), 1.0)
    return lax.select(too_long, v * r, v)
"""


def module(patch: str) -> str:
    """A student's module: the solution with the patch's functions in place of its own."""
    return splice(SOLUTION, patch)


def traced(source: str) -> str:
    """What the other side captures: each function's printed jaxpr, one after another."""
    namespace: dict = {}
    exec(compile(source, "student", "exec"), namespace)
    return "\n".join(str(jax.make_jaxpr(namespace[name])(*args)) for name, args in CALLS)


def submission(source: str, jaxpr: bool = True) -> Submission:
    return {"source": source, "jaxpr": traced(source) if jaxpr else None}


def hashes(source: str) -> set[int]:
    return {p.hash for p in fingerprints(source)}


def dice(a: set, b: set) -> float:
    return 2 * len(a & b) / (len(a) + len(b))


def baseline() -> Baseline:
    return Baseline({EX: [STUB]}, {EX: submission(SOLUTION)})


def pair(pairs: list[Pair], first: str, second: str) -> Pair:
    found = [p for p in pairs if set(p.students) == {first, second}]
    assert found, f"{first} and {second} not reported: {[p.students for p in pairs]}"
    return found[0]


# --- the canonical trace: one program however it is written -------------------------------------------

def test_a_renamed_copy_is_one_program_and_one_text():
    """A trace never holds the source's names; the fingerprints see no name, docstring or comment."""
    renamed = module(RENAMED)
    assert canonical(traced(renamed)) == canonical(traced(SOLUTION))
    assert renamed != SOLUTION and hashes(renamed) == hashes(SOLUTION)


def test_reordered_independent_lines_are_one_program_and_mostly_one_text():
    big, small = module(BIG_FIRST), module(SMALL_FIRST)
    assert traced(big) != traced(small)
    assert canonical(traced(big)).digest == canonical(traced(small)).digest
    # the MOSS way allows a part only: the function's fingerprints across its reordered lines differ (a third
    # of them shared, measured), those within a line are kept
    assert 0.2 < dice(hashes(BIG_FIRST), hashes(SMALL_FIRST)) < 1.0


def test_where_written_as_select_is_one_program():
    """In JAX 0.10, jnp.where is a jit named _where around select_n (converting a scalar branch); lax.select
    is select_n alone (see grader.similarity.traced)."""
    select = module(SELECT)
    assert "_where" in traced(SOLUTION) and "_where" not in traced(select)
    assert canonical(traced(select)).digest == canonical(traced(SOLUTION)).digest
    assert canonical(str(jax.make_jaxpr(lambda x: jnp.where(x > 0, x, 0))(X))).digest == canonical(
        str(jax.make_jaxpr(lambda x: lax.select(x > 0, x, jnp.zeros_like(x)))(X))).digest


@pytest.mark.parametrize("helper", [HELPER, HELPER_JITTED], ids=["called", "jitted"])
def test_a_helper_called_or_jitted_is_the_same_as_written_out(helper):
    student = module(helper)
    if helper is HELPER_JITTED:
        assert "name=l2" in traced(student)
    assert canonical(traced(student)).digest == canonical(traced(SOLUTION)).digest


def test_a_disguised_copy_of_a_students_own_answer_is_one_program():
    assert canonical(traced(module(DISGUISED))).digest == canonical(traced(module(OWN))).digest
    assert canonical(traced(module(OWN))).digest != canonical(traced(SOLUTION)).digest


def test_genuinely_different_programs_differ():
    relu_max = canonical(str(jax.make_jaxpr(lambda x: jnp.maximum(x, 0))(X)))
    relu_where = canonical(str(jax.make_jaxpr(lambda x: jnp.where(x > 0, x, 0))(X)))
    assert relu_max.digest != relu_where.digest
    reference = canonical(traced(SOLUTION))
    alike = scores([list(reference.features), list(canonical(traced(module(SELECT))).features)])[0][0, 1]
    for name in ("alt_arithmetic", "alt_select_cond"):  # correct, by another algorithm
        other = canonical(traced(module_text(VARIANTS / f"{name}.py", SOLUTION_FILE)))
        assert other.digest != reference.digest
        assert scores([list(reference.features), list(other.features)])[0][0, 1] < 0.5 < alike == 1.0


def test_a_trace_on_one_line_and_shared_bodies_are_read():
    one_line = str(jax.make_jaxpr(lambda a: jnp.cos(jnp.sin(a)))(1.0))
    assert "\n" not in one_line.strip() and "; " in one_line
    assert [line.split(" = ")[1].split()[0] for line in canonical(one_line).equations] == ["sin", "cos"]
    shared = str(jax.make_jaxpr(lambda x: jnp.piecewise(x, [x > 0], [lambda v: v * v, lambda v: 0.5 * v]))(X))
    assert shared.startswith("let ")
    assert not any(line.split(" = ")[-1].startswith("jit") for line in canonical(shared).equations)
    with pytest.raises(ValueError):
        canonical("Traceback (most recent call last): ...")


# --- the source's fingerprints ----------------------------------------------------------------------

def test_the_api_is_kept_and_an_import_alias_resolved():
    assert hashes("import jax.numpy as np\ndef f(a):\n    return np.where(a > 0, a, 0)\n") == hashes(
        "import jax.numpy as jnp\ndef g(x):\n    return jnp.where(x > 0, x, 0)\n")
    assert hashes("import jax.numpy as jnp\ndef g(x):\n    return jnp.where(x > 0, x, 0)\n") != hashes(
        "import jax.numpy as jnp\ndef g(x):\n    return jnp.maximum(x > 0, x, 0)\n")


def test_winnowing_keeps_a_fingerprint_of_any_long_enough_shared_run():
    shared = "y = jnp.sqrt(jnp.sum(x * x)) / jnp.maximum(jnp.abs(x).max(), 1.0)\n"
    first = "import jax.numpy as jnp\ndef f(x):\n    a = x + 1\n    " + shared + "    return a\n"
    second = "import jax.numpy as jnp\ndef g(x, n):\n    for i in range(n):\n        " + shared + "    return n\n"
    assert len([t for t in tokens(shared)]) >= K + WINDOW - 1
    common = [p for p in fingerprints(first) if p.hash in hashes(second)]
    assert common and all(p.lines == (4, 4) for p in common)


def test_source_that_does_not_parse_is_still_fingerprinted():
    broken = "def f(x:\n    return jnp.where(x > 0, x, 0)  # unclosed\n"
    assert fingerprints(broken) and hashes(broken) == hashes(broken.replace("x", "y"))
    assert fingerprints("") == [] and fingerprints('"""only a docstring"""\n# and a comment\n') == []


# --- the ranking ------------------------------------------------------------------------------------

def test_a_copy_is_found_the_stub_never_counts():
    """Two students hand in the stub untouched (identical files): nothing of it counts. One copies another's
    own clip_by_norm, disguised: found, first. Others write other correct or wrong answers."""
    class_data = {"stub1": {EX: submission(STUB, jaxpr=False)}, "stub2": {EX: submission(STUB, jaxpr=False)},
                  "copier": {EX: submission(module(DISGUISED))}, "copied": {EX: submission(module(OWN))},
                  "renamed": {EX: submission(module(RENAMED))}, "select": {EX: submission(module(SELECT))}}
    for path in ("alt_arithmetic", "l1_norm", "swapped_branches", "alt_select_cond", "nan_on_zero_sum"):
        class_data[path] = {EX: submission(module_text(VARIANTS / f"{path}.py", SOLUTION_FILE))}
    pairs = rank(class_data, baseline(), threshold=0.0)
    assert pair(pairs, "stub1", "stub2").source_score == 0.0
    copy = pair(pairs, "copier", "copied")
    assert copy == pairs[0] and not copy.equals_reference
    assert copy.trace_score > 0.5 and copy.trace_score > copy.source_score  # the disguise fools the text more
    assert any(match.first[0] >= 60 and match.second[0] >= 60 for match in copy.why)  # clip_by_norm's lines
    without_stub = rank(class_data, Baseline({EX: []}, baseline().reference), threshold=0.0)
    assert pair(without_stub, "stub1", "stub2").source_score > 0.5  # it is the stub that counts for nothing


def test_two_students_equal_to_the_reference_are_flagged_not_called_copies():
    class_data = {"renamed": {EX: submission(module(RENAMED))}, "reordered": {EX: submission(module(BIG_FIRST))},
                  "cond1": {EX: submission(module_text(VARIANTS / "alt_select_cond.py", SOLUTION_FILE))},
                  "cond2": {EX: submission(module_text(VARIANTS / "alt_select_cond.py", SOLUTION_FILE))},
                  "arith": {EX: submission(module_text(VARIANTS / "alt_arithmetic.py", SOLUTION_FILE))}}
    pairs = rank(class_data, baseline(), threshold=0.0)
    both = pair(pairs, "renamed", "reordered")
    assert canonical(class_data["renamed"][EX]["jaxpr"]) == canonical(class_data["reordered"][EX]["jaxpr"])
    assert both.equals_reference and both.score == both.source_score
    twins = pair(pairs, "cond1", "cond2")
    assert not twins.equals_reference and twins.score > both.score


def test_what_most_of_the_class_wrote_counts_for_little():
    """Ten students write the solution (their own names); two of them, and two others who share a rarer
    answer, are the pairs compared: rarity puts the rare pair first, though the common pair is identical."""
    rng = random.Random(4)
    common = {f"common{i}": {EX: submission(module(RENAMED.replace("arr", f"a{rng.randrange(99)}")))}
              for i in range(10)}
    rare = {name: {EX: submission(module_text(VARIANTS / "alt_arithmetic.py", SOLUTION_FILE))}
            for name in ("rare1", "rare2")}
    pairs = rank(common | rare, baseline(), threshold=0.0)
    alike, unusual = pair(pairs, "common0", "common1"), pair(pairs, "rare1", "rare2")
    assert alike.source_score < 0.3 and unusual.source_score > 0.6
    assert unusual.score > 0.6 > alike.score
    alone = rank({"common0": common["common0"], "common1": common["common1"]}, baseline(), threshold=0.0)
    assert pair(alone, "common0", "common1").source_score == 1.0  # alone, they are as alike as can be


def test_a_submission_not_traced_is_compared_by_its_source_alone():
    class_data = {"a": {EX: submission(module(RENAMED), jaxpr=False)}, "b": {EX: submission(module(RENAMED))},
                  "c": {EX: {"source": module(SELECT), "jaxpr": "RuntimeError: cannot trace"}}}
    pairs = rank(class_data, baseline(), threshold=0.0)
    for first, second in (("a", "b"), ("b", "c")):
        found = pair(pairs, first, second)
        assert found.trace_score is None and found.score == found.source_score


def test_the_scores_of_all_pairs_at_once_are_each_pairs_own():
    rng = random.Random(7)
    sets = [rng.sample(range(40), rng.randrange(1, 15)) for _ in range(30)] + [None]
    matrix, weights = scores(sets)
    n = len(sets) - 1
    for i, j in itertools.combinations(range(n), 2):
        shared = set(sets[i]) & set(sets[j])
        df = {f: sum(f in s for s in sets[:n]) for f in shared}
        size = sum(FLOOR + (1 - FLOOR) * weights[f] for f in (*sets[i], *sets[j]))
        expected = 2 * sum(min(1.0, np.log(n / df[f]) / np.log(n / 2)) for f in shared) / size
        assert matrix[i, j] == pytest.approx(expected, abs=1e-5)
    assert np.isnan(matrix[0, n])


#: ways of clip_by_norm a class writes, each its own program made of the same few pieces (sqrt, sum, where)
CLIPS = {
    "a": "norm = jnp.sqrt(jnp.sum(x * x))\n    return jnp.where(norm > max_norm, x * (max_norm / norm), x)",
    "b": "norm = jnp.sqrt(jnp.sum(x * x))\n    return x * jnp.minimum(1.0, max_norm / norm)",
    "c": "norm = jnp.sqrt(jnp.sum(x * x))\n    return jnp.where(norm > max_norm, x / norm * max_norm, x)",
    "d": "norm = jnp.sqrt(jnp.sum(jnp.square(x)))\n    return jnp.where(norm <= max_norm, x, max_norm * x / norm)",
    "e": "sq = jnp.sum(x * x)\n    return jnp.where(sq > max_norm ** 2, x * max_norm / jnp.sqrt(sq), x)",
}


def _clip(body: str) -> str:
    return module(f"\n@jax.jit\ndef clip_by_norm(x, max_norm):\n    {body}\n")


def test_one_program_two_students_alone_trace_to_scores_as_rare_as_it_is():
    """Every piece of these programs is common (each has its sqrt, its sum, its where) while the program they
    make is two students' alone: the pair's trace score is the whole program's rarity, not its pieces'."""
    data = {name: {EX: submission(_clip(body))} for name, body in CLIPS.items()}
    data["copy"] = {EX: submission(_clip(CLIPS["e"].replace("sq =", "total =").replace("(sq", "(total")))}
    pairs = rank(data, Baseline({EX: [STUB]}), threshold=0.0)
    copied = pair(pairs, "copy", "e")
    assert copied.same_program and copied.trace_score >= 0.99
    others = [p for p in pairs if set(p.students) != {"copy", "e"}]
    assert others and not any(p.same_program for p in others)
    assert max(p.trace_score for p in others) < copied.trace_score
