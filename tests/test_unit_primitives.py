"""Unit tests of the grader-side halves of grader/primitives: plain data in, verdicts out."""
from __future__ import annotations

import json

import numpy as np
import pytest

from grader import wire
from grader.checks import Fail, NotAttempted, Records
from grader.i18n import T
from grader.primitives import compiles, numeric, purity, structure


def arr(value, dtype="float32", type_name="jax.Array") -> dict:
    return {"t": "array", "type": type_name, "value": np.asarray(value, dtype=dtype)}


def fail_of(fn, *args, **kwargs) -> Fail:
    with pytest.raises(Fail) as info:
        fn(*args, **kwargs)
    return info.value


# ================================================================== numeric.compare
def test_compare_passes_within_tolerance():
    want = np.array([1.0, -2.0, 3.0], np.float32)
    got = arr(want * np.float32(1 + 2e-6))
    measured = numeric.compare(got, want, what="f(x)")
    assert measured["max_abs_err"] > 0
    assert measured["max_rel_err"] == pytest.approx(2e-6, rel=0.1)
    assert measured["rtol"] == numeric.FLOAT32["rtol"] and measured["atol"] == numeric.FLOAT32["atol"]


def test_compare_exact_match_has_zero_errors():
    want = np.arange(6, dtype=np.float32).reshape(2, 3)
    measured = numeric.compare(arr(want), want, what="f(x)")
    assert measured["max_abs_err"] == 0.0 and measured["max_rel_err"] == 0.0


def test_compare_wrong_shape():
    failure = fail_of(numeric.compare, arr(np.zeros((4,))), np.zeros((3,), np.float32), what="f(x)")
    assert failure.message.key == "numeric.shape"
    assert failure.message.args["expected"] == "(3,)" and failure.message.args["got"] == "(4,)"
    assert failure.measured == {"expected_shape": [3], "shape": [4]}


def test_compare_zero_d_against_one_element():
    failure = fail_of(numeric.compare, arr([1.0]), np.asarray(1.0, np.float32), what="f(x)")
    assert failure.message.key == "numeric.shape"
    assert failure.message.args["expected"] == "()"


def test_compare_wrong_dtype():
    want = np.zeros(3, np.float32)
    failure = fail_of(numeric.compare, arr(want, "float64"), want, what="f(x)")
    assert failure.message.key == "numeric.dtype"
    assert failure.message.args["expected"] == "float32" and failure.message.args["got"] == "float64"


def test_compare_dtype_argument_overrides_expected_dtype():
    want = np.zeros(3, np.float64)  # a reference computed in float64
    numeric.compare(arr(np.zeros(3), "float32"), want, what="f(x)", dtype="float32")
    failure = fail_of(numeric.compare, arr(np.zeros(3), "float64"), want, what="f(x)", dtype="float32")
    assert failure.message.key == "numeric.dtype"


def test_compare_nan_where_finite_expected():
    want = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    got = arr([1.0, np.nan, np.inf, 4.0])
    failure = fail_of(numeric.compare, got, want, what="f(x)")
    assert failure.message.key == "numeric.non_finite"
    assert failure.message.args["count"] == 2 and failure.message.args["total"] == 4
    assert failure.measured["non_finite"] == 2
    assert failure.measured["max_abs_err"] == 0.0  # over the elements both sides have finite


def test_compare_nan_where_nan_expected_passes():
    want = np.array([np.nan, 1.0], np.float32)
    measured = numeric.compare(arr([np.nan, 1.0]), want, what="f(x)")
    assert measured["max_abs_err"] == 0.0


def test_compare_finite_where_nan_expected_fails():
    failure = fail_of(numeric.compare, arr([0.0, 1.0]), np.array([np.nan, 1.0], np.float32), what="f(x)")
    assert failure.message.key == "numeric.values"
    assert failure.message.args["first"].args["index"] == "0"


