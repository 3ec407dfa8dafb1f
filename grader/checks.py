"""Hidden checks: small functions of plain data, run in the grader's own process.

A chapter registers one function per check id of its ``chapter.toml``::

    checks = CheckRegistry()

    @checks("ex02_where", "piecewise.values")
    def piecewise_values(s, r, ctx):
        return numeric.compare_cases(s, r, "piecewise", ctx.inputs["cases"])

``s`` and ``r`` are :class:`Observations`: what the probes recorded in the student's
and in the reference's child process. A check returns the numbers behind a pass
(a dict, or a :class:`Pass` with a message), or raises :class:`Fail`. Reading an
observation raises :class:`NotAttempted` when the student's function raised
``NotImplementedError``, and :class:`Missing` when the child ended before recording
it; :func:`run_checks` turns these into statuses. An exception from the check itself
is the grader's error, never the student's failure.
"""
from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from grader.chapter import ExerciseSpec
from grader.i18n import T, Text
from grader.results import CheckResult

log = logging.getLogger("grader")


# ----------------------------------------------------------------- check outcomes
class Fail(Exception):
    """The student's code did something wrong; ``message`` says what was seen.

    ``hint`` says what to do about this very mistake:

    * ``None``: the check's own hint (``hint`` of its entry in ``chapter.toml``), for a
      check that fails in one way only;
    * a name: one of the check's named hints (its ``hints`` table in ``chapter.toml``),
      chosen by what the records show, e.g. ``"zero_sum_divides"``;
    * a :class:`Text`: a hint of the grader's own, e.g. about an exception that is not
      the mistake the check looks for (:func:`exception_hint`).
    """

    def __init__(self, message: Text | list, measured: dict | None = None, *, hint: str | Text | None = None):
        super().__init__(message)
        self.message = message
        self.measured = measured or {}
        self.hint = hint


class NotAttempted(Exception):
    """The function still raises ``NotImplementedError``."""

    def __init__(self, function: str):
        super().__init__(function)
        self.function = function


class Missing(Exception):
    """An observation never arrived: the child ended (crash, exit, timeout) first."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


class GraderError(Exception):
    """The grader could not judge (for example the reference run failed)."""


@dataclass
class Pass:
    message: Text | None = None
    measured: dict = field(default_factory=dict)


# ----------------------------------------------------------------- observations
@dataclass
class Observations:
    """What one child process recorded for one exercise, by key."""

    side: str  # "student" or "reference"
    data: dict[str, Any]
    module_file: str = ""

    def raw(self, key: str) -> Any:
        if key not in self.data:
            if self.side == "reference":
                raise GraderError(f"the reference run recorded no {key!r}")
            raise Missing(key)
        return self.data[key]

    def has(self, key: str) -> bool:
        return key in self.data

    def call(self, key: str) -> dict:
        """A recorded call; raises for ``NotImplementedError`` and missing functions."""
        obs = self.raw(key)
        status = obs.get("status")
        if self.side == "reference" and status != "ok":
            raise GraderError(f"the reference's call {key!r} ended with {status}: {obs.get('message')}")
        if status == "not_attempted":
            raise NotAttempted(obs.get("function", key))
        if status == "missing":
            raise Fail(T("call.missing", name=obs.get("function", key), file=self.module_file))
        return obs

    def result(self, key: str) -> Any:
        """The described return value of a call that must have returned normally."""
        obs = self.call(key)
        if obs["status"] == "raised":
            raise Fail(raised_text(obs), {"exception": obs.get("type")}, hint=exception_hint(obs))
        return obs["value"]

    def value(self, key: str) -> Any:
        """A plain recorded value (not a call)."""
        return self.raw(key)


def raised_text(obs: dict) -> Text:
    """A sentence for a call that raised, naming the student's line when known."""
    where = obs.get("where") or "?"
    kind = obs.get("kind_of_error")
    key = f"call.raised.{kind}" if kind else "call.raised"
    return T(key, function=obs.get("function", "?"), type=obs.get("type", "?"),
             message=obs.get("message", ""), where=where)


def exception_hint(record: dict) -> Text:
    """The hint for an exception: about that exception, never about another mistake.

    An error JAX raises for a known misuse (a Python ``if`` on a traced value, ``.item()``,
    ...) gets the hint for that misuse (the chapter may say where it teaches it, see
    :meth:`grader.chapter.Chapter.exception_hint`); any other exception (``NameError``,
    ``TypeError``, ...) gets "fix the line it names", with that line.
    """
    kind = record.get("kind_of_error")
    if kind:
        return T(f"hint.exception.{kind}", where=record.get("where") or "?")
    return T("hint.exception", type=record.get("type", "?"), where=record.get("where") or "?")


