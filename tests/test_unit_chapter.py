"""Unit tests of grader/chapter.py and of chapter 4's metadata, registry and hidden inputs."""
from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from grader.chapter import ChapterError, UnknownExercise, available_chapters, load_chapter
from grader.i18n import Bilingual
from grader.results import CATEGORIES


@pytest.fixture(scope="module")
def ch4():
    return load_chapter("ch4")


EXERCISE_IDS = [ex.id for ex in load_chapter("ch4").exercises]


# ------------------------------------------------------------------ ch4 metadata
def test_ch4_is_available_and_loads(ch4):
    assert "ch4" in available_chapters()
    assert ch4.id == "ch4"
    assert isinstance(ch4.title, Bilingual) and ch4.title.zh != ch4.title.en
    assert ch4.solutions.is_dir() and ch4.stubs.is_dir()
    assert len(ch4.exercises) >= 4


def test_ch4_exercise_ids_are_unique_and_have_files(ch4):
    ids = [ex.id for ex in ch4.exercises]
    assert len(set(ids)) == len(ids)
    for ex in ch4.exercises:
        assert (ch4.solutions / ex.filename).is_file(), ex.filename
        assert (ch4.stubs / ex.filename).is_file(), ex.filename
        assert ex.functions, ex.id
        assert ex.section in ch4.sections
        assert ex.timeout_s > 0


def test_ch4_checks_are_well_formed(ch4):
    for ex in ch4.exercises:
        ids = [c.id for c in ex.checks]
        assert ids, ex.id
        assert len(set(ids)) == len(ids), ex.id
        for position, check in enumerate(ex.checks):
            assert check.points > 0, f"{ex.id}/{check.id}"
            assert check.category in CATEGORIES
            assert check.title.en and check.title.zh and check.hint.en and check.hint.zh
            for dep in check.depends:
                assert dep in ids[:position], f"{ex.id}/{check.id} depends on {dep}"
        assert ex.max_score == pytest.approx(sum(c.points for c in ex.checks))


def test_every_check_has_a_function_and_every_function_a_check(ch4):
    from grader.checks import declared_checks

    for ex in ch4.exercises:
        assert all(callable(c.function) for c in ex.checks), ex.id
        assert set(declared_checks(ex.package)) == {c.id for c in ex.checks}, ex.id
        assert ex.package.__file__ == str(ch4.folder / ex.id / "__init__.py")


def test_each_exercise_module_holds_its_inputs_probe_and_checks(ch4):
    for ex in ch4.exercises:
        assert callable(ex.package.inputs) and callable(ex.package.probe), ex.id
        assert hasattr(ex.package, "KEYS"), f"{ex.id}: its record keys are declared once, in KEYS"
    assert [ex.id for ex in ch4.exercises if ex.driver] == ["ex06_speedup"]