def test_compare_values_out_of_tolerance_measures_errors():
    want = np.array([1.0, 2.0, 4.0])
    got = arr([1.0, 2.5, 4.1], "float64")
    failure = fail_of(numeric.compare, got, want, what="f(x)")
    args = failure.message.args
    assert failure.message.key == "numeric.values"
    assert args["bad"] == 2 and args["total"] == 3
    first = args["first"]
    assert first.key == "numeric.first_at"
    assert first.args == {"index": "1", "got": 2.5, "expected": 2.0}
    assert failure.measured["max_abs_err"] == pytest.approx(0.5)
    assert failure.measured["max_rel_err"] == pytest.approx(0.25)
    assert args["max_abs"] == failure.measured["max_abs_err"]


def test_compare_reports_first_bad_index_in_2d():
    want = np.zeros((2, 3), np.float32)
    got = np.zeros((2, 3), np.float32)
    got[1, 2] = 1.0
    failure = fail_of(numeric.compare, arr(got), want, what="f(x)")
    assert failure.message.args["first"].args["index"] == "1, 2"  # read as got[1, 2]


def test_compare_a_scalar_names_no_index():
    failure = fail_of(numeric.compare, arr(np.float32(2.0)), np.float32(1.0), what="f(x)")
    assert failure.message.args["first"].key == "numeric.first_scalar"
    assert "index" not in failure.message.args["first"].args


def test_compare_respects_given_tolerance():
    want = np.array([1.0], np.float32)
    got = arr([1.001])
    with pytest.raises(Fail):
        numeric.compare(got, want, what="f(x)")
    measured = numeric.compare(got, want, what="f(x)", rtol=1e-2, atol=0)
    assert measured["rtol"] == 1e-2


def test_compare_integer_values():
    want = np.array([1, 2, 3], np.int32)
    assert numeric.compare(arr([1, 2, 3], "int32"), want, what="f(x)")["max_abs_err"] == 0.0
    failure = fail_of(numeric.compare, arr([1, 0, 0], "int32"), want, what="f(x)")
    assert failure.message.key == "numeric.int_values"
    assert failure.message.args["bad"] == 2


def test_compare_python_scalar_is_not_an_array():
    failure = fail_of(numeric.compare, {"t": "scalar", "type": "float", "value": 1.0},
                      np.asarray(1.0, np.float32), what="f(x)")
    assert failure.message.key == "numeric.python_scalar"
    assert failure.message.args["type"] == "float"


def test_compare_accepts_scalars_when_asked():
    measured = numeric.compare({"t": "scalar", "type": "float", "value": 1.0}, np.asarray(1.0), what="f(x)",
                               accept_scalars=True)
    assert measured["max_abs_err"] == 0.0


@pytest.mark.parametrize("described, key, type_", [
    ({"t": "object", "type": "x.Y"}, "numeric.not_array", "x.Y"),
    ({"t": "tuple", "items": [], "length": 2}, "numeric.not_array", "tuple of 2"),
    ({"t": "tracer", "type": "Tracer"}, "numeric.tracer", None),
    (None, "numeric.not_array", "NoneType"),
])
def test_compare_non_arrays(described, key, type_):
    failure = fail_of(numeric.compare, described, np.zeros(2, np.float32), what="f(x)")
    assert failure.message.key == key
    if type_ is not None:
        assert failure.message.args["type"] == type_


def test_compare_dict_answer_is_named_in_the_message():
    described = {"t": "dict", "items": {"a": arr([1.0])}}
    failure = fail_of(numeric.compare, described, np.zeros(1, np.float32), what="f(x)")
    assert failure.message.key == "numeric.not_array"
    assert failure.message.args["type"] is not None


def test_compare_wrong_array_type():
    failure = fail_of(numeric.compare, arr([1.0], type_name="numpy.ndarray"), np.array([1.0], np.float32),
                      what="f(x)", array_type="jax.Array")
    assert failure.message.key == "numeric.wrong_type"
    assert failure.message.args == {"what": "f(x)", "expected": "jax.Array", "got": "numpy.ndarray"}


class AlwaysEqual:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__

    def __array__(self, dtype=None, copy=None):
        return np.zeros(3, dtype or np.float32)


