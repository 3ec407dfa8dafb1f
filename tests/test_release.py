"""A course release (issue 10), built, installed and used as a class would.

``grade dev release ch4`` builds the release into a temporary folder; the README's own
command installs it into a fresh virtual environment and grades the stubs there (0
points, a preview). The reference solutions copied into the release's exercises get
full marks in the preview, and the same files get full marks at final grading with the
full repository and another seed. A submission that returns the public seed's answers
by looking them up in the shipped records gets full marks in the preview and loses them
at final grading. The release holds no solution code in any form.

Time: about two and a half minutes on two busy cores (the build records the reference,
about 20 s; the install about 30 s with pip's cache; one full preview grading, one full
final grading, and two gradings of two exercises).
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import FULL, SOLUTIONS, STUBS, exercise, grade_to_dict, statuses, variant

from grader.authoring.release import leaks, readme_command
from grader.chapter import load_chapter
from grader.cli import main
from grader.preview import FILENAME, ReferenceRecords

pytestmark = pytest.mark.slow

PUBLIC_SEED = 424242
#: the final grading's seed: any other than the public one (the instructor's is secret)
FINAL_SEED = 1234
CHAPTER = load_chapter("ch4")


def _env() -> dict:
    """The environment of a student's shell: nothing of this repository's virtual environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "GRADER_CHAPTERS")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(Path(__file__).resolve().parent.parent)))
    return env


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The release as built, and a pristine copy of it (before anything is installed in it)."""
    out = tmp_path_factory.mktemp("class") / "ch4-release"
    t0 = time.monotonic()
    assert main(["dev", "release", "ch4", "--out", str(out), "--seed", str(PUBLIC_SEED), "--lang", "en"]) == 0
    print(f"\nrelease built in {time.monotonic() - t0:.1f} s")
    pristine = tmp_path_factory.mktemp("pristine") / "ch4-release"
    shutil.copytree(out, pristine)
    return out, pristine


@pytest.fixture(scope="module")
def installed(release):
    """The README's command, run in the release's folder as a student would."""
    out, _ = release
    command = readme_command((out / "README.md").read_text(encoding="utf-8"))
    assert command.startswith("python3 -m venv .venv") and "pip install" in command
    t0 = time.monotonic()
    done = subprocess.run(["bash", "-c", command], cwd=out, env=_env(), capture_output=True, text=True, timeout=900)
    print(f"README command (venv, pip install, grade the stubs) in {time.monotonic() - t0:.1f} s")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out / ".venv" / "bin" / "grade", done.stdout


def _student_grade(grade: Path, cwd: Path, *args) -> dict:
    done = subprocess.run([str(grade), *map(str, args), "--json", "--lang", "en"], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def with_solutions(installed, release):
    """The reference solutions copied into the release's exercises, graded there (a preview)."""
    grade, _ = installed
    out, _ = release
    for file in SOLUTIONS.glob("*.py"):
        shutil.copy(file, out / "exercises" / "ch4" / file.name)
    return _student_grade(grade, out, "exercises/ch4")


# ------------------------------------------------------------------ the release as built
def test_release_holds_no_solution_code(release):
    _, pristine = release
    assert leaks(pristine, CHAPTER) == []
    files = {p.relative_to(pristine).as_posix() for p in pristine.rglob("*") if p.is_file()}
    assert {"README.md", "pyproject.toml", f"grader/chapters/ch4/{FILENAME}"} <= files
    assert {f"grader/chapters/ch4/{ex.id}/{name}" for ex in CHAPTER.exercises
            for name in ("__init__.py", "exercise.toml")} <= files  # the chapter's folders, whole
    assert {f"exercises/ch4/{f.name}" for f in STUBS.glob("*.py")} <= files
    assert not [f for f in files if "solutions" in f or f.endswith((".pyc", ".pkl", ".pickle", ".npy", ".npz"))]
    # the exercises are the stubs, byte for byte
    for stub in STUBS.glob("*.py"):
        assert (pristine / "exercises" / "ch4" / stub.name).read_bytes() == stub.read_bytes()
    # the grader's former answer-like helpers and the solutions' own helpers are nowhere
    text = "\n".join((pristine / f).read_text(encoding="utf-8") for f in files)
    for name in ("expected_bucket", "layer_norm64", "count_equations", "_mean_sq_core", "def _layer_norm_float64"):
        assert name not in text, name
    # the solutions' distinctive lines: none of them, whitespace aside
    flat = "".join(text.split())
    for line in _distinctive_lines():
        assert line not in flat, line


