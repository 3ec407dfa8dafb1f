"""Unit tests of grader/i18n.py and of the message catalogs against the code that uses them."""
from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from grader import results
from grader import trusted  # noqa: F401
from grader.child import probe  # noqa: F401
from grader.chapter import load_chapter
from grader.i18n import Bilingual, Catalog, T, Text, default_lang, grader_catalog, placeholders

GRADER = Path(__file__).resolve().parent.parent / "grader"
CH4 = GRADER / "chapters" / "ch4"
#: the grader's catalogs, then the chapter's own sentences: its messages.toml if it has one, and
#: each exercise's [messages."key"] tables (in its folder's exercise.toml)
CATALOG_FILES = sorted((GRADER / "messages").glob("*.toml")) + sorted(CH4.glob("messages.toml")) \
    + sorted(CH4.glob("*/exercise.toml"))
SOURCES = sorted(GRADER.rglob("*.py"))


def catalog_table(path: Path) -> dict:
    """A catalog file's messages by key: a whole messages file, or an exercise's [messages] table."""
    with path.open("rb") as handle:
        table = tomllib.load(handle)
    return table.get("messages", {}) if path.name == "exercise.toml" else table


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_chapter("ch4").catalog


def _catalog_entries():
    for path in CATALOG_FILES:
        for key, langs in catalog_table(path).items():
            yield pytest.param(path.name, key, langs, id=f"{path.parent.name}/{key}")


# ------------------------------------------------------------------ catalogs
@pytest.mark.parametrize("file, key, langs", list(_catalog_entries()))
def test_catalog_entry_has_both_languages_with_same_placeholders(file, key, langs):
    assert set(langs) == {"en", "zh"}, f"{file}: {key} has languages {sorted(langs)}"
    assert langs["en"].strip() and langs["zh"].strip()
    assert placeholders(langs["en"]) == placeholders(langs["zh"]), key


def test_chinese_texts_are_chinese():
    for path in CATALOG_FILES:
        for key, langs in catalog_table(path).items():
            if placeholders(langs["zh"]) == {"detail"} and langs["zh"] == "{detail}":
                continue  # a pass-through message
            if re.search(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]", langs["zh"]):
                continue
            pytest.fail(f"{key}: zh text has no Chinese: {langs['zh']!r}")


def test_chapter_catalog_holds_grader_and_chapter_messages(catalog):
    assert "numeric.shape" in catalog.keys()
    assert "ch4.ex01.three_calls" in catalog.keys()