def test_object_claiming_equality_cannot_pass():
    from grader.child.probe import describe

    described = describe(AlwaysEqual())
    assert described["t"] == "object"
    received = wire.decode(json.loads(json.dumps(wire.encode({"op": "obs", "value": described}))))["value"]
    failure = fail_of(numeric.compare, received, np.zeros(3, np.float32), what="f(x)")
    assert failure.message.key == "numeric.not_array"


def test_ndarray_subclass_claiming_equality_cannot_pass():
    from grader.child.probe import describe

    class Liar(np.ndarray):
        def __eq__(self, other):
            return np.ones(self.shape, bool)

    described = describe(np.ones(3, np.float32).view(Liar))
    assert described["t"] == "object"
    failure = fail_of(numeric.compare, described, np.zeros(3, np.float32), what="f(x)")
    assert failure.message.key == "numeric.not_array"


def test_errors_ignore_non_finite_expected():
    max_abs, max_rel = numeric.errors(np.array([1.0, 5.0]), np.array([1.5, np.inf]))
    assert max_abs == 0.5 and max_rel == pytest.approx(1 / 3)
    assert numeric.errors(np.array([1.0]), np.array([np.nan])) == (0.0, 0.0)


# ================================================================== numeric.compare_calls
def _calls(values: dict, side: str) -> Records:
    data = {key: {"status": "ok", "function": "f", "value": v} for key, v in values.items()}
    return Records(side, data, module_file="ex.py")


def test_compare_calls_all_pass_reports_worst_error():
    want = {f"f/{i}": arr([1.0, 2.0]) for i in range(3)}
    got = dict(want)
    got["f/2"] = arr([1.0, 2.00001])
    measured = numeric.compare_calls(_calls(got, "student"), _calls(want, "reference"),
                                     [(k, k) for k in want], dtype="float32")
    assert measured["cases"] == 3
    assert measured["max_abs_err"] == pytest.approx(1e-5, rel=0.1)
    assert "failed_cases" not in measured


def test_compare_calls_collects_failures_into_one():
    want = {f"f/{i}": arr([1.0, 2.0]) for i in range(3)}
    got = {"f/0": arr([1.0, 2.0]), "f/1": arr([1.0]), "f/2": arr([1.0, 2.0], "float64")}
    failure = fail_of(numeric.compare_calls, _calls(got, "student"), _calls(want, "reference"),
                      [(k, f"label {k}") for k in want])
    assert [m.key for m in failure.message] == ["numeric.shape", "numeric.dtype"]
    assert failure.message[0].args["what"] == "label f/1"
    assert failure.measured["failed_cases"] == 2 and failure.measured["cases"] == 3  # every case counts


def test_compare_calls_caps_messages_with_and_n_more():
    want = {f"f/{i}": arr([1.0]) for i in range(7)}
    got = {k: arr([9.0]) for k in want}
    failure = fail_of(numeric.compare_calls, _calls(got, "student"), _calls(want, "reference"),
                      [(k, k) for k in want])
    assert len(failure.message) == 5
    assert failure.message[-1].key == "numeric.more" and failure.message[-1].args == {"n": 3}
    assert failure.measured["failed_cases"] == 7


def test_compare_calls_includes_raised_and_missing_calls():
    want = {"f/0": arr([1.0]), "f/1": arr([1.0])}
    student = Records("student", {
        "f/0": {"status": "raised", "function": "f", "type": "ValueError", "message": "no", "where": "ex.py:2"},
        "f/1": {"status": "missing", "function": "f"},
    }, module_file="ex.py")
    failure = fail_of(numeric.compare_calls, student, _calls(want, "reference"), [(k, k) for k in want])
    assert [m.key for m in failure.message] == ["call.raised", "call.missing"]


def test_compare_calls_stub_is_not_attempted():
    student = Records("student", {"f/0": {"status": "not_attempted", "function": "f"}})
    with pytest.raises(NotAttempted):
        numeric.compare_calls(student, _calls({"f/0": arr([1.0])}, "reference"), [("f/0", "f")])