def _placed(hint: Any, spec: ExerciseSpec) -> Any:
    """An exception hint with the chapter's section for that kind of error filled in."""
    if isinstance(hint, Text) and hint.key.startswith("hint.") and "section" not in hint.args:
        kind = hint.key.rsplit(".", 1)[1] if hint.key.startswith("hint.exception.") else ""
        section = spec.error_sections.get(kind) or spec.error_sections.get("") or T("hint.section_unknown")
        return Text(hint.key, {**hint.args, "section": section})
    return hint


# ----------------------------------------------------------------- registry
CheckFn = Callable[[Observations, Observations, Any], Any]


class CheckRegistry:
    """The chapter's check functions, by exercise id and check id."""

    def __init__(self) -> None:
        self.functions: dict[tuple[str, str], CheckFn] = {}

    def __call__(self, exercise: str, check_id: str) -> Callable[[CheckFn], CheckFn]:
        def register(fn: CheckFn) -> CheckFn:
            key = (exercise, check_id)
            if key in self.functions:
                raise ValueError(f"check {exercise}/{check_id} registered twice")
            self.functions[key] = fn
            return fn

        return register

    def missing_for(self, exercises: tuple[ExerciseSpec, ...]) -> list[str]:
        """Check ids named by the chapter file that have no function, and the reverse."""
        declared = {(ex.id, c.id) for ex in exercises for c in ex.checks}
        problems = [f"{e}/{c}: no check function" for e, c in sorted(declared - set(self.functions))]
        problems += [f"{e}/{c}: not in chapter.toml" for e, c in sorted(set(self.functions) - declared)]
        return problems


@dataclass
class CheckContext:
    """What a check may know besides the observations: the hidden inputs and the seed."""

    exercise: ExerciseSpec
    inputs: dict
    seed: int


@dataclass
class Termination:
    """How the student's child process ended for this exercise."""

    kind: str | None = None  # None (normal), "timeout" or "error"
    reason: Text | None = None


def run_checks(
    spec: ExerciseSpec,
    registry: CheckRegistry,
    student: Observations,
    reference: Observations,
    ctx: CheckContext,
    termination: Termination,
) -> list[CheckResult]:
    """Judge every check of one exercise, in the chapter file's order."""
    results: dict[str, CheckResult] = {}
    for check in spec.checks:
        result = CheckResult(
            id=check.id, title=check.title, category=check.category, points=0.0,
            max_points=check.points, status="failed", hint=check.hint, hint_id="check",
        )
        results[check.id] = result
        blocking = [results[d] for d in check.depends if results[d].status != "passed"]
        if blocking:
            if all(b.status == "not_attempted" for b in blocking):
                result.status, result.message = "not_attempted", T("check.not_attempted_dep")
            else:
                result.status = "skipped"
                result.message = T("check.skipped", depends=[b.title for b in blocking])
            continue
        try:
            fn = registry.functions[(spec.id, check.id)]
            outcome = fn(student, reference, ctx)
        except Fail as failure:
            result.message, result.measured = failure.message, failure.measured
            result.hint, result.hint_id = check.resolve_hint(_placed(failure.hint, spec))
        except NotAttempted as na:
            result.status, result.message = "not_attempted", T("check.not_attempted", function=na.function)
        except Missing:  # the job ended first: the exercise's line says why; no hint about another mistake
            result.status = termination.kind or "error"
            result.message = termination.reason or T("check.missing")
            result.hint, result.hint_id = None, "none"
        except GraderError as exc:
            log.error("grader error in %s/%s: %s", spec.id, check.id, exc)
            result.status, result.message = "error", T("check.grader_error", detail=str(exc))
        except Exception as exc:  # a bug in the check: the grader's fault, not the student's
            log.error("check %s/%s crashed:\n%s", spec.id, check.id, traceback.format_exc())
            result.status = "error"
            result.message = T("check.grader_error", detail=f"{type(exc).__name__}: {exc}")
        else:
            if isinstance(outcome, Pass):
                result.message, result.measured = outcome.message or T("check.passed"), outcome.measured
            else:
                result.message, result.measured = T("check.passed"), outcome or {}
            result.status, result.points = "passed", check.points
    return list(results.values())