# ------------------------------------------------------------------ hidden inputs
def _flatten(value, path=""):
    """(path, leaf) pairs of nested inputs."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flatten(v, f"{path}/{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _flatten(v, f"{path}/{i}")
    else:
        yield path, value


def _same(a, b) -> bool:
    fa, fb = list(_flatten(a)), list(_flatten(b))
    if [p for p, _ in fa] != [p for p, _ in fb]:
        return False
    for (_, x), (_, y) in zip(fa, fb):
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.dtype == y.dtype
                    and x.shape == y.shape and np.array_equal(x, y)):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def _has_arrays(value) -> bool:
    return any(isinstance(leaf, np.ndarray) for _, leaf in _flatten(value))


def inputs(exercise: str, seed: int) -> dict:
    return load_chapter("ch4").exercise(exercise).inputs(seed)


@pytest.mark.parametrize("exercise", EXERCISE_IDS)
def test_inputs_exist_for_every_exercise(ch4, exercise):
    assert isinstance(inputs(exercise, 1234), dict)


@pytest.mark.parametrize("exercise", EXERCISE_IDS)
def test_inputs_are_deterministic_for_a_seed(ch4, exercise):
    assert _same(inputs(exercise, 7), inputs(exercise, 7))


def test_same_helper_sees_a_one_element_change():
    a = {"x": [np.arange(3.0), 1.5]}
    b = {"x": [np.array([0.0, 1.0, 2.5]), 1.5]}
    assert _same(a, a) and not _same(a, b)
    assert not _same({"x": np.zeros(2, np.float32)}, {"x": np.zeros(2, np.float64)})


@pytest.mark.parametrize("exercise", EXERCISE_IDS)
def test_inputs_differ_between_seeds(ch4, exercise):
    first = inputs(exercise, 7)
    if not _has_arrays(first):
        pytest.skip(f"{exercise} draws no arrays")
    assert not _same(first, inputs(exercise, 8))


def test_the_first_four_exercises_draw_arrays(ch4):
    for exercise in EXERCISE_IDS[:4]:
        assert _has_arrays(inputs(exercise, 7)), exercise


def test_inputs_differ_between_exercises_with_one_seed(ch4):
    """Each exercise has its own stream: ex01's arrays are not ex02's."""
    a = [v for _, v in _flatten(inputs("ex01_jit_forms", 5)) if isinstance(v, np.ndarray)]
    b = [v for _, v in _flatten(inputs("ex02_where", 5)) if isinstance(v, np.ndarray)]
    assert not any(x.shape == y.shape and np.array_equal(x, y) for x in a for y in b if x.size > 1)


@pytest.mark.parametrize("exercise", EXERCISE_IDS)
def test_inputs_hold_only_plain_data(ch4, exercise):
    for path, leaf in _flatten(inputs(exercise, 3)):
        assert leaf is None or isinstance(leaf, (np.ndarray, bool, int, float, str)), path


def test_inputs_unknown_exercise_raises(ch4):
    with pytest.raises(KeyError):
        inputs("ex99_nothing", 1)


# ------------------------------------------------------------------ select
@pytest.mark.parametrize("wanted", ["ex03_static_args", "ex03", "3", "03", " 3 "])
def test_select_accepts_full_id_prefix_and_number(ch4, wanted):
    assert [ex.id for ex in ch4.select([wanted])] == ["ex03_static_args"]


def test_select_nothing_means_everything(ch4):
    assert ch4.select([]) == list(ch4.exercises)


def test_select_keeps_chapter_order_and_drops_repeats(ch4):
    assert [ex.id for ex in ch4.select(["3", "1", "ex03"])] == ["ex01_jit_forms", "ex03_static_args"]


@pytest.mark.parametrize("wanted", ["99", "ex99", "ex3", "static", "ex0", "", "-1"])
def test_select_unknown_raises(ch4, wanted):
    with pytest.raises(UnknownExercise) as info:
        ch4.select([wanted])
    assert info.value.item == wanted
    assert info.value.chapter == "ch4"
    assert "ex01_jit_forms" in info.value.known
    assert isinstance(info.value, ChapterError)


def test_exercise_lookup(ch4):
    assert ch4.exercise("ex02_where").functions[0] == "piecewise"
    with pytest.raises(KeyError):
        ch4.exercise("ex02")


def test_unknown_chapter():
    with pytest.raises(ChapterError, match="ch99"):
        load_chapter("ch99")


# ------------------------------------------------------------------ malformed chapter files
CHECK = """
[[checks]]
id = "{cid}"
category = "{category}"
points = {points}
title = {{ en = "t", zh = "{title_zh}" }}
hint = {{ en = "h", zh = "提示" }}
"""


def chapter_toml(*, exercises='["ex01_a"]', toml_tail=""):
    """The chapter's own file: its id, title, paths, sections and the order of its exercises."""
    return f"""
id = "chx"
title = {{ en = "Chapter X", zh = "第 X 章" }}
solutions = "../solutions/chx"
stubs = "../exercises/chx"
exercises = {exercises}

[sections]
1 = {{ en = "section 1", zh = "第一节" }}
{toml_tail}
"""


def exercise_toml(*, title_zh="题", section="1", category="numeric", points="1", second=None, toml_tail=""):
    """An exercise's words (ex01_a/exercise.toml): its entry, its checks, and ``toml_tail``."""
    checks = CHECK.format(cid="f.values", category=category, points=points, title_zh=title_zh)
    if second is not None:
        checks += CHECK.format(cid=second, category="numeric", points="1", title_zh="二")
    return f"""
title = {{ en = "A", zh = "甲" }}
section = "{section}"
functions = ["f"]
{checks}
{toml_tail}
"""