def test_compare_calls_accepts_reference_python_scalars():
    student = _calls({"f/0": arr(3.0, "float64")}, "student")
    reference = _calls({"f/0": {"t": "scalar", "type": "float", "value": 3.0}}, "reference")
    assert numeric.compare_calls(student, reference, [("f/0", "f")])["cases"] == 1


# ================================================================== compiles
def window(count, names=None):
    return {"count": count, "names": names if names is not None else ({"f": count} if count else {})}


def test_compiles_exactly_passes():
    measured = compiles.expect(window(1), what="three calls", exactly=1)
    assert measured == {"compiles": 1, "compiled": {"f": 1}, "expected": 1}


def test_compiles_exactly_fails_both_ways():
    for seen in (0, 3):
        failure = fail_of(compiles.expect, window(seen), what="three calls", exactly=1)
        assert failure.message[0].key == "compile.exactly"
        assert failure.message[0].args["seen"] == seen and failure.message[0].args["expected"] == 1
        assert failure.measured["compiles"] == seen


def test_compiles_at_most():
    assert compiles.expect(window(8), what="w", at_most=8)["at_most"] == 8
    assert compiles.expect(window(0), what="w", at_most=8)["compiles"] == 0
    failure = fail_of(compiles.expect, window(9), what="w", at_most=8)
    assert failure.message[0].key == "compile.at_most"
    assert failure.message[0].args["limit"] == 8 and failure.message[0].args["seen"] == 9


def test_a_failed_count_says_which_call_compiled_again_and_why():
    """From JAX's own explanations of its cache misses (jax_explain_cache_misses)."""
    why = [
        {"call": 1, "text": "TRACING CACHE MISS at a.py:3:\n  never seen function:\n    f id=1 defined at a.py:1"},
        {"call": 2, "params": ["x", "n_steps"], "text": "TRACING CACHE MISS at a.py:4:\n  for f defined at a.py:1\n"
         "  different input pytree:\n  * at input path [0][1], now <class 'Static'> with pytree metadata "
         "Static(val=5) and before <class 'Static'> with pytree metadata Static(val=3), so it does not match"},
        {"call": 3, "text": "TRACING CACHE MISS ...\n  for f defined at a.py:1\n  different input types:\n"
         "  * at x, now i32[4] and before f32[4]"},
        {"call": 4, "text": "TRACING CACHE MISS ...\n  for f defined at a.py:1\n  different input types:\n"
         "  * at x, now f32[8] and before f32[4]"},
        {"call": 5, "text": "TRACING CACHE MISS at a.py:9:\n  never seen function:\n    f id=2 defined at a.py:1"},
    ]
    failure = fail_of(compiles.expect, {"count": 5, "names": {"jit(f)": 5}, "why": why}, what="w", exactly=1)
    reasons = [(m.key, dict(m.args)) for m in failure.message[1:]]
    assert reasons[0] == ("compile.why.static", {"call": 2, "arg": "n_steps", "before": "3", "now": "5"})
    assert reasons[1][0] == "compile.why.dtype" and reasons[1][1]["now"] == "i32[4]"
    assert reasons[2][0] == "compile.why.shape"
    assert reasons[3] == ("compile.why.more", {"n": 1})  # the fourth (a jit made anew) is counted
    assert [r.key for r in compiles.explain(why)] == ["compile.why.static", "compile.why.dtype",
                                                       "compile.why.shape", "compile.why.new_function"]