def _distinctive_lines() -> set[str]:
    """Lines of the solutions' SOLUTION blocks that the stubs do not show (12+ characters,
    imports aside: naming a module is no answer)."""
    from grader.authoring.answers import normalised, solution_blocks

    lines = set()
    for solution in SOLUTIONS.glob("*.py"):
        stub = normalised((STUBS / solution.name).read_text(encoding="utf-8"))
        for block in solution_blocks(solution.read_text(encoding="utf-8")):
            lines |= {normalised(line) for line in block.splitlines() if len(normalised(line)) >= 12
                      and normalised(line) not in stub and not line.strip().startswith(("import ", "from "))}
    assert len(lines) > 20  # the solutions do hold answers to look for
    return lines


def test_leak_search_finds_an_answer_planted_in_a_release(release, tmp_path):
    _, pristine = release
    planted = tmp_path / "planted"
    shutil.copytree(pristine, planted)
    helper = planted / "grader" / "chapters" / "ch4" / "common.py"
    helper.write_text(helper.read_text(encoding="utf-8") + "\n\ndef bucket(n):\n    length = 8\n"
                      "    while length < n:\n        length *= 2\n    return length\n", encoding="utf-8")
    (planted / "grader" / "reference.pkl").write_bytes(b"\x80\x04N.")
    found = leaks(planted, CHAPTER)
    assert any("common.py: holds solution code" in line for line in found), found
    assert any("reference.pkl" in line for line in found), found


def test_records_answer_for_the_public_seed_only(release):
    _, pristine = release
    records = ReferenceRecords.load(pristine / "grader" / "chapters" / "ch4" / FILENAME)
    assert records.seed == PUBLIC_SEED and records.environment["jax"]
    ex = CHAPTER.exercise("ex02_where")
    assert records.outcome(ex.id, PUBLIC_SEED, ex.inputs(PUBLIC_SEED)).end == "done"
    assert records.outcome(ex.id, FINAL_SEED, ex.inputs(FINAL_SEED)) is None
    assert records.outcome(ex.id, PUBLIC_SEED, ex.inputs(FINAL_SEED)) is None  # other inputs, same seed claimed
    pyproject = (pristine / "pyproject.toml").read_text(encoding="utf-8")
    # the records' JAX in the extra the README's fresh environment asks for; a JAX installed for an
    # accelerator (>= the floor) kept by a plain install
    assert f'pinned = ["jax=={records.environment["jax"]}", "jaxlib=={records.environment["jaxlib"]}"]' in pyproject
    assert '"jax>=0.4.30"' in pyproject and '"jax==' not in pyproject.split("[project.optional-dependencies]")[0]


# ------------------------------------------------------------------ as a student
def test_readme_command_installs_and_grades_the_stubs_to_zero(installed, release):
    _, stdout = installed
    out, _ = release
    graded = stdout[stdout.index(f"Preview (public seed {PUBLIC_SEED})"):]  # after what pip printed
    assert graded.startswith(f"Preview (public seed {PUBLIC_SEED}): Chapter 4: JIT basics: 0 / {FULL:g} — graded "
                             f"exercises/ch4 (8 .py files)\n")  # the first line names what was graded
    report = json.loads((out / "exercises" / "ch4" / ".grade" / "report.json").read_text(encoding="utf-8"))
    assert report["preview"] is True and report["seed"] == PUBLIC_SEED
    assert report["score"] == 0 and report["max_score"] == FULL
    assert {e["status"] for e in report["exercises"]} == {"not_attempted"}
    md = (out / "exercises" / "ch4" / ".grade" / "report.md").read_text(encoding="utf-8")
    assert md.startswith(f"# Preview (public seed {PUBLIC_SEED})") and "reference records" in md