def exercise_module(*checks: tuple[str, tuple]) -> str:
    """An exercise package declaring ``checks`` ((id, depends) pairs)."""
    out = ["from grader.checks import Keys, check", "", "KEYS = Keys(value=\"f/values\")", "",
           "def inputs(rng):", "    return {}", "", "def probe(ctx):", "    pass", ""]
    for i, (cid, depends) in enumerate(checks):
        out += [f"@check({cid!r}, depends={tuple(depends)!r})", f"def check_{i}(s, r, ctx):", "    return {}", ""]
    return "\n".join(out)


def forget_chx():
    import sys

    for name in [n for n in sys.modules if n.startswith("grader.chapters.chx")]:
        del sys.modules[name]  # every test writes its own chx


@pytest.fixture
def write_chapter(tmp_path, monkeypatch):
    """Write chapter chx (its chapter.toml and exercise ex01_a's folder) into a course folder and load it."""
    import grader.chapters

    monkeypatch.setenv("GRADER_CHAPTERS", str(tmp_path))

    def write(words: str | None = None, module: str | None = None, chapter: str | None = None):
        forget_chx()
        folder = tmp_path / "chx"
        (folder / "ex01_a").mkdir(parents=True, exist_ok=True)
        (folder / "chapter.toml").write_text(chapter or chapter_toml(), encoding="utf-8")
        (folder / "ex01_a" / "exercise.toml").write_text(words or exercise_toml(second="f.more"), encoding="utf-8")
        (folder / "ex01_a" / "__init__.py").write_text(
            module or exercise_module(("f.values", ()), ("f.more", ("f.values",))), encoding="utf-8")
        return load_chapter("chx")

    yield write
    forget_chx()
    if str(tmp_path) in grader.chapters.__path__:
        grader.chapters.__path__.remove(str(tmp_path))


def test_minimal_chapter_loads(write_chapter):
    chapter = write_chapter()
    assert [c.id for c in chapter.exercises[0].checks] == ["f.values", "f.more"]
    assert chapter.exercises[0].checks[1].depends == ("f.values",)
    assert chapter.exercises[0].title == Bilingual("A", "甲")
    assert chapter.exercises[0].timeout_s == 60.0
    assert chapter.exercises[0].folder == chapter.folder / "ex01_a"
    assert chapter.solutions == (chapter.folder / "../solutions/chx").resolve()


def test_a_chapter_read_before_is_read_again_only_where_its_words_or_modules_changed(write_chapter, tmp_path):
    """A grading asks for its chapter several times and a batch's worker for every student: the chapter this
    process read is given again while its TOML files and its imported packages are the same; a changed word
    (an exercise's title, the same length: the content is compared, not the size or the time) or a package
    Python forgot reads it anew, and a file that no longer reads is the author's error again."""
    chapter = write_chapter()
    assert load_chapter("chx") is chapter
    words = tmp_path / "chx" / "ex01_a" / "exercise.toml"
    words.write_text(words.read_text(encoding="utf-8").replace('en = "A"', 'en = "B"'), encoding="utf-8")
    changed = load_chapter("chx")
    assert changed is not chapter and changed.exercises[0].title == Bilingual("B", "甲")
    assert load_chapter("chx") is changed
    forget_chx()  # Python imports the exercise's package again, and the chapter is read with it
    again = load_chapter("chx")
    assert again is not changed and again.exercises[0].package is not changed.exercises[0].package
    words.write_text(exercise_toml(category="speed", second="f.more"), encoding="utf-8")
    with pytest.raises(ChapterError, match=r"f\.values has category 'speed'"):
        load_chapter("chx")


def test_missing_chinese_text_is_named(write_chapter):
    text = exercise_toml(second="f.more").replace('title = { en = "t", zh = "题" }', 'title = { en = "t" }')
    with pytest.raises(ChapterError, match=r"ex01_a/exercise\.toml: exercise ex01_a: check f\.values title needs "
                                           r"both an 'en' and a 'zh'"):
        write_chapter(text)


def test_unknown_category_is_named(write_chapter):
    with pytest.raises(ChapterError, match=r"f\.values has category 'speed'"):
        write_chapter(exercise_toml(category="speed", second="f.more"))


@pytest.mark.parametrize("points", ["0", "-1"])
def test_non_positive_points_are_refused(write_chapter, points):
    with pytest.raises(ChapterError, match="positive points"):
        write_chapter(exercise_toml(points=points, second="f.more"))


