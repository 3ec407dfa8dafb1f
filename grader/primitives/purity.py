"""Purity: a jitted function's Python body runs once, at trace time, so it must not
depend on or change anything but its arguments.

Child side: :func:`fingerprint_globals` summarises a module's globals (values, array
contents, container contents, object identities) so a change made by a call shows up
as a different fingerprint; :func:`find_tracers` finds traced values that escaped into
module globals (tracer leaks). Grader side: :func:`judge` turns those records, the
text printed during the calls and repeated outputs into one verdict.
"""
from __future__ import annotations

import functools
import hashlib
from types import FunctionType, ModuleType
from typing import Any

import numpy as np

from grader.checks import Fail
from grader.i18n import T

_MAX_ITEMS = 2000


def _fingerprint(value: Any, depth: int, seen: set[int]) -> str:
    import jax

    if isinstance(value, jax.core.Tracer):
        return f"tracer:{id(value)}"  # which one: a tracer left before a call is not the call's leak
    if value is None or type(value) in (bool, int, float, complex, str, bytes):
        text = repr(value)
        return text if len(text) < 200 else hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()
    if isinstance(value, (np.ndarray, np.generic, jax.Array)):
        try:
            host = np.asarray(value)
            digest = hashlib.sha1(np.ascontiguousarray(host).tobytes()).hexdigest()
            return f"array:{host.dtype}:{host.shape}:{digest}"
        except Exception:  # noqa: BLE001 - a deleted buffer, for example
            return f"array:{id(value)}"
    if isinstance(value, (ModuleType, FunctionType, type)) or callable(value):
        return f"id:{id(value)}"
    if id(value) in seen or depth > 4:
        return f"id:{id(value)}"
    seen.add(id(value))
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)[:_MAX_ITEMS]
        if isinstance(value, (set, frozenset)):
            parts = sorted(_fingerprint(v, depth + 1, seen) for v in items)
        else:
            parts = [_fingerprint(v, depth + 1, seen) for v in items]
        body = "|".join(parts) + f"#{len(value)}"
    elif isinstance(value, dict):
        items = list(value.items())[:_MAX_ITEMS]
        body = "|".join(f"{_fingerprint(k, depth + 1, seen)}={_fingerprint(v, depth + 1, seen)}" for k, v in items)
        body += f"#{len(value)}"
    else:
        state = getattr(value, "__dict__", None)
        inner = _fingerprint(state, depth + 1, seen) if isinstance(state, dict) else ""
        body = f"{type(value).__qualname__}:{id(value)}:{inner}"
    return f"{type(value).__name__}:" + hashlib.sha1(body.encode("utf-8", "replace")).hexdigest()


def fingerprint_globals(module: ModuleType) -> dict[str, str]:
    """One fingerprint per public and private global of ``module`` (dunders aside), and one
    per piece of state a function of the module carries from call to call (:func:`own_state`),
    named ``function.__defaults__``, ``function.__kwdefaults__``, ``function.__closure__``,
    ``function.__dict__``: ``def f(x, _seen=[])`` changes no global, but its default does."""
    out = {}
    seen_functions: set[int] = set()
    for name, value in list(vars(module).items()):
        if name.startswith("__") and name.endswith("__"):
            continue
        try:
            out[name] = _fingerprint(value, 0, set())
        except Exception as exc:  # noqa: BLE001 - an object that refuses inspection
            out[name] = f"uninspectable:{type(exc).__name__}"
        for part, state in own_state(value, module, seen_functions):
            try:
                out[part] = _fingerprint(state, 0, set())
            except Exception as exc:  # noqa: BLE001
                out[part] = f"uninspectable:{type(exc).__name__}"
    return out