def test_a_function_made_anew_at_the_freed_one_s_address_is_still_made_anew():
    """A function made anew on every call may be given the address, and so the id, of the one freed before
    it: JAX still says it never saw it, at a later call, and that is the reason (it once depended on the
    memory's layout: ex07's static_n_steps said "and 1 more call(s) compiled again" on one run, not the next)."""
    why = [
        {"call": 1, "text": "TRACING CACHE MISS at a.py:3:\n  never seen function:\n    step id=7 defined at a.py:1"},
        {"call": 2, "text": "TRACING CACHE MISS at a.py:3:\n  never seen function:\n    step id=8 defined at a.py:1"},
        {"call": 3, "text": "TRACING CACHE MISS at a.py:3:\n  never seen function:\n    step id=8 defined at a.py:1"},
        {"call": 3, "text": "TRACING CACHE MISS at a.py:3:\n  never seen function:\n    other id=9 defined at a.py:5"},
    ]
    assert [(r.key, r.args["call"]) for r in compiles.explain(why)] == [("compile.why.new_function", 2),
                                                                        ("compile.why.new_function", 3)]


def test_a_failed_count_names_each_kind_of_reason_before_more_of_one_kind():
    """Four calls compiled again for a new shape, then one for a new dtype: the message names the
    dtype too (the first three reasons alone were all shapes: ex04's keeps_dtype read as shapes only)."""
    def miss(call: int, now: str) -> dict:
        return {"call": call, "text": f"TRACING CACHE MISS ...\n  for f defined at a.py:1\n  different input types:\n"
                                      f"  * at x, now {now} and before f32[4]"}

    why = [miss(2, "f32[8]"), miss(3, "f32[16]"), miss(4, "f32[32]"), miss(5, "f32[64]"), miss(6, "i32[4]")]
    failure = fail_of(compiles.expect, {"count": 6, "names": {"jit(f)": 6}, "why": why}, what="w", exactly=1)
    shown = [(m.key, m.args.get("call")) for m in failure.message[1:]]
    assert shown == [("compile.why.shape", 2), ("compile.why.shape", 3), ("compile.why.dtype", 6),
                     ("compile.why.more", None)]


def test_compiles_message_names_what_compiled():
    names = {f"fn{i}": 1 for i in range(8)}
    names["big"] = 5
    failure = fail_of(compiles.expect, window(13, names), what="w", exactly=1)
    shown = failure.message[0].args["names"]
    assert shown.startswith("big ×5, fn0 ×1")
    assert shown.endswith(", …")
    assert fail_of(compiles.expect, window(0), what="w", exactly=1).message[0].args["names"] == "-"


@pytest.mark.parametrize("count", [-1, 1.0, "1", None, [1]])
def test_compiles_implausible_counts_fail(count):
    failure = fail_of(compiles.expect, {"count": count, "names": {}}, what="w", exactly=1)
    assert failure.message.key == "compile.implausible"
    assert failure.message.args["value"] == repr(count)


def test_compiles_missing_count_is_implausible():
    assert fail_of(compiles.expect, {"names": {}}, what="w", at_most=3).message.key == "compile.implausible"


def test_compiles_bool_count_is_implausible():
    failure = fail_of(compiles.expect, {"count": True, "names": {}}, what="w", exactly=1)
    assert failure.message.key == "compile.implausible"


# ================================================================== purity
def test_globals_unchanged_passes_and_fails():
    assert purity.expect_globals_unchanged({"changed": [], "added": [], "removed": []}, what="f") == \
        {"globals_changed": []}
    failure = fail_of(purity.expect_globals_unchanged, {"changed": ["cache"], "added": ["log"], "removed": []},
                      what="f")
    assert failure.message.key == "purity.globals"
    assert failure.message.args["names"] == "cache, log"
    assert failure.measured == {"globals_changed": ["cache", "log"]}