def test_unknown_section_is_named(write_chapter):
    with pytest.raises(ChapterError, match=r"ex01_a/exercise\.toml: exercise ex01_a: section '9' is not among the "
                                           r"chapter's sections \(chapter\.toml's \[sections\]: 1\)"):
        write_chapter(exercise_toml(section="9", second="f.more"))


def test_duplicate_check_ids_are_refused(write_chapter):
    with pytest.raises(ChapterError, match="share an id"):
        write_chapter(exercise_toml(second="f.values"), exercise_module(("f.values", ())))


@pytest.mark.parametrize("depends", [("f.later",), ("f.more",), ("nothing",)])
def test_dependency_must_be_an_earlier_check(write_chapter, depends):
    with pytest.raises(ChapterError, match="must be an earlier check"):
        write_chapter(module=exercise_module(("f.values", ()), ("f.more", depends)))


def test_a_check_in_the_file_but_not_the_module_names_the_fix(write_chapter):
    with pytest.raises(ChapterError, match=r"check 'f\.more' of ex01_a is in .*ex01_a/exercise\.toml but not "
                                           r"declared: add @check\(\"f\.more\"\) to its function in "
                                           r".*ex01_a/__init__\.py"):
        write_chapter(module=exercise_module(("f.values", ())))


def test_a_check_in_the_module_but_not_the_file_names_the_fix(write_chapter):
    with pytest.raises(ChapterError, match=r"check 'f\.more' is declared in .*ex01_a/__init__\.py but "
                                           r".*ex01_a/exercise\.toml has no entry for it: add a \[\[checks\]\] table"):
        write_chapter(exercise_toml())


def test_depends_in_the_file_points_to_the_function(write_chapter):
    text = exercise_toml(second="f.more").replace('hint = { en = "h", zh = "提示" }\n',
                                                  'hint = { en = "h", zh = "提示" }\ndepends = ["f.values"]\n', 1)
    with pytest.raises(ChapterError, match=r"it sits on the function: @check\(\"f\.values\", depends="):
        write_chapter(text)


def test_an_exercise_without_its_code_is_named(write_chapter, tmp_path):
    write_chapter()
    (tmp_path / "chx" / "ex01_a" / "__init__.py").unlink()
    forget_chx()
    with pytest.raises(ChapterError, match=r"ex01_a/__init__\.py is missing: an exercise's folder holds its code"):
        load_chapter("chx")


# ------------------------------------------------------------------ the exercise package's contract
def _module(replace: str = "", by: str = "", tail: str = "") -> str:
    """The minimal exercise package with one piece of it replaced, and ``tail`` added."""
    text = exercise_module(("f.values", ()), ("f.more", ("f.values",)))
    assert replace in text
    return text.replace(replace, by) + tail


@pytest.mark.parametrize("replace, by, wrong, fix", [
    ("def inputs(rng):\n    return {}", "", r"defines no inputs\(\)", r"add def inputs\(rng: np\.random\.Generator\) "
     r"-> Inputs"),
    ("def probe(ctx):\n    pass", "", r"defines no probe\(\)", r"add def probe\(ctx: ProbeContext\[Inputs\]\) -> None"),
    ("def inputs(rng):", "def inputs():", r"inputs\(\) does not take 1 argument \(rng\)",
     r"define def inputs\(rng: np\.random\.Generator\)"),
    ("def inputs(rng):", "def inputs(rng, seed):", r"inputs\(rng, seed\) does not take 1 argument \(rng\)",
     r"define def inputs\(rng"),
    ("def probe(ctx):", "def probe(ctx, module):", r"probe\(ctx, module\) does not take 1 argument \(ctx\)",
     r"define def probe\(ctx: ProbeContext\[Inputs\]\) -> None"),
    ("def probe(ctx):", "def probe():", r"probe\(\) does not take 1 argument \(ctx\)", r"define def probe\(ctx"),
    ("def inputs(rng):\n    return {}", "inputs = {}", r"has inputs = dict, not a function", r"define def inputs\(rng"),
    ("KEYS = Keys(value=\"f/values\")", "", r"defines no KEYS", r"declare its record keys, KEYS = Keys\("),
])
def test_an_exercise_package_off_its_contract_names_the_file_the_fault_and_the_fix(write_chapter, replace, by, wrong,
                                                                                   fix):
    """A package without ``inputs`` or ``probe`` (or ``KEYS``), or with one taking other arguments, is refused when
    the chapter is read, in one line: the file, what is wrong, the fix (``grader.exercise_package``)."""
    with pytest.raises(ChapterError) as info:
        write_chapter(module=_module(replace, by))
    message = str(info.value)
    assert "\n" not in message
    assert re.search(rf"^\S*chx/ex01_a/__init__\.py {wrong}: {fix}", message), message


