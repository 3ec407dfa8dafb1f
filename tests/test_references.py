"""Every reference the repository makes to a file resolves inside it (issue "ready for chapter 5"): ten
headers pointed to ``../shared/spec/ch4-exercises.md``, a file beside the authors' checkout that a newcomer's
clone does not have, so the clone had no exercise contract. The contract is ``docs/ch4-contract.md`` now,
in its own words; links between the documents resolve; no file names a path outside the repository but the
otter benchmark's anchor, which says what it does without one."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: where the project's own text lives (not .venv, not build outputs)
TEXT = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "grader").rglob("*.py"),
        *(ROOT / "grader").rglob("*.toml"), *(ROOT / "tests").glob("*.py"), *(ROOT / "benchmarks").glob("*.py"),
        *(ROOT / "scripts").glob("*")]
#: the one outside path a file may name, and why: benchmarks/grading_speed.py --otter times otter-grader on an
#: assignment kept beside the checkout, and says so (and how to get one) where there is none
OUTSIDE_ALLOWED = {"../shared/anchors/otter"}


def _texts():
    for path in TEXT:
        if path.is_file() and path.name != Path(__file__).name:
            yield path, path.read_text(encoding="utf-8", errors="replace")


def test_no_file_points_outside_the_repository():
    outside = re.compile(r"\.\./shared/[\w./-]*\w")
    found = {(str(path.relative_to(ROOT)), m.group(0)) for path, text in _texts() for m in outside.finditer(text)
             if m.group(0) not in OUTSIDE_ALLOWED}
    assert not found, sorted(found)


def test_the_exercise_contract_is_in_the_repository_and_every_chapter_file_names_it():
    contract = ROOT / "docs" / "ch4-contract.md"
    assert contract.exists() and (ROOT / "docs" / "ch4-contract.zh.md").exists()
    text = contract.read_text(encoding="utf-8")
    from grader.chapter import load_chapter

    chapter = load_chapter("ch4")
    for ex in chapter.exercises:  # every graded name of every exercise is in the contract
        assert f"## {ex.id}" in text, ex.id
        for name in ex.functions:
            assert f"`{name}" in text, (ex.id, name)
    headers = [ROOT / "grader" / "chapters" / "ch4" / "chapter.toml",
               *(ROOT / "grader" / "chapters" / "ch4").glob("*/exercise.toml")]
    for header in headers:
        assert "docs/ch4-contract.md" in header.read_text(encoding="utf-8")[:600], header


def test_links_between_the_documents_resolve():
    link = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
    broken = []
    for path, text in _texts():
        if path.suffix != ".md":
            continue
        for target in link.findall(text):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            if not (path.parent / target).exists():
                broken.append((str(path.relative_to(ROOT)), target))
    assert not broken, broken