def test_state_a_function_keeps_between_calls_is_seen():
    """A mutable default, a closure's variable, a function attribute: hidden state that changes no
    module global (issue 26: ``def softmax_raw(x, _seen=[])`` kept its purity points)."""
    import types

    import jax

    module = types.ModuleType("student_module")
    exec(compile('''
import functools
def seen(x, _log=[]):
    _log.append(x)
    return x
def _counter():
    calls = 0
    def counted(x):
        nonlocal calls
        calls += 1
        return x
    return counted
counted = _counter()
def tagged(x):
    tagged.calls = getattr(tagged, "calls", 0) + 1
    return x
def steady(x, axis=-1, _options={"shift": "max"}):
    return _options["shift"]
bound = functools.partial(steady, axis=0)
''', "student_module.py", "exec"), module.__dict__)
    module.jitted = jax.jit(module.seen)  # the same function under a jit: its state is listed once
    before = purity.fingerprint_globals(module)
    for name in ("seen", "counted", "tagged", "steady", "bound"):
        getattr(module, name)(1.0)
    diff = purity.diff_globals(before, purity.fingerprint_globals(module))
    changed = diff["changed"] + diff["added"]
    assert sorted(changed) == ["counted.__closure__", "seen.__defaults__", "tagged.__dict__"], diff
    assert purity.hidden_state_only(diff)
    failure = fail_of(purity.expect_globals_unchanged, diff, what="f")
    assert failure.message.key == "purity.hidden_state"
    assert failure.message.args["names"] == ", ".join(diff["changed"] + diff["added"] + diff["removed"])
    both = fail_of(purity.expect_globals_unchanged, {"changed": ["log", "seen.__defaults__"]}, what="f")
    assert [m.key for m in both.message] == ["purity.globals", "purity.hidden_state"]


def test_diff_globals():
    diff = purity.diff_globals({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "9", "d": "4"})
    assert diff == {"changed": ["b"], "added": ["d"], "removed": ["c"]}
    assert purity.diff_globals({"a": "1"}, {"a": "1"}) == {"changed": [], "added": [], "removed": []}


def test_expect_silent():
    assert purity.expect_silent({"text": "", "bytes": 0}, what="f") == {"printed_bytes": 0}
    failure = fail_of(purity.expect_silent, {"text": "\n  tracing x\nagain\n", "bytes": 20}, what="f")
    assert failure.message.key == "purity.printed"
    assert failure.message.args["first"] == "tracing x"
    assert failure.message.args["bytes"] == 20


def test_expect_silent_counts_bytes_beyond_captured_text():
    failure = fail_of(purity.expect_silent, {"text": "", "bytes": 5}, what="f")
    assert failure.message.args["first"] == "" and failure.measured == {"printed_bytes": 5}


def test_expect_same():
    a = arr([1.0, np.nan])
    assert purity.expect_same(a, arr([1.0, np.nan]), what="f") == {"repeat_identical": True}
    for other in (arr([1.0, 2.0]), arr([1.0, np.nan], "float64"), arr([[1.0, np.nan]])):
        failure = fail_of(purity.expect_same, a, other, what="f")
        assert failure.message.key == "purity.not_deterministic"


def test_expect_same_on_scalars_and_bools():
    assert purity.expect_same({"t": "scalar", "value": 2}, {"t": "scalar", "value": 2}, what="f")
    assert purity.expect_same(arr([True], "bool"), arr([True], "bool"), what="f")
    with pytest.raises(Fail):
        purity.expect_same({"t": "scalar", "value": 2}, {"t": "scalar", "value": 3}, what="f")


def test_expect_same_different_tuples_fail():
    first = {"t": "tuple", "length": 1, "items": [arr([1.0])]}
    second = {"t": "tuple", "length": 1, "items": [arr([2.0])]}
    with pytest.raises(Fail):
        purity.expect_same(first, second, what="f")


def test_expect_no_tracers():
    assert purity.expect_no_tracers([], what="f") == {"leaked": []}
    failure = fail_of(purity.expect_no_tracers, ["saved", "history"], what="f")
    assert failure.message.key == "purity.tracer_leak"
    assert failure.message.args["names"] == "saved, history"


# ================================================================== structure
JIT = {"callable": True, "jitted": True, "type": "jaxlib._jax.PjitFunction", "wrapped": "softmax_raw"}
PLAIN = {"callable": True, "jitted": False, "type": "builtins.function", "wrapped": None}


def test_expect_jitted():
    assert structure.expect_jitted(JIT, name="softmax") == {"type": JIT["type"], "jitted": True}
    failure = fail_of(structure.expect_jitted, PLAIN, name="softmax")
    assert failure.message.key == "structure.not_jitted"
    assert failure.message.args == {"name": "softmax", "type": "builtins.function"}