@pytest.mark.parametrize("tail, wrong", [
    ("\ndef regimes(inp, seed):\n    return {}\n", r"regimes\(inp, seed\) does not take 1 argument \(inp\)"),
    ("\ndef drive(sides, inputs):\n    return None, None\n",
     r"drive\(sides, inputs\) does not take 3 arguments \(sides, inputs, budget\)"),
])
def test_an_optional_function_of_the_contract_is_held_to_its_arguments(write_chapter, tail, wrong):
    with pytest.raises(ChapterError, match=rf"ex01_a/__init__\.py {wrong}: define def "):
        write_chapter(module=_module(tail=tail))


def test_a_timed_exercise_without_its_driver_is_named(write_chapter):
    words = exercise_toml(second="f.more").replace('functions = ["f"]', 'functions = ["f"]\ntimed = true')
    with pytest.raises(ChapterError, match=r"ex01_a/__init__\.py defines no drive\(\) \(its exercise\.toml says timed "
                                           r"= true\): add def drive\(sides: Sides, inputs: Inputs, budget: float\)"):
        write_chapter(words)
    driven = _module(tail="\ndef drive(sides, inputs, budget):\n    return None, None\n")
    assert write_chapter(words, module=driven).exercises[0].driver is not None


def test_an_exercise_package_with_extra_defaults_keeps_its_contract(write_chapter):
    """What can be called as the contract calls it passes: an argument with a default, ``*args``."""
    module = _module("def inputs(rng):", "def inputs(rng, scale=1.0):").replace("def probe(ctx):", "def probe(*args):")
    assert write_chapter(module=module).exercises[0].package.inputs(None) == {}


@pytest.fixture
def ch4_copy(tmp_path, monkeypatch):
    """A copy of chapter 4 under another id (chy), in a course folder of its own: break one of its packages."""
    import shutil

    import grader.chapters

    source = load_chapter("ch4").folder
    shutil.copytree(source, tmp_path / "chy", ignore=shutil.ignore_patterns("__pycache__"))
    toml = tmp_path / "chy" / "chapter.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('id = "ch4"', 'id = "chy"'), encoding="utf-8")
    monkeypatch.setenv("GRADER_CHAPTERS", str(tmp_path))
    yield tmp_path / "chy"
    for name in [n for n in sys.modules if n.startswith("grader.chapters.chy")]:
        del sys.modules[name]
    if str(tmp_path) in grader.chapters.__path__:
        grader.chapters.__path__.remove(str(tmp_path))


def test_a_copy_of_ch4_loads_and_a_probe_of_two_arguments_in_it_is_named(ch4_copy):
    """The real exercises satisfy the contract (a copy of ch4 loads); ex03's probe given a second argument in the
    copy is refused, naming the copy's file."""
    assert [ex.id for ex in load_chapter("chy").exercises] == EXERCISE_IDS
    for name in [n for n in sys.modules if n.startswith("grader.chapters.chy")]:
        del sys.modules[name]
    code = ch4_copy / "ex03_static_args" / "__init__.py"
    text = code.read_text(encoding="utf-8")
    assert text.count("\ndef probe(ctx") == 1
    code.write_text(re.sub(r"\ndef probe\(ctx([^)]*)\)", r"\ndef probe(ctx\1, seed)", text), encoding="utf-8")
    with pytest.raises(ChapterError, match=rf"^{re.escape(str(code))} probe\(ctx.*, seed\) does not take 1 argument "
                                           r"\(ctx\): define def probe\(ctx: ProbeContext\[Inputs\]\) -> None"):
        load_chapter("chy")


def test_a_listed_exercise_without_its_folder_is_named(write_chapter):
    with pytest.raises(ChapterError, match=r"chapter\.toml lists exercise 'ex02_b', but .*ex02_b/exercise\.toml is "
                                           r"missing: copy another exercise's folder under this name"):
        write_chapter(chapter=chapter_toml(exercises='["ex01_a", "ex02_b"]'))


