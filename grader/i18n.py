"""Student-facing text in English and Chinese.

Checks never build sentences: they return :class:`Text` (a message key and its
arguments), and a renderer turns it into words in the report's language at the end.
Messages live in TOML catalogs, one table per key with both languages side by side::

    ["numeric.shape"]
    en = "{what}: expected shape {expected}, got {got}"
    zh = "{what}：期望形状 {expected}，实际为 {got}"

The grader's own catalog is every file of ``grader/messages/`` (``core.toml``, and one
per capability, e.g. ``batch.toml``); a chapter adds each exercise's messages (the
``[messages."key"]`` tables of its ``exercise.toml``, same form) and, when several of its
exercises share some, its ``messages.toml`` beside its ``chapter.toml``. A key defined
twice is an error.
"""
from __future__ import annotations

import hashlib
import json
import os
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from grader import store

LANGS = ("en", "zh")


@dataclass(frozen=True)
class Text:
    """A message to be put into words later: a catalog key and its arguments."""

    #: the message key in a catalog (``numeric.shape``)
    key: str
    #: the template's fields; a value may itself be a Text, a Bilingual or a list of them
    args: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:  # shows up in test failures
        return f"T({self.key!r}, {dict(self.args)!r})"


class TextError(Exception):
    """An error whose ``text`` says, in the user's words (either language), what is wrong."""

    def __init__(self, text: Text):
        super().__init__(text.key)
        self.text = text


def T(key: str, /, **args: Any) -> Text:
    """The message ``key`` with its fields (positional-only: a field may itself be named ``key``)."""
    return Text(key, args)


@dataclass(frozen=True)
class Bilingual:
    """Text already written in both languages (titles and hints from a chapter file)."""

    #: the English text
    en: str
    #: the Chinese text
    zh: str

    def __getitem__(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


#: what :meth:`Catalog.render` puts into words: a message, text in both languages, a plain string, a
#: list of them (one sentence each), or nothing
Words = Text | Bilingual | str | list | None


class Catalog:
    """Message templates by key and language."""

    def __init__(self) -> None:
        self._messages: dict[str, dict[str, str]] = {}
        self._where: dict[str, Path] = {}

    def load(self, path: Path) -> "Catalog":
        """Add the messages of a catalog file (one table per key)."""
        return self.add(read_toml(path), path)

    def add(self, table: Mapping[str, Mapping[str, str]], path: Path) -> "Catalog":
        """Add messages by key (``{"en": ..., "zh": ...}`` each), read from the file ``path``."""
        for key, langs in table.items():
            missing = [lang for lang in LANGS if lang not in langs]
            if missing:
                raise ValueError(f"{path}: message {key!r} has no {', '.join(missing)} text")
            if key in self._messages:
                raise ValueError(f"{path}: message {key!r} is defined twice (also in {self._where[key]})")
            self._messages[key] = {lang: langs[lang] for lang in LANGS}
            self._where[key] = Path(path)
        return self

    def with_words_of(self, replaced: Mapping[str, str]) -> "Catalog":
        """A copy whose messages ``key`` read as those of ``replaced[key]`` (watch mode's "save the file"
        where a single grading says "run grade again")."""
        copy = Catalog()
        copy._messages, copy._where = dict(self._messages), dict(self._where)
        for key, other in replaced.items():
            copy._messages[key], copy._where[key] = self._messages[other], self._where[other]
        return copy

    def where(self, key: str) -> Path:
        """The file that defines message ``key``."""
        return self._where[key]

    def keys(self) -> set[str]:
        return set(self._messages)

    def template(self, key: str, lang: str) -> str:
        return self._messages[key][lang]

    def render(self, text: Words, lang: str) -> str:
        """Words for ``text`` (a Text, a Bilingual, a plain string or None)."""
        if text is None:
            return ""
        if isinstance(text, Bilingual):
            return text[lang]
        if isinstance(text, list):
            return ("；" if lang == "zh" else "; ").join(self.render(t, lang) for t in text)
        if not isinstance(text, Text):
            return str(text)
        try:
            template = self._messages[text.key][lang]
        except KeyError:
            return f"[{text.key}] " + ", ".join(f"{k}={v}" for k, v in text.args.items())
        args = {k: self._arg(v, lang) for k, v in text.args.items()}
        try:
            return template.format(**args)
        except (KeyError, ValueError, IndexError, TypeError):
            return f"{template} ({args})"

    def _arg(self, value: Any, lang: str) -> Any:
        if isinstance(value, (Text, Bilingual, list)):
            return self.render(value, lang)
        return value


def placeholders(template: str) -> set[str]:
    """The names a template uses, for the catalog's consistency test."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def default_lang(environ: Mapping[str, str] | None = None) -> str:
    """The report language from the locale: Chinese when it says so, else English."""
    environ = os.environ if environ is None else environ
    for var in ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        value = environ.get(var, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


GRADER_MESSAGES = Path(__file__).with_name("messages")


def grader_catalog() -> Catalog:
    catalog = Catalog()
    for path in sorted(GRADER_MESSAGES.glob("*.toml")):
        catalog.load(path)
    return catalog


# ------------------------------------------------------------------ TOML files, parsed once
_tables: dict[str, dict] = {}


def read_toml(path: Path) -> dict:
    """A TOML file's table, parsed once per content of the file.

    The chapter's and the grader's TOML files (messages and hints in two languages) are
    parsed by every command, and parsing them takes longer than anything else it does
    before the grading starts. Each file's table is kept in this process and, as JSON, in
    the cache folder, under a digest of the file's bytes. Raises what ``tomllib`` raises
    for a malformed file.
    """
    import tomllib

    data = Path(path).read_bytes()
    seen = hashlib.sha256(data).hexdigest()
    if seen in _tables:
        return _tables[seen]
    name = seen[:40] + ".json"
    folder = store.make_folder(store.root() / "toml", mode=0o700)
    table = None
    if folder is not None:
        try:
            table = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            table = None
    if not isinstance(table, dict):
        table = tomllib.loads(data.decode("utf-8"))
        if folder is not None:
            try:
                tmp = folder / f".{name}.{os.getpid()}.tmp"
                tmp.write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
                os.replace(tmp, folder / name)
            except (OSError, TypeError, ValueError):  # a date in the file, a full disk: parsed each time
                pass
    _tables[seen] = table
    return table