def test_catalog_rejects_a_message_defined_twice(tmp_path):
    extra = tmp_path / "messages.toml"
    extra.write_text('["numeric.shape"]\nen = "x"\nzh = "y"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="defined twice"):
        grader_catalog().load(extra)


def test_catalog_rejects_a_message_without_chinese(tmp_path):
    extra = tmp_path / "messages.toml"
    extra.write_text('["x.only_en"]\nen = "x"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="zh"):
        Catalog().load(extra)


# ------------------------------------------------------------------ keys used by the code
def _t_calls():
    """(file, line, first argument node, keyword names) of every T(...) call in grader/."""
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "T" and node.args:
                yield path, node.lineno, node.args[0], node.keywords


def test_regex_and_ast_find_the_same_literal_keys():
    literal = {a.value for _, _, a, _ in _t_calls() if isinstance(a, ast.Constant)}
    by_regex = set()
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        by_regex |= {key for _, key in re.findall(r"""\bT\(\s*(["'])([^"'{}]+)\1""", text)}
    assert literal == by_regex
    assert len(literal) > 40


def test_every_literal_key_exists(catalog):
    missing = sorted({f"{p.relative_to(GRADER)}:{line} {a.value}" for p, line, a, _ in _t_calls()
                      if isinstance(a, ast.Constant) and a.value not in catalog.keys()})
    assert missing == []


def test_every_literal_call_passes_the_template_placeholders(catalog):
    """A missing or misspelt argument would render as the raw template."""
    mismatched = []
    for path, line, arg, keywords in _t_calls():
        names = {k.arg for k in keywords}
        if not isinstance(arg, ast.Constant) or None in names or arg.value not in catalog.keys():
            continue
        wanted = placeholders(catalog.template(arg.value, "en"))
        if arg.value.startswith("hint."):
            wanted.discard("section")  # filled in when the check's result is made (grader.checks._placed)
        if not wanted <= names:
            mismatched.append(f"{path.relative_to(GRADER)}:{line} {arg.value}: passes {sorted(names)}, "
                              f"template uses {sorted(wanted)}")
    assert mismatched == []


def test_every_chapter_key_named_in_checks_exists(catalog):
    source = "\n".join(p.read_text(encoding="utf-8") for p in sorted((GRADER / "chapters" / "ch4").rglob("*.py")))
    keys = set(re.findall(r'"(ch4\.[a-z0-9_]+\.[a-z0-9_]+)"', source))
    assert len(keys) >= 10
    assert sorted(keys - catalog.keys()) == []


def test_every_key_like_string_in_the_code_exists(catalog):
    """Keys passed around in variables (T(key), T(what_key)) are caught here as plain string constants."""
    namespaces = sorted({key.split(".")[0] for key in catalog.keys()})
    key_like = re.compile(r"^(%s)(\.[a-z0-9_]+)+$" % "|".join(namespaces))
    check_ids = {c.id for ex in load_chapter("ch4").exercises for c in ex.checks}
    found, missing = set(), []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and key_like.match(node.value):
                if node.value in check_ids:
                    continue
                found.add(node.value)
                if node.value not in catalog.keys():
                    missing.append(f"{path.relative_to(GRADER)}:{node.lineno} {node.value}")
    assert {"structure.jitted", "structure.not_jitted", "ch4.ex02.branches"} <= found
    assert missing == []


def _code(folder: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*.py")))


@pytest.mark.parametrize("exercise", sorted(p.parent.name for p in CH4.glob("*/exercise.toml")))
def test_an_exercises_messages_are_its_own(exercise):
    """Each exercise's sentences live in its folder: every message of its exercise.toml is used by
    its own code, and every chapter key its code names (``ch4.exNN.*``) is defined there."""
    folder = CH4 / exercise
    defined, code = set(catalog_table(folder / "exercise.toml")), _code(folder)
    assert sorted(k for k in defined if f'"{k}"' not in code) == []
    named = set(re.findall(r'"(ch4\.[a-z0-9_]+\.[a-z0-9_.]+)"', code))
    assert sorted(named - defined) == []


def test_the_chapters_shared_messages_are_shared():
    """A message of the chapter's messages.toml (if it has one) serves several exercises, or the
    chapter's shared modules; one exercise's sentence belongs in that exercise's folder."""
    shared = CH4 / "messages.toml"
    if not shared.exists():
        return
    users = {p.parent.name: _code(p.parent) for p in CH4.glob("*/exercise.toml")}
    common = "\n".join(p.read_text(encoding="utf-8") for p in CH4.glob("*.py"))
    lonely = [k for k in catalog_table(shared) if f'"{k}"' not in common
              and sum(f'"{k}"' in code for code in users.values()) < 2]
    assert lonely == []


def test_the_graders_catalogs_hold_no_exercises_words():
    """grader/messages/ is the grader's own: a key that only one exercise's code uses belongs
    in that exercise's folder (the check's path is then one folder)."""
    grader_code = "\n".join(p.read_text(encoding="utf-8") for p in SOURCES if CH4 not in p.parents)
    tests_code = "\n".join(p.read_text(encoding="utf-8") for p in Path(__file__).parent.glob("*.py"))
    exercises = {p.parent.name: _code(p.parent) for p in CH4.glob("*/__init__.py")}
    only_one = []
    for path in sorted((GRADER / "messages").glob("*.toml")):
        for key in catalog_table(path):
            users = [name for name, code in exercises.items() if f'"{key}"' in code]
            family = f'f"{key.rsplit(".", 1)[0]}.{{'  # a key the grader computes: T(f"structure.trace.{kind}")
            if len(users) == 1 and f'"{key}"' not in grader_code and family not in grader_code \
                    and f'"{key}"' not in tests_code:
                only_one.append(f"{path.name}: {key} (only {users[0]} uses it)")
    allowed = {"core.toml: purity.input_mutated (only ex01_jit_forms uses it)",  # the purity family's sentence
               "core.toml: speedup.passed (only ex06_speedup uses it)",  # beside speedup.below, timing's
               "release.toml: release.speedup_passed (only ex06_speedup uses it)"}  # the release's own
    assert sorted(set(only_one) - allowed) == []


def test_f_string_keys_have_their_expansions():
    """The f-string keys in the code are the three families checked below."""
    prefixes = set()
    for _, _, arg, _ in _t_calls():
        if isinstance(arg, ast.JoinedStr):
            head = arg.values[0]
            assert isinstance(head, ast.Constant), ast.unparse(arg)
            prefixes.add(head.value)
    # a new family of computed keys needs its own expansion test below
    assert prefixes == {"ui.status.", "structure.trace.", "hint.exception.", "ui.live.", "compile.why.",
                        "batch.layout.", "batch.row.unmatched."}


def test_every_layout_of_a_download_has_its_words(catalog):
    from grader.batch.layouts import LAYOUTS

    assert sorted(f"batch.layout.{layout}.{part}" for layout in LAYOUTS for part in ("name", "example")
                  if f"batch.layout.{layout}.{part}" not in catalog.keys()) == []
    assert sorted(f"batch.row.unmatched.{layout}" for layout in LAYOUTS if layout != "folders"
                  if f"batch.row.unmatched.{layout}" not in catalog.keys()) == []


def test_every_reason_to_compile_again_has_its_words(catalog):
    assert sorted(k for k in ("dtype", "shape", "weak_type") if f"compile.why.{k}" not in catalog.keys()) == []


def test_every_kind_of_error_has_its_hint(catalog):
    from grader.trusted import ERROR_KINDS

    kinds = {kind for _, kind in ERROR_KINDS} | {"static_needed"}
    assert sorted(k for k in kinds if f"hint.exception.{k}" not in catalog.keys()) == []


def test_every_job_phase_has_its_words(catalog):
    from grader.runner.job_sessions import PHASES

    assert sorted(p for p in PHASES if p != "ended" and f"ui.live.{p}" not in catalog.keys()) == []


def test_status_words_exist_for_every_status(catalog):
    for status in set(results.CHECK_STATUSES) | set(results.EXERCISE_STATUSES):
        assert f"ui.status.{status}" in catalog.keys()


def test_structure_trace_keys_exist_for_every_traced_error_kind(catalog):
    source = (GRADER / "primitives" / "structure.py").read_text(encoding="utf-8")
    named = re.search(r'if kind in \(([^)]*)\):\s*\n\s*raise Fail\(T\(f"structure\.trace', source)
    assert named, "the list of kinds before T(f'structure.trace.{kind}') moved"
    kinds = set(re.findall(r'"(\w+)"', named.group(1)))
    assert kinds <= {kind for _, kind in trusted.ERROR_KINDS}
    for kind in kinds | {"other"}:
        assert f"structure.trace.{kind}" in catalog.keys()


def test_call_raised_keys_exist_for_every_error_kind(catalog):
    kinds = {kind for _, kind in trusted.ERROR_KINDS} | {"static_needed"}
    for kind in kinds:
        assert f"call.raised.{kind}" in catalog.keys()
    assert placeholders(catalog.template("call.raised", "en")) == {"function", "type", "message", "where"}


def test_raised_text_key_exists_for_every_classification(catalog):
    from grader.checks import raised_text

    for kind in [None, "static_needed"] + [k for _, k in trusted.ERROR_KINDS]:
        text = raised_text({"function": "f", "type": "E", "message": "m", "where": "a.py:1", "kind_of_error": kind})
        assert text.key in catalog.keys()
        assert "[" + text.key + "]" not in catalog.render(text, "en")


# ------------------------------------------------------------------ rendering
def test_render_text_in_both_languages(catalog):
    text = T("numeric.shape", what="softmax(x)", expected="(3,)", got="(4,)")
    assert catalog.render(text, "en") == "softmax(x): expected shape (3,), got (4,)"
    assert catalog.render(text, "zh") == "softmax(x)：期望形状 (3,)，实际为 (4,)"


def test_a_field_named_key_is_a_field(catalog):
    """ex08's count_primitives names the count that is not an integer by a field ``key``: T's own key is
    positional-only (before, T("...", key=...) raised TypeError inside the check; mypy found it)."""
    text = T("ch4.ex08.not_int", what="count_primitives(f)", key="sin")
    assert catalog.render(text, "en") == "count_primitives(f): the count for 'sin' is not an integer"


def test_render_nested_text_bilingual_and_lists(catalog):
    title = Bilingual(en="piecewise values", zh="piecewise 的数值")
    text = T("check.skipped", depends=[title, Bilingual(en="jitted", zh="已编译")])
    assert catalog.render(text, "en") == "skipped: it needs “piecewise values; jitted” to pass first"
    assert "piecewise 的数值；已编译" in catalog.render(text, "zh")
    inner = T("ch4.ex01.three_calls", name="softmax")
    outer = T("compile.exactly", what=inner, expected=1, seen=3, names="softmax ×3", reason="")
    assert catalog.render(outer, "en").startswith("three calls of softmax on new values of one shape: expected 1")
    assert catalog.render(outer, "zh").startswith("对同一形状的新数值调用 softmax 三次")


def test_render_plain_values(catalog):
    assert catalog.render(None, "en") == ""
    assert catalog.render("as is", "zh") == "as is"
    assert catalog.render(Bilingual(en="hello", zh="你好"), "zh") == "你好"
    assert catalog.render([T("check.passed"), T("check.passed")], "zh") == "通过；通过"


def test_render_unknown_key_falls_back_to_key_and_args(catalog):
    words = catalog.render(T("no.such.key", a=1, b="x"), "en")
    assert words == "[no.such.key] a=1, b=x"


def test_render_with_missing_argument_does_not_raise(catalog):
    words = catalog.render(T("numeric.shape", what="f(x)"), "en")
    assert "{expected}" in words and "f(x)" in words


def test_render_with_unformattable_argument_does_not_raise(catalog):
    words = catalog.render(T("job.timeout", seconds="not a number"), "en")
    assert "not a number" in words


def test_text_repr_names_key_and_args():
    assert repr(T("a.b", x=1)) == "T('a.b', {'x': 1})"
    assert isinstance(T("a.b"), Text) and T("a.b").args == {}


def test_placeholders():
    assert placeholders("{what}: {n:g} of {total} ({name!r})") == {"what", "n", "total", "name"}
    assert placeholders("no fields, {{escaped}}") == set()


# ------------------------------------------------------------------ default language
@pytest.mark.parametrize("environ, lang", [
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LANG": "zh_TW.UTF-8"}, "zh"),
    ({"LANG": "en_US.UTF-8"}, "en"),
    ({"LANG": "C"}, "en"),
    ({}, "en"),
    ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),
    ({"LC_ALL": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
    ({"LC_ALL": "", "LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
    ({"LANGUAGE": "zh_CN:en"}, "zh"),
])
def test_default_lang(environ, lang):
    assert default_lang(environ) == lang


def test_default_lang_reads_os_environ(monkeypatch):
    for var in ("LC_ALL", "LC_MESSAGES", "LANGUAGE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert default_lang() == "zh"
    monkeypatch.setenv("LC_ALL", "en_GB.UTF-8")
    assert default_lang() == "en"