def test_an_exercise_folder_the_chapter_does_not_list_is_named(write_chapter):
    with pytest.raises(ChapterError, match=r"ex01_a/exercise\.toml is an exercise that .*chapter\.toml does not "
                                           r"list: add \"ex01_a\" to its exercises"):
        write_chapter(chapter=chapter_toml(exercises="[]"))


def test_a_flat_exercise_module_says_how_to_move_it(write_chapter, tmp_path):
    """A chapter of the layout before exercise folders: the error says what to move where."""
    write_chapter()
    folder = tmp_path / "chx"
    (folder / "ex01_a" / "__init__.py").rename(folder / "ex01_a.py")
    (folder / "ex01_a" / "exercise.toml").unlink()
    forget_chx()
    with pytest.raises(ChapterError, match=r"move its module there \(git mv ex01_a\.py ex01_a/__init__\.py\) and "
                                           r"its words into ex01_a/exercise\.toml"):
        load_chapter("chx")


def test_the_old_exercises_tables_say_what_to_do(write_chapter):
    old = chapter_toml(exercises="[]") + '\n[[exercises]]\nid = "ex01_a"\ntitle = { en = "A", zh = "甲" }\n'
    old = old.replace("exercises = []\n", "")
    with pytest.raises(ChapterError, match=r"\[\[exercises\]\] tables are the old layout: each exercise is now a "
                                           r"folder"):
        write_chapter(chapter=old)


def test_an_id_in_the_exercise_file_is_refused(write_chapter):
    with pytest.raises(ChapterError, match=r"an exercise's id is its folder's name \(ex01_a\): remove id"):
        write_chapter('id = "ex01_a"\n' + exercise_toml(second="f.more"))


def test_a_checks_hint_layers_and_named_hints_are_read(write_chapter):
    tail = 'hint_layers = [{ en = "two", zh = "二" }]\n[checks.named_hints]\nwrong = { en = "w", zh = "错" }'
    check = write_chapter(exercise_toml(second="f.more", toml_tail=tail)).exercises[0].checks[1]
    assert [layer.en for layer in check.hint_layers] == ["two"] and check.named_hints["wrong"].zh == "错"


@pytest.mark.parametrize("old, new", [("layers = [{ en = \"x\", zh = \"甲\" }]", "hint_layers"),
                                      ("[checks.hints]\nwrong = { en = \"x\", zh = \"甲\" }", "[checks.named_hints]")])
def test_a_checks_keys_of_the_earlier_layout_name_their_new_names(write_chapter, old, new):
    """``layers`` and ``[checks.hints]`` are ``hint_layers`` and ``[checks.named_hints]`` now (one word for one
    thing: the grader's layers are its code's): an author's chapter written before says which to rename."""
    with pytest.raises(ChapterError, match=rf"check f.more has '\w+', which is now {re.escape(new)}: rename it"):
        write_chapter(exercise_toml(second="f.more", toml_tail=old))


def test_an_unknown_setting_is_named(write_chapter):
    text = exercise_toml(second="f.more").replace('functions = ["f"]', 'functions = ["f"]\ntimout_s = 5')
    with pytest.raises(ChapterError, match=r"unknown setting\(s\) timout_s"):
        write_chapter(text)


def test_an_unknown_chapter_key_is_named(write_chapter):
    with pytest.raises(ChapterError, match=r"chapter\.toml: unknown key\(s\) timeout_s .*an exercise's settings "
                                           r"are in its folder's exercise\.toml"):
        write_chapter(chapter=chapter_toml(toml_tail="").replace("exercises =", "timeout_s = 5\nexercises ="))


def test_missing_key_is_named(write_chapter):
    text = exercise_toml(second="f.more").replace('functions = ["f"]', "")
    with pytest.raises(ChapterError, match="has no 'functions'"):
        write_chapter(text)


@pytest.mark.parametrize("where", ["chapter", "words"])
def test_toml_syntax_error_is_a_chapter_error(write_chapter, where):
    bad = "\nthis is = = not toml\n"
    name = "chapter.toml" if where == "chapter" else r"ex01_a/exercise\.toml"
    with pytest.raises(ChapterError, match=name):
        if where == "chapter":
            write_chapter(chapter=chapter_toml() + bad)
        else:
            write_chapter(exercise_toml(second="f.more") + bad)


