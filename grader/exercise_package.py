"""The contract of an exercise package (an exercise's code, ``<chapter>/<exercise>/__init__.py``), as Protocols.

What :func:`grader.exercise_folder.read_exercise` requires of the package it imports, and the grader uses of
it: its record keys (``KEYS``), its hidden inputs (``inputs(rng)``, returning the exercise's ``Inputs``
TypedDict), its probe (``probe(ctx)``, run in the child on a :class:`~grader.child.probe.ProbeContext`), its
checks (functions declared with :func:`grader.checks.check`, found by
:func:`~grader.checks.declared_checks`); optionally the regimes its inputs cover (``regimes(inp)``,
``tests/test_input_coverage.py``) and, for a timed exercise, its driver (``drive(sides, inputs, budget)``).

A module satisfies a Protocol as it is (the type checker reads a module's functions as the Protocol's
methods): ``package: ExercisePackage = ex03_static_args``. The grader checks it when it reads the chapter
(:func:`problems`, raised by :func:`~grader.exercise_folder.read_exercise`): a member missing, or one that
takes another number of arguments, is an error that names the file, what is wrong and the fix. The arities
it checks are read from the Protocols below, so the contract is written once.

Typed, an exercise's code reads::

    class Inputs(TypedDict):
        cases: dict[str, np.ndarray]
        factors: list[float]

    def inputs(rng: np.random.Generator) -> Inputs: ...
    def probe(ctx: ProbeContext[Inputs]) -> None: ...

    @check("scale.values")
    def scale_values(s: Records, r: Records, ctx: CheckContext[Inputs]) -> dict: ...
"""
from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any, Callable, Mapping, Protocol

import numpy as np

from grader.checks import Keys
from grader.child.probe import ProbeContext
from grader.primitives.driving import Ended, Sides


class ExercisePackage(Protocol):
    """What every exercise package defines (``grader/chapters/<chapter>/<exercise>/__init__.py``)."""

    #: the names of the records its probe makes and its checks read (:class:`grader.checks.Keys`)
    KEYS: Keys

    def inputs(self, rng: np.random.Generator) -> Mapping[str, Any]:
        """The hidden inputs, drawn from the run's seed (the exercise's ``Inputs`` TypedDict); plain NumPy data."""
        ...

    def probe(self, ctx: ProbeContext[Any]) -> None:
        """In the child: call the student's functions on ``ctx.inputs`` and record what happened."""
        ...


class CoveredPackage(ExercisePackage, Protocol):
    """An exercise package that names the regimes its inputs cover on every seed (optional)."""

    def regimes(self, inp: Any) -> dict[str, bool]:
        """What the contract tells apart, by name: whether these inputs hold it (computed from the values)."""
        ...


class TimedPackage(ExercisePackage, Protocol):
    """A timed exercise's package (``timed = true`` in its exercise.toml): it has a driver too."""

    def drive(self, sides: Sides, inputs: Any, budget: float) -> tuple[Ended, Ended | None]:
        """Runs both sides' jobs through :func:`grader.primitives.comparison.timed_comparison`."""
        ...


#: what each member is for, in an error's fix
_WHAT = {
    "inputs": "def inputs(rng: np.random.Generator) -> Inputs (its hidden inputs, an Inputs TypedDict)",
    "probe": "def probe(ctx: ProbeContext[Inputs]) -> None (what its child process records)",
    "regimes": "def regimes(inp: Inputs) -> dict[str, bool] (the regimes its inputs cover)",
    "drive": "def drive(sides: Sides, inputs: Inputs, budget: float) (a timed exercise's driver)",
}


def _parameters(protocol: type, name: str) -> list[str]:
    """The parameters of the Protocol's method ``name``, without ``self``."""
    return list(inspect.signature(getattr(protocol, name)).parameters)[1:]


#: each function of the contract, its Protocol's parameters (read from the Protocols: written once), and whether
#: every package needs it
FUNCTIONS: dict[str, tuple[list[str], bool]] = {
    "inputs": (_parameters(ExercisePackage, "inputs"), True),
    "probe": (_parameters(ExercisePackage, "probe"), True),
    "regimes": (_parameters(CoveredPackage, "regimes"), False),
    "drive": (_parameters(TimedPackage, "drive"), False),
}


def _takes(fn: Callable, n: int) -> bool:
    """Whether ``fn`` can be called with ``n`` positional arguments."""
    try:
        inspect.signature(fn).bind(*range(n))
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): let the call tell
        return True
    return True


def _plain(fn: Callable) -> str:
    """``fn``'s parameters as written, without their annotations (``ctx, seed``)."""
    parameters = inspect.signature(fn).parameters.values()
    return ", ".join(str(p.replace(annotation=inspect.Parameter.empty)) for p in parameters)


def problems(module: ModuleType, *, timed: bool = False) -> list[str]:
    """What ``module`` lacks of the contract (:class:`ExercisePackage`, :class:`TimedPackage` if ``timed``), one
    sentence each with its fix; empty when it satisfies it."""
    found = []
    keys = getattr(module, "KEYS", None)
    if not isinstance(keys, Keys):
        what = "defines no KEYS" if keys is None else f"has KEYS = {type(keys).__name__}, not a Keys"
        found.append(f"{what}: declare its record keys, KEYS = Keys(value=\"{{name}}/values/{{case}}\", ...) "
                     f"(from grader.checks import Keys), read by its probe and its checks")
    for name, (parameters, required) in FUNCTIONS.items():
        fn = getattr(module, name, None)
        wanted = required or name == "drive" and timed
        if fn is None and not wanted:
            continue
        if fn is None:
            why = " (its exercise.toml says timed = true)" if name == "drive" else ""
            found.append(f"defines no {name}(){why}: add {_WHAT[name]}")
        elif not callable(fn):
            found.append(f"has {name} = {type(fn).__name__}, not a function: define {_WHAT[name]}")
        elif not _takes(fn, len(parameters)):
            found.append(f"{name}({_plain(fn)}) does not take {len(parameters)} argument"
                         f"{'s' if len(parameters) > 1 else ''} ({', '.join(parameters)}): define {_WHAT[name]}")
    return found

