"""What a job printed, as its outcome keeps it: the head and the tail of its output file, and how many
bytes lay between them (:func:`output_excerpt`)."""
from __future__ import annotations

from pathlib import Path

#: the bytes kept of the start of a job's output, and of its end
OUTPUT_HEAD = 6000
OUTPUT_TAIL = 3000


def output_excerpt(path: Path) -> tuple[str, int]:
    """The text kept of the output file at ``path`` (its head, and its tail after a note of the bytes left
    out), and its size in bytes."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(OUTPUT_HEAD)
        tail = b""
        if size > OUTPUT_HEAD + OUTPUT_TAIL:
            handle.seek(size - OUTPUT_TAIL)
            tail = handle.read(OUTPUT_TAIL)
        elif size > OUTPUT_HEAD:
            tail = handle.read()
    text = head.decode("utf-8", errors="replace")
    if tail:
        gap = size - len(head) - len(tail)
        text += (f"\n[… {gap} bytes …]\n" if gap > 0 else "") + tail.decode("utf-8", errors="replace")
    return text, size
