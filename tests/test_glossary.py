"""One word for one thing (docs/architecture.md, "Words"): the words its table of words not used lists
appear nowhere in the grader's code, its docs, its tests or its README ("exercise module" meant the grader's
package of an exercise in some places and the student's file in others)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def banned() -> dict[str, str]:
    """``{word not used: what to write instead}``, from the table under "Words that name two things"."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    table = text[text.index("Words that name two things"):].split("\n\n")[1]
    rows = [line.split("|")[1:3] for line in table.splitlines()[2:] if line.startswith("|")]
    return {word.strip(): instead.strip() for word, instead in rows}


def test_the_table_of_words_not_used_is_read():
    words = banned()
    assert "exercise module" in words and all(words.values()), words


def test_no_file_uses_a_word_not_used():
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "grader").rglob("*.py"),
             *(ROOT / "grader").rglob("*.toml"), *(ROOT / "tests").glob("*.py"), *(ROOT / "scripts").glob("*.py"),
             *(ROOT / "benchmarks").glob("*.py")]
    words = banned()
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(words, key=len, reverse=True))) + r")\b", re.I)
    found = []
    for path in files:
        if path in (ARCHITECTURE, Path(__file__).resolve()):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            for match in pattern.finditer(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r}, write "
                             f"{words[match.group(0).lower()]}")
    assert not found, "\n".join(found)