def test_non_numeric_points_are_a_chapter_error(write_chapter):
    with pytest.raises(ChapterError, match="points"):
        write_chapter(exercise_toml(points='"two"', second="f.more"))


def test_duplicate_exercise_ids_are_refused(write_chapter):
    with pytest.raises(ChapterError, match="listed twice"):
        write_chapter(chapter=chapter_toml(exercises='["ex01_a", "ex01_a"]'))


def test_a_copied_exercise_keeping_its_seed_salt_is_named(write_chapter, tmp_path):
    import shutil

    write_chapter(exercise_toml(second="f.more").replace('functions = ["f"]', 'functions = ["f"]\nseed_salt = 3'))
    shutil.copytree(tmp_path / "chx" / "ex01_a", tmp_path / "chx" / "ex02_b")
    (tmp_path / "chx" / "chapter.toml").write_text(chapter_toml(exercises='["ex01_a", "ex02_b"]'), encoding="utf-8")
    forget_chx()
    with pytest.raises(ChapterError, match=r"ex02_b/exercise\.toml: seed_salt = 3 is ex01_a's too, so both would draw "
                                           r"the same hidden inputs: give ex02_b a seed_salt of its own"):
        load_chapter("chx")


# ------------------------------------------------------------------ an exercise's messages
MESSAGE = '\n[messages."chx.ex01.more"]\nen = "{n} more"\nzh = "多 {n} 个"\n'


def test_an_exercises_messages_join_the_chapters_catalog(write_chapter):
    chapter = write_chapter(exercise_toml(second="f.more", toml_tail=MESSAGE))
    assert chapter.catalog.template("chx.ex01.more", "zh") == "多 {n} 个"
    assert "numeric.shape" in chapter.catalog.keys()  # the grader's own


def test_a_message_without_chinese_is_named(write_chapter):
    with pytest.raises(ChapterError, match=r"ex01_a/exercise\.toml: message 'chx\.ex01\.more' needs an 'en' and a "
                                           r"'zh' text"):
        write_chapter(exercise_toml(second="f.more", toml_tail=MESSAGE.replace('zh = "多 {n} 个"\n', "")))


def test_a_message_two_exercises_define_names_both_and_the_fix(write_chapter, tmp_path):
    write_chapter(exercise_toml(second="f.more", toml_tail=MESSAGE))
    import shutil

    shutil.copytree(tmp_path / "chx" / "ex01_a", tmp_path / "chx" / "ex02_b")
    (tmp_path / "chx" / "chapter.toml").write_text(chapter_toml(exercises='["ex01_a", "ex02_b"]'), encoding="utf-8")
    forget_chx()
    with pytest.raises(ChapterError, match=r"ex02_b/exercise\.toml: message 'chx\.ex01\.more' is defined in "
                                           r".*ex01_a/exercise\.toml too: .*rename it here and in "
                                           r"T\(\"chx\.ex01\.more\", \.\.\.\) of .*ex02_b/__init__\.py"):
        load_chapter("chx")


def test_a_message_the_grader_defines_names_both_files(write_chapter):
    """Found when the chapter loads (its catalog is built then), not when a report is first put into words."""
    with pytest.raises(ChapterError, match=r"ex01_a/exercise\.toml: message 'numeric\.shape' is defined twice "
                                           r"\(also in .*grader/messages/core\.toml\)"):
        write_chapter(exercise_toml(second="f.more", toml_tail=MESSAGE.replace("chx.ex01.more", "numeric.shape")))


def test_a_message_the_grader_defines_is_one_line_for_grade(write_chapter, tmp_path, capsys):
    from grader.cli import main

    write_chapter()
    words = tmp_path / "chx" / "ex01_a" / "exercise.toml"
    words.write_text(exercise_toml(second="f.more", toml_tail=MESSAGE.replace("chx.ex01.more", "numeric.shape")),
                     encoding="utf-8")
    forget_chx()
    (tmp_path / "exercises" / "chx").mkdir(parents=True)
    assert main([str(tmp_path / "exercises" / "chx"), "--chapter", "chx", "--lang", "en"]) != 0
    err = capsys.readouterr().err.strip()
    assert "internal error" not in err and len(err.splitlines()) == 1
    assert "exercise.toml: message 'numeric.shape' is defined twice" in err


