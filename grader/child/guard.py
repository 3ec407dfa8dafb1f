"""The job's watch over its own instruments (child side).

Before the student's module is imported, :func:`snapshot` records the identity of
everything a verdict depends on inside the child: JAX's entry points, the clocks,
built-ins, the grader's probe, wire, primitives and chapter probes (functions, their
code objects, classes' methods), the compile listener's registration and the
modules in ``sys.modules``. :func:`changes` compares the present with it.

The job reports the comparison after the import and after the probe; the grader
treats any change, or a missing report, as tampering: the exercise's records cannot
be trusted. The grader never relies on this alone: values are compared outside the
child, compile counts are checked against XLA's own dump, and timings against the
grader's clock.
"""
from __future__ import annotations

import sys
from types import FunctionType, ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.primitives.compiles import CompileCounter

_MODULES = ("time", "builtins", "jax", "jax.numpy", "jax.monitoring", "numpy", "grader.child.probe", "grader.wire",
            "grader.primitives.compiles", "grader.primitives.timing", "grader.primitives.instrument",
            "grader.primitives.purity",
            "grader.primitives.structure", "grader.child.job", "grader.child.guard", "grader.checks")
_NAMES = {
    "time": ("perf_counter", "perf_counter_ns", "monotonic", "sleep", "time"),
    "builtins": ("print", "__import__", "isinstance", "type", "getattr", "callable", "len", "float", "int"),
    "jax": ("jit", "block_until_ready", "make_jaxpr", "clear_caches", "device_put", "effects_barrier",
            "devices", "ShapeDtypeStruct"),
    "jax.numpy": ("zeros", "asarray"),
    "jax.monitoring": ("register_event_duration_secs_listener",),
    "numpy": ("asarray", "array_equal", "ascontiguousarray", "frombuffer"),
}


def _members(module: ModuleType, prefix: str) -> dict[str, Any]:
    """Functions and classes defined in one of the grader's modules, with their methods."""
    out: dict[str, Any] = {}
    for name, value in list(vars(module).items()):
        if isinstance(value, FunctionType) and value.__module__ == module.__name__:
            out[f"{prefix}.{name}"] = value
            out[f"{prefix}.{name}.__code__"] = value.__code__
        elif isinstance(value, type) and value.__module__ == module.__name__:
            out[f"{prefix}.{name}"] = value
            for attr, member in list(vars(value).items()):
                if isinstance(member, FunctionType):
                    out[f"{prefix}.{name}.{attr}"] = member
                    out[f"{prefix}.{name}.{attr}.__code__"] = member.__code__
    return out


def _targets(extra_modules: tuple[str, ...]) -> dict[str, Any]:
    targets: dict[str, Any] = {}
    for module_name in _MODULES + extra_modules:
        module = sys.modules.get(module_name)
        targets[f"sys.modules[{module_name}]"] = module
        if module is None:
            continue
        if module_name.startswith("grader."):
            targets.update(_members(module, module_name))
        for name in _NAMES.get(module_name, ()):
            targets[f"{module_name}.{name}"] = getattr(module, name, None)
    compiles = sys.modules.get("grader.primitives.compiles")
    if compiles is not None:
        counter = compiles.COUNTER
        targets["COUNTER"] = counter
        targets["COUNTER._windows"] = counter.windows
        targets["COUNTER.__dict__"] = counter.__dict__
        targets["COUNTER.listening"] = _listening(counter)
    trusted = sys.modules.get("grader.trusted")
    if trusted is not None:
        for name in ("perf_counter", "monotonic", "sleep"):
            targets[f"TRUSTED.{name}"] = getattr(trusted.TRUSTED, name, None)
    return targets


def _listening(counter: CompileCounter) -> bool:
    """Whether the compile listener is still registered with JAX."""
    try:
        from jax._src import monitoring

        listeners = monitoring.get_event_duration_listeners()
    except Exception:  # noqa: BLE001 - JAX moved its internals: nothing to compare
        return True
    return any(getattr(l, "__func__", None) is type(counter).on_event and getattr(l, "__self__", None) is counter
               for l in listeners)


class Snapshot:
    def __init__(self, extra_modules: tuple[str, ...] = ()):
        self.extra_modules = extra_modules
        self.targets = _targets(extra_modules)

    def changes(self) -> list[str]:
        now = _targets(self.extra_modules)
        changed = []
        for name, before in self.targets.items():
            after = now.get(name)
            if isinstance(before, bool):
                if before != after:
                    changed.append(name)
            elif after is not before:
                changed.append(name)
        return sorted(changed)


def snapshot(extra_modules: tuple[str, ...] = ()) -> Snapshot:
    return Snapshot(extra_modules)