def own_state(value: Any, module: ModuleType, seen: set[int] | None = None) -> list[tuple[str, Any]]:
    """The state a function of ``module`` (``value`` itself, or the function under a jit or a
    partial) keeps between calls, by name: its default arguments, its closure's variables, its
    attributes. Each function once (``seen``: the ids already listed), under its own name."""
    seen = set() if seen is None else seen
    fn = value
    try:
        for _ in range(4):
            if isinstance(fn, FunctionType):
                break
            fn = getattr(fn, "__wrapped__", None) or (fn.func if isinstance(fn, functools.partial) else None)
        if not isinstance(fn, FunctionType) or fn.__module__ != module.__name__ or id(fn) in seen:
            return []
        seen.add(id(fn))
        attributes = {k: v for k, v in vars(fn).items() if k != "__wrapped__"}
        cells = []
        for cell in fn.__closure__ or ():
            try:
                cells.append(cell.cell_contents)
            except ValueError:  # a cell not filled yet
                cells.append(None)
        parts = (("__defaults__", fn.__defaults__), ("__kwdefaults__", fn.__kwdefaults__),
                 ("__closure__", cells), ("__dict__", attributes))
        return [(f"{fn.__name__}.{part}", state) for part, state in parts if state]
    except Exception:  # noqa: BLE001 - an object whose attributes misbehave: no state to follow
        return []


def diff_globals(before: dict[str, str], after: dict[str, str]) -> dict[str, list[str]]:
    return {
        "changed": sorted(k for k in before if k in after and before[k] != after[k]),
        "added": sorted(k for k in after if k not in before),
        "removed": sorted(k for k in before if k not in after),
    }


def tracers_left(module: ModuleType) -> dict[str, str]:
    """The globals of ``module`` that hold a tracer now (taken before the probe's first call), each
    with its fingerprint, for :func:`find_tracers`'s ``since``."""
    return {name: _fingerprint(vars(module)[name], 0, set()) for name in find_tracers(module)}


def find_tracers(module: ModuleType, since: dict[str, str] | None = None) -> list[str]:
    """Names of module globals that hold a tracer (directly or in a container); with ``since``
    (:func:`tracers_left` before the first call), only those the calls changed: a check counts
    what happens during the calls it makes, not a tracer a notebook's demo left in a global
    when the module was imported."""
    import jax

    found = []

    def holds(value: Any, depth: int) -> bool:
        if isinstance(value, jax.core.Tracer):
            return True
        if depth > 3:
            return False
        if isinstance(value, (list, tuple, set)):
            return any(holds(v, depth + 1) for v in list(value)[:_MAX_ITEMS])
        if isinstance(value, dict):
            return any(holds(v, depth + 1) for v in list(value.values())[:_MAX_ITEMS])
        return False

    for name, value in list(vars(module).items()):
        try:
            if holds(value, 0) and (since is None or since.get(name) != _fingerprint(value, 0, set())):
                found.append(name)
        except Exception:  # noqa: BLE001
            continue
    return found


# ---------------------------------------------------------------- grader side
def expect_globals_unchanged(diff: dict, *, what: str) -> dict:
    """No global changed, and no function's own state (``f.__defaults__``, ..., see
    :func:`fingerprint_globals`); each kind of change has its sentence."""
    names = diff.get("changed", []) + diff.get("added", []) + diff.get("removed", [])
    if names:
        state = [n for n in names if "." in n]
        plain = [n for n in names if "." not in n]
        messages = ([T("purity.globals", what=what, names=", ".join(plain))] if plain else []) + \
            ([T("purity.hidden_state", what=what, names=", ".join(state))] if state else [])
        raise Fail(messages[0] if len(messages) == 1 else messages, {"globals_changed": names})
    return {"globals_changed": []}


def hidden_state_only(diff: dict) -> bool:
    """Whether the only changes are to functions' own state (a mutable default, a closure, an attribute)."""
    names = diff.get("changed", []) + diff.get("added", []) + diff.get("removed", [])
    return bool(names) and all("." in n for n in names)


def expect_no_tracers(names: list[str], *, what: str) -> dict:
    if names:
        raise Fail(T("purity.tracer_leak", what=what, names=", ".join(names)), {"leaked": names})
    return {"leaked": []}


def expect_silent(captured: dict, *, what: str) -> dict:
    text = captured.get("text", "")
    if captured.get("bytes", 0) or text:
        first = text.strip().splitlines()[0][:120] if text.strip() else ""
        raise Fail(T("purity.printed", what=what, bytes=captured.get("bytes", len(text)), first=first),
                   {"printed_bytes": captured.get("bytes", len(text))})
    return {"printed_bytes": 0}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and (a == b or a != a and b != b)  # NaN equals NaN here


def expect_same(first: Any, second: Any, *, what: str) -> dict:
    """Two described results of the same call on the same input must be identical."""
    if not _same(first, second):
        raise Fail(T("purity.not_deterministic", what=what))
    return {"repeat_identical": True}