def test_expect_not_jitted():
    assert structure.expect_jitted(PLAIN, name="softmax_raw", jitted=False)["jitted"] is False
    failure = fail_of(structure.expect_jitted, JIT, name="softmax_raw", jitted=False)
    assert failure.message.key == "structure.jitted"


def test_expect_jitted_missing_name():
    failure = fail_of(structure.expect_jitted, {"missing": True}, name="softmax")
    assert failure.message.key == "call.missing"


def test_expect_traceable_ok():
    assert structure.expect_traceable({"status": "ok"}, name="piecewise") == {"traced": True}


@pytest.mark.parametrize("kind", ["tracer_bool", "concretization", "tracer_int", "tracer_array"])
def test_expect_traceable_known_kinds(kind):
    record = {"status": "raised", "type": "SomeError", "kind_of_error": kind, "where": "ex02_where.py:31"}
    failure = fail_of(structure.expect_traceable, record, name="piecewise")
    assert failure.message.key == f"structure.trace.{kind}"
    assert failure.message.args == {"name": "piecewise", "where": "ex02_where.py:31"}
    assert failure.measured == {"error": "SomeError"}


@pytest.mark.parametrize("kind", [None, "tracer_leak", "static_needed"])
def test_expect_traceable_other_errors(kind):
    record = {"status": "raised", "type": "ZeroDivisionError", "kind_of_error": kind, "where": None}
    failure = fail_of(structure.expect_traceable, record, name="piecewise")
    assert failure.message.key == "structure.trace.other"
    # no line of the submission in the traceback: the place is the call, inside JAX, never "?" (issue 26)
    assert failure.message.args == {"name": "piecewise", "type": "ZeroDivisionError",
                                    "where": T("place.inside_jax", function="piecewise"), "message": ""}
    assert failure.hint.key.startswith("hint.exception")  # a hint about that exception, not about Python ifs


def test_compare_calls_with_expected_values_of_the_graders_own():
    """expected(key) replaces the reference's record, and is only asked after the student's."""
    got = {"f/0": arr([1.0, 2.0]), "f/1": arr([3.0])}
    asked = []

    def expected(key):
        asked.append(key)
        return {"f/0": np.array([1.0, 2.0], np.float64), "f/1": np.array([3.5])}[key]

    empty_reference = Records("reference", {})
    failure = fail_of(numeric.compare_calls, _calls(got, "student"), empty_reference, [("f/0", "a"), ("f/1", "b")],
                      expected=expected, dtype="float32")
    assert asked == ["f/0", "f/1"]
    assert [m.key for m in failure.message] == ["numeric.values"]
    assert failure.measured["cases"] == 2 and failure.measured["failed_cases"] == 1
    assert failure.measured["max_abs_err"] == pytest.approx(0.5)  # the failed case's error is measured too


def test_compare_calls_with_expected_reads_the_student_first():
    stub = Records("student", {"f/0": {"status": "not_attempted", "function": "f"}})
    with pytest.raises(NotAttempted):
        numeric.compare_calls(stub, Records("reference", {}), [("f/0", "a")],
                              expected=lambda key: pytest.fail("the expected value was read first"))


def test_a_ratio_is_upside_down_only_where_no_statistic_the_right_way_up_explains_it():
    """grader.primitives.instrument.upside_down: eager calls of 4 ms over jitted calls of 2 ms, one of them
    preempted to 42 ms. The jitted median over the eager one (0.5) is upside down; the slowest eager call over
    the slowest jitted one (about 0.1) is a statistic of its own, however poor; and so is the true 2."""
    from grader.primitives.instrument import upside_down

    eager, jitted = [0.004] * 9, [0.002] * 8 + [0.042]
    assert upside_down(0.5, eager, jitted)
    assert not upside_down(0.004 / 0.042, eager, jitted)
    assert not upside_down(2.0, eager, jitted)
    assert not upside_down(0.5, [], jitted)
