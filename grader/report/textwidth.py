"""Text measured in terminal columns: Chinese characters take two.

:func:`textwrap.wrap` counts characters, so a line of Chinese wraps at twice the
terminal's width. Here a character's width comes from its East Asian width class
(wide and fullwidth: two columns; combining marks: none; the rest: one), a line may
break between two wide characters as well as at spaces, and closing punctuation
(``，。）`` ...) stays with the character before it.
"""
from __future__ import annotations

import unicodedata

#: punctuation a line must not start with (it closes what comes before it)
_CLOSING = set("，。、；：？！）」』》〉】〕…·,.;:?!)]}%")
#: punctuation a line must not end with (it opens what comes after it)
_OPENING = set("（「『《〈【〔“‘")


def char_width(char: str) -> int:
    """Columns taken by one character in a terminal."""
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def display_width(text: str) -> int:
    """Columns taken by ``text`` in a terminal."""
    return sum(char_width(c) for c in text)


def truncate(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` columns."""
    out, used = [], 0
    for char in text:
        used += char_width(char)
        if used > width:
            break
        out.append(char)
    return "".join(out)


def pad(text: str, width: int) -> str:
    """``text`` padded with spaces on the right to ``width`` columns."""
    return text + " " * max(0, width - display_width(text))


def _chunks(text: str) -> list[str]:
    """Pieces a line may break between: runs of spaces, words, single wide characters.
    Closing punctuation stays with what precedes it, opening punctuation with what follows,
    and a path quoted for the shell (``'my work/ch4/ex02.py'``) is one piece, spaces and all,
    so that it can be pasted from the terminal."""
    chunks: list[str] = []
    quoted = False
    for char in text:
        previous = chunks[-1] if chunks else ""
        last = previous[-1:] if previous else ""
        if quoted:
            chunks[-1] += char
            quoted = char != "'"
            continue
        if char == "'" and (not last or last.isspace() or last in "(「"):
            chunks.append(char)
            quoted = True
            continue
        if char.isspace():
            glue = last.isspace()
        elif last in _OPENING or (char in _CLOSING and last and not last.isspace()):
            glue = True
        else:
            glue = bool(last) and not last.isspace() and char_width(char) != 2 and char_width(last) != 2
        if glue:
            chunks[-1] += char
        else:
            chunks.append(char)
    return chunks


def wrap(text: str, width: int, indent: str = "", subsequent_indent: str | None = None) -> list[str]:
    """``text`` as lines of at most ``width`` columns, the first starting with ``indent``,
    the others with ``subsequent_indent`` (default: ``indent``)."""
    subsequent_indent = indent if subsequent_indent is None else subsequent_indent
    lines: list[str] = []
    prefix = indent
    current: list[str] = []
    used = display_width(prefix)

    def flush() -> None:
        nonlocal prefix, current, used
        lines.append(prefix + "".join(current).rstrip())
        prefix, current = subsequent_indent, []
        used = display_width(prefix)

    for chunk in _chunks(text.replace("\n", " ").replace("\t", " ")):
        if chunk.isspace():
            if current:
                current.append(chunk)
                used += len(chunk)
            continue
        size = display_width(chunk)
        if used + size <= width:
            current.append(chunk)
            used += size
            continue
        if current and size <= width - display_width(subsequent_indent):
            flush()
            current.append(chunk)
            used += size
            continue
        for char in chunk:  # longer than a line: broken where it must be
            if current and used + char_width(char) > width:
                flush()
            current.append(char)
            used += char_width(char)
    if current or not lines:
        flush()
    return lines