# ------------------------------------------------------------------ what grade dev validate names before grading
def _problems(chapter):
    from grader.authoring.validate import exercise_problems

    return exercise_problems(chapter)


def test_validate_names_an_exercises_missing_solution(write_chapter):
    problems = _problems(write_chapter())
    assert len(problems) == 1
    assert problems[0].endswith("solutions/chx/ex01_a.py is missing: the reference solution of ex01_a (its functions "
                                "f, with SOLUTION and STUB blocks); then grade dev stubs chx writes its stub")


def _solved(chapter):
    chapter.solutions.mkdir(parents=True, exist_ok=True)
    (chapter.solutions / "ex01_a.py").write_text("def f(x):\n    return x\n", encoding="utf-8")
    return chapter


def test_validate_names_a_message_the_code_uses_but_no_file_defines(write_chapter):
    module = exercise_module(("f.values", ()), ("f.more", ("f.values",))) + \
        "\nfrom grader.i18n import T\n\ndef said():\n    return T(\"chx.ex01.gone\", n=1)\n"
    problems = _problems(_solved(write_chapter(module=module)))
    assert len(problems) == 1 and "ex01_a/__init__.py:22: " in problems[0]  # the line of T(...)
    assert ("T('chx.ex01.gone') names no message: add [messages.\"chx.ex01.gone\"] with its en and zh texts"
            in problems[0])
    assert problems[0].endswith("ex01_a/exercise.toml")


def test_validate_names_a_message_the_code_does_not_use(write_chapter):
    problems = _problems(_solved(write_chapter(exercise_toml(second="f.more", toml_tail=MESSAGE))))
    assert len(problems) == 1
    assert "ex01_a/exercise.toml: message 'chx.ex01.more' is not used by the exercise's code" in problems[0]
    assert problems[0].endswith("ex01_a/__init__.py): use it, T(\"chx.ex01.more\", ...), or remove it")


def test_validate_names_a_message_whose_languages_fill_other_fields(write_chapter):
    module = exercise_module(("f.values", ()), ("f.more", ("f.values",))) + "\nKEY = \"chx.ex01.more\"\n"
    words = exercise_toml(second="f.more", toml_tail=MESSAGE.replace("多 {n} 个", "多 {m} 个"))
    problems = _problems(_solved(write_chapter(words, module)))
    assert len(problems) == 1
    assert problems[0].endswith("ex01_a/exercise.toml: message 'chx.ex01.more' fills ['n'] in English but ['m'] in "
                                "Chinese: use the same fields in both")


def test_validate_finds_nothing_to_edit_in_chapter_4(ch4):
    assert _problems(ch4) == []


def test_an_exercises_words_go_through_the_toml_cache(write_chapter):
    """exercise.toml is parsed once per content, like every TOML file of the grader
    (grader.i18n.read_toml): kept in this process and, as JSON, in the cache folder."""
    import hashlib

    from grader import i18n, store

    chapter = write_chapter()
    for path in (chapter.folder / "chapter.toml", chapter.folder / "ex01_a" / "exercise.toml"):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert digest in i18n._tables, path
        assert (store.root() / "toml" / f"{digest[:40]}.json").is_file(), path


@pytest.mark.parametrize("setting, ok", [("parts = 2\nreference = false", 2), ("parts = 4\nreference = false", 4),
                                         ("parts = 1", 1), ("parts = 2", None), ("parts = 5\nreference = false", None),
                                         ("parts = 0\nreference = false", None),
                                         ("parts = true\nreference = false", None),
                                         ("parts = 2.0\nreference = false", None)])
def test_the_jobs_sharing_a_probe_are_one_to_four_and_only_without_a_reference(write_chapter, setting, ok):
    """``parts``: a reference's run is one job (its records are the reference's outcome, kept and computed
    ahead as one), so more than one job only where no reference runs; a number, not a flag or a float."""
    text = exercise_toml(second="f.more").replace('functions = ["f"]', f'functions = ["f"]\n{setting}')
    if ok is None:
        with pytest.raises(ChapterError, match=r"parts"):
            write_chapter(text)
    else:
        assert write_chapter(text).exercises[0].parts == ok
