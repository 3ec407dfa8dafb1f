"""Text a student controls, made safe for where it goes: one function per format.

A student's name, file names, printed output and exception texts reach the grader's
outputs. Each format has characters it cannot carry or that act instead of being read:

* :func:`terminal`: control characters (``ESC``, ``CR``, C1 controls such as ``CSI``) move
  the cursor, erase lines or set the window title; they are shown as text (``\\x1b[2K``),
  never sent;
* :func:`xml`: XML 1.0 forbids most C0 controls and lone surrogates (its ``Char``
  production), so one of them makes the whole file unreadable; shown as text, the rest is
  escaped by the XML writer;
* :func:`markdown` (one line: a table cell, a list item) and :func:`markdown_code` (a fenced
  block): raw HTML, links and table pipes in a student's text are escaped;
* :func:`html`: escaped, controls shown as text;
* :func:`json`: a JSON document for a terminal: those controls as JSON escapes (the same data);
* :func:`csv_cell`: a cell beginning with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
  return is a formula to a spreadsheet: it gets a leading ``'`` (OWASP's "CSV Injection"
  guidance, CWE-1236); a plain number is left a number.

Every format shows the same characters as text: C0 and C1 controls, ``DEL``, Unicode's
bidirectional overrides (which reorder what a reader sees), the non-characters ``U+FFFE``
and ``U+FFFF``, and a file name's undecodable bytes (Python's ``surrogateescape``: the
byte itself, ``\\xff``).
"""
from __future__ import annotations

import html as _html
import re

#: Unicode's bidirectional controls (they reorder the text around them: "Trojan Source")
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff" + _BIDI + "]")
#: what a spreadsheet reads as the start of a formula (and their full-width forms, which some read so too)
_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_NUMBER = re.compile(r"[+-]?\d+(?:[.,]\d+)?")
_ENTITY = re.compile(r"&(?=#?[0-9A-Za-z]+;)")
_ESCAPE = re.compile(r"\\(?=[!-/:-@\[-`{-~])")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def visible(text: object, keep: str = "") -> str:
    """``text`` with every character a format cannot carry shown as text (``\\x1b``, ``\\u202e``,
    an undecodable byte as ``\\xff``); ``keep``: the characters left as they are (``"\\n"``)."""
    text = "" if text is None else str(text)

    def show(found: re.Match) -> str:
        char = found.group()
        if char in keep:
            return char
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # a byte the file system's name held that is no UTF-8
            return f"\\x{code - 0xDC00:02x}"
        if char in _NAMED:
            return _NAMED[char]
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _UNSAFE.sub(show, text)


def decoded(text: str) -> str:
    """A name read from a file system in bytes that are no UTF-8 (``surrogateescape``), as text that shows
    those bytes (``\\xff``); any other name as it is."""
    return re.sub("[\udc80-\udcff]", lambda found: f"\\x{ord(found.group()) - 0xDC00:02x}", text)


def terminal(text: object) -> str:
    """Text for a terminal: only new lines and tabs are sent as they are."""
    return visible(text, keep="\n\t")


def xml(text: object) -> str:
    """Text for an XML document (an element's text or an attribute's value): every character XML 1.0
    forbids, and the controls a reader would act on, shown as text; the writer escapes ``<&"``."""
    return visible(text, keep="\n\t")


def html(text: object) -> str:
    """Text as HTML (quotes included), controls shown as text."""
    return _html.escape(visible(text, keep="\n\t"), quote=True)


def markdown(text: object) -> str:
    """One line of Markdown (a table cell, a list item) that shows ``text`` as written: no raw HTML or
    autolink (``<`` as ``&lt;``), no link or image (``](`` escaped), no table pipe, no code span, on one
    line. Other text stays as it reads (``a_b``, ``C:\\Users``, ``[1, 2]``)."""
    text = " ".join(visible(text, keep="\n\r").splitlines())
    text = _ESCAPE.sub(r"\\\\", text)  # a backslash that would escape what follows: itself escaped
    text = text.replace("|", "\\|").replace("`", "\\`").replace("](", "\\](")
    return _ENTITY.sub("&amp;", text).replace("<", "&lt;")


def markdown_code(text: object) -> str:
    """The body of a fenced code block: controls shown as text, and no fence to end it early."""
    return visible(text, keep="\n\t").replace("```", "``\u200b`")


def json(text: str) -> str:
    """JSON text (a report) for a terminal: every character a terminal would act on, inside its strings,
    written as a JSON escape (``\\u009b``); the same JSON, read back the same."""
    def escape(found: re.Match) -> str:  # a new line, a tab or CR is JSON's whitespace between tokens
        char = found.group()
        return char if char in "\n\t\r" else f"\\u{ord(char):04x}"

    return _UNSAFE.sub(escape, text)


def csv_cell(value: object) -> str:
    """A cell of a CSV file a spreadsheet may open: a text beginning with a formula character gets a
    leading ``'`` (a plain number, ``-2.5``, stays a number); controls but tab, CR and LF shown as
    text. The CSV writer quotes what needs quoting (commas, quotes, line ends)."""
    text = visible(value, keep="\t\r\n")
    return "'" + text if formula(text) else text


def formula(text: str) -> bool:
    """Whether a spreadsheet would read the cell ``text`` as a formula (a plain number is none)."""
    return text.startswith(_FORMULA) and not _NUMBER.fullmatch(text)


def csv_row(cells) -> list[str]:
    """Every cell of a row made safe (:func:`csv_cell`)."""
    return [csv_cell(cell) for cell in cells]


def markdown_span(text: object) -> str:
    """A Markdown code span holding ``text`` as written: fenced by more backticks than it holds in a row."""
    text = " ".join(visible(text, keep="\n").splitlines())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