def test_another_seed_is_refused_in_one_line(installed, release):
    grade, _ = installed
    out, _ = release
    done = subprocess.run([str(grade), "exercises/ch4", "-k", "2", "--seed", "5", "--lang", "en"], cwd=out,
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and f"public seed {PUBLIC_SEED}" in done.stderr, done.stderr


def test_the_solutions_get_full_marks_in_the_preview(with_solutions):
    report = with_solutions
    problems = {e["id"]: {c["id"]: c["message"] for c in e["checks"] if c["status"] != "passed"}
                for e in report["exercises"] if e["status"] != "passed"}
    assert not problems
    assert report["score"] == report["max_score"] == FULL and report["preview"] is True
    assert report["title"].startswith(f"Preview (public seed {PUBLIC_SEED}):")
    checked = {(e["id"], c["id"]): c["checked"] for e in report["exercises"] for c in e["checks"]}
    assert {k for k, v in checked.items() if v == "final"} == {("ex06_speedup", "fast_heavy.speedup"),
                                                               ("ex06_speedup", "layer_norm.speedup")}
    speedup = next(c for c in exercise(report, "ex06_speedup")["checks"] if c["id"] == "layer_norm.speedup")
    assert speedup["measured"]["bar"] == CHAPTER.exercise("ex06_speedup").release_speedup_bar["layer_norm"]
    assert "bar" in speedup["message"] and speedup["measured"]["student"]["speedup"] > speedup["measured"]["bar"]


def test_the_same_files_get_full_marks_at_final_grading(with_solutions, release):
    out, _ = release
    report = grade_to_dict(out / "exercises" / "ch4", seed=FINAL_SEED)
    problems = {e["id"]: {c["id"]: c["message"] for c in e["checks"] if c["status"] != "passed"}
                for e in report["exercises"] if e["status"] != "passed"}
    assert not problems
    assert report["score"] == FULL and report["preview"] is False and report["seed"] == FINAL_SEED
    assert {c["checked"] for e in report["exercises"] for c in e["checks"]} == {"now"}


# ------------------------------------------------------------------ answers looked up
def _lookup_submission(records: ReferenceRecords, folder: Path) -> Path:
    """ex04 and ex08 answered from the shipped records of the public seed, keyed by the
    inputs' bytes; ex06 with a host callback in its layer_norm; the rest stubs."""
    target = folder / "ch4"
    shutil.copytree(STUBS, target, ignore=shutil.ignore_patterns(".grade"))
    (target / "ex06_speedup.py").write_text(variant("ex06_speedup", "layer_norm_callback"), encoding="utf-8")
    ex04, ex08 = CHAPTER.exercise("ex04_cache_keys"), CHAPTER.exercise("ex08_aot_debug")
    inputs4, inputs8 = ex04.inputs(records.seed), ex08.inputs(records.seed)
    obs4 = records.outcome(ex04.id, records.seed, inputs4).records
    obs8 = records.outcome(ex08.id, records.seed, inputs8).records
    means = {_key([np.asarray(c["data"], np.float64)]): float(obs4[f"masked_mean_sq/values/{i}"]["value"]["value"])
             for i, c in enumerate(inputs4["calls"])}
    buckets = obs4["bucket_length/values"]["value"]["values"]
    counts = {_key(args): {k: v["value"] for k, v in obs8[f"count_primitives/{i}"]["value"]["items"].items()}
              for i, args in enumerate(inputs8["hidden_args"])}
    flops = {_key(args): float(obs8[f"flops_of/{i}"]["value"]["value"]) for i, args in enumerate(inputs8["flops_args"])}
    (target / "ex04_cache_keys.py").write_text(f'''"""Public answers, looked up."""
import hashlib

import jax
import numpy as np

MEANS = {means!r}
BUCKETS = {buckets!r}
{_KEY_SOURCE}

def bucket_length(n):
    return BUCKETS[n - 1]


_core = jax.jit(lambda mean: mean)  # a jitted core of its own, so that only the lookup is the mistake


def masked_mean_sq(x):
    return _core(np.float32(MEANS.get(_key([np.asarray(x, np.float64)]), 0.0)))
''', encoding="utf-8")
    (target / "ex08_aot_debug.py").write_text(f'''"""Public answers, looked up."""
import hashlib

import jax
import numpy as np

COUNTS = {counts!r}
FLOPS = {flops!r}
{_KEY_SOURCE}

def precompile(fn, *example_args):
    return (fn if hasattr(fn, "lower") else jax.jit(fn)).lower(*example_args).compile()


def count_primitives(fn, *args):
    return dict(COUNTS.get(_key(args), {{}}))


def flops_of(fn, *args):
    return FLOPS.get(_key(args), 0.0)
''', encoding="utf-8")
    return target


def _key(args) -> str:
    """The lookup key of a call's arguments: their shapes, dtypes and bytes."""
    digest = hashlib.sha256()
    for a in args:
        a = np.asarray(a)
        digest.update(f"{a.shape}{a.dtype}".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


_KEY_SOURCE = "\n\n" + inspect.getsource(_key)


@pytest.fixture(scope="module")
def student_submission(installed, release, tmp_path_factory):
    """The looked-up answers (and the slow ex06) graded in the release, as a student would."""
    grade, _ = installed
    _, pristine = release
    records = ReferenceRecords.load(pristine / "grader" / "chapters" / "ch4" / FILENAME)
    folder = tmp_path_factory.mktemp("student")
    submission = _lookup_submission(records, folder)
    return submission, _student_grade(grade, folder, submission, "-k", "ex04", "-k", "ex06", "-k", "ex08")


def test_answers_looked_up_score_in_the_preview_and_not_at_final_grading(student_submission):
    submission, preview = student_submission
    assert preview["preview"] is True
    assert exercise(preview, "ex04_cache_keys")["score"] == 10 and exercise(preview, "ex08_aot_debug")["score"] == 10
    final = grade_to_dict(submission, seed=FINAL_SEED, exercises=("ex04", "ex08"))
    assert final["preview"] is False
    lost = {(e["id"], c["id"]) for e in final["exercises"] for c in e["checks"] if c["status"] != "passed"}
    assert lost == {("ex04_cache_keys", "masked_mean_sq.values"), ("ex08_aot_debug", "count_primitives.values"),
                    ("ex08_aot_debug", "flops_of.values")}, statuses(exercise(final, "ex08_aot_debug"))
    assert final["score"] < 20


def test_a_host_callback_fails_the_release_bar_and_the_report_says_why(student_submission):
    """The preview's speed-up bar (the chapter's, over the provided eager code) tells a
    slow answer from a right one, names the mistake, and leaves the verdict to final grading."""
    _, preview = student_submission
    checks = {c["id"]: c for c in exercise(preview, "ex06_speedup")["checks"]}
    slow = checks["layer_norm.speedup"]
    assert slow["status"] == "failed" and slow["checked"] == "final" and slow["hint_id"] == "check:callback"
    assert "this release's bar is 100×" in slow["message"], slow["message"]
    assert {c["status"] for cid, c in checks.items() if cid != "layer_norm.speedup"} == {"passed"}
    assert checks["fast_heavy.speedup"]["checked"] == "final"
