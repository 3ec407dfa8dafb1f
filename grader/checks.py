"""Hidden checks: small functions of plain data, run in the grader's own process.

An exercise's code (``<chapter>/<exercise>/__init__.py``) declares each check with
:func:`check`, its id and what it depends on next to the function; its title, points
and hints are in the ``exercise.toml`` beside it::

    @check("piecewise.values", depends=("piecewise.traceable",))
    def piecewise_values(s, r, ctx):
        return numeric.compare_calls(s, r, cases, dtype="float32")

``s`` and ``r`` are :class:`Records`: what the probes recorded in the student's
and in the reference's child process, under the keys of the exercise's :class:`Keys`.
A check returns the numbers behind a pass (a dict, or a :class:`Pass` with a
message), or raises :class:`Fail`. Reading a record raises
:class:`NotAttempted` when the student's function raised ``NotImplementedError``, and
:class:`Missing` when the child ended before recording it; :mod:`grader.verdicts` turns
these into statuses. An exception from the check itself is the grader's error, never
the student's failure.
"""
from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Generic, Protocol, TypeVar

from grader.i18n import T, Text


# ----------------------------------------------------------------- check outcomes
class Fail(Exception):
    """The student's code did something wrong; ``message`` says what was seen.

    ``hint`` says what to do about this very mistake:

    * ``None``: the check's own hint (``hint`` of its entry in ``exercise.toml``), for a
      check that fails in one way only;
    * a name: one of the check's named hints (its ``[checks.named_hints]`` in ``exercise.toml``),
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
    """A record never arrived: the child ended (crash, exit, timeout) first."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


class GraderError(Exception):
    """The grader could not judge (for example the reference run failed)."""


@dataclass
class Pass:
    #: what the report says of the pass (``passed`` when ``None``)
    message: Text | None = None
    #: the numbers behind it
    measured: dict = field(default_factory=dict)


# ----------------------------------------------------------------- records
@dataclass
class Records:
    """What one child process recorded for one exercise, by key."""

    #: ``student`` or ``reference``
    side: str
    #: the records, by key
    data: dict[str, Any]
    #: the student's file, for messages (``ex02_where.py``)
    module_file: str = ""
    #: every key a check asked for (for the test that holds probes and checks to one set of keys)
    read: set[str] = field(default_factory=set)

    def raw(self, key: str) -> Any:
        self.read.add(key)
        if key not in self.data:
            if self.side == "reference":
                raise GraderError(f"the reference run recorded no {key!r}")
            raise Missing(key)
        return self.data[key]

    def has(self, key: str) -> bool:
        self.read.add(key)
        return key in self.data

    def made(self, key: str) -> bool:
        """Whether the probe recorded ``key``, not counted as read: for a record a probe makes only
        sometimes (ex05's median run made again), which a correct submission need not have."""
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


def place(record: dict, function: str | None = None) -> str | Text:
    """Where a recorded exception happened, as the student can find it: the line of their file
    (``file:line``), else the call that raised inside JAX, and where that function is defined
    when the child could tell (the ``defined`` of :meth:`grader.child.probe.ProbeContext.invoke`)."""
    if record.get("where"):
        return record["where"]
    function = function or record.get("function") or ""
    if record.get("defined"):
        return T("place.inside_jax_defined", function=function, where=record["defined"])
    return T("place.inside_jax", function=function)


def raised_text(obs: dict) -> Text:
    """A sentence for a call that raised, naming the student's line when known."""
    kind = obs.get("kind_of_error")
    key = f"call.raised.{kind}" if kind else "call.raised"
    return T(key, function=obs.get("function", ""), type=obs.get("type", ""),
             message=obs.get("message", ""), where=place(obs))


def exception_hint(record: dict) -> Text:
    """The hint for an exception: about that exception, never about another mistake.

    An error JAX raises for a known misuse (a Python ``if`` on a traced value, ``.item()``,
    ...) gets the hint for that misuse (the chapter may say where it teaches it, see
    :meth:`grader.chapter.Chapter.exception_hint`); any other exception (``NameError``,
    ``TypeError``, ...) gets "fix the line it names", with that line.
    """
    kind = record.get("kind_of_error")
    if kind:
        return T(f"hint.exception.{kind}", where=place(record))
    return T("hint.exception", type=record.get("type", ""), where=place(record))


# ----------------------------------------------------------------- declaring checks
CheckFn = Callable[["Records", "Records", "CheckContext"], "dict | Pass | None"]


def check(check_id: str, *, depends: tuple[str, ...] = ()) -> Callable[[CheckFn], CheckFn]:
    """Declare ``fn`` as the check ``check_id`` of its exercise.

    ``depends``: checks of the same exercise that must pass first (else this one is
    skipped, saying which). The chapter finds the declared checks on the exercise's
    code; the id must have an entry in its ``exercise.toml`` (and every entry a
    function), which :func:`grader.exercise_folder.read_exercise` enforces.
    """

    def declare(fn: CheckFn) -> CheckFn:
        fn.check_id = check_id  # type: ignore[attr-defined]
        fn.check_depends = tuple(depends)  # type: ignore[attr-defined]
        return fn

    return declare


def declared_checks(module: ModuleType) -> dict[str, CheckFn]:
    """The checks a module declares with :func:`check`, by id (in the order they are defined)."""
    found: dict[str, CheckFn] = {}
    for value in vars(module).values():
        check_id = getattr(value, "check_id", None)
        if callable(value) and isinstance(check_id, str):
            if check_id in found and found[check_id] is not value:
                raise ValueError(f"{module.__name__}: check {check_id!r} is declared twice")
            found[check_id] = value
    return found


# ----------------------------------------------------------------- record keys
class Key:
    """The name of one kind of record, e.g. ``Key("{name}/values/{case}")``.

    A probe records under ``key(name="piecewise", case="mixed")`` and a check reads the
    same call, so a key cannot be spelt two ways; every field must be given, and only
    those, and no field holds a ``/``. :meth:`matches` tells whether a recorded key is
    one of this kind.
    """

    def __init__(self, template: str):
        self.template = template
        self.fields = tuple(name for _, name, _, _ in string.Formatter().parse(template) if name)
        pattern = "".join(re.escape(literal) + (f"(?P<{name}>[^/]+)" if name else "")
                          for literal, name, _, _ in string.Formatter().parse(template))
        self._regex = re.compile(f"^{pattern}$")

    def __call__(self, **values: Any) -> str:
        if set(values) != set(self.fields):
            raise TypeError(f"key {self.template!r} takes {', '.join(self.fields) or 'no field'}, "
                            f"not {', '.join(sorted(values)) or 'none'}")
        bad = [name for name, value in values.items() if "/" in str(value)]
        if bad:
            raise ValueError(f"key {self.template!r}: a field holds no '/', but {', '.join(bad)} does")
        return self.template.format(**values)

    def matches(self, key: str) -> bool:
        return bool(self._regex.match(key))

    def __repr__(self) -> str:
        return f"Key({self.template!r})"


class Keys:
    """An exercise's record keys, by name: ``KEYS.value(name=..., case=...)``.

    Declared once at the top of the exercise package; its probe and its checks both
    build keys from here. :meth:`kind_of` names the key a recorded string belongs to
    (a test holds every recorded key to one of them, and every one to a reader).

    ``reference``: the names of the keys the checks read from the reference's run (the
    values to compare with, usually). The reference's job then records only those and
    skips the rest of the probe's work (compile windows, traces, calls whose records no
    check reads from it); ``None``: it records everything, as the student's job does.

    ``reference_only``: the names of the keys the checks read from the reference's run
    alone (what the grader's own code computes there, to compare the student's with):
    the student's job skips them and their work (:meth:`for_student`).
    """

    def __init__(self, *, reference: tuple[str, ...] | None = None, reference_only: tuple[str, ...] = (),
                 **templates: str):
        self.keys = {name: Key(template) for name, template in templates.items()}
        for word, names in (("reference", reference or ()), ("reference_only", reference_only)):
            unknown = sorted(set(names) - set(self.keys))
            if unknown:
                raise ValueError(f"Keys({word}=...) names keys it does not declare: {', '.join(unknown)}")
        if reference is not None and not set(reference_only) <= set(reference):
            raise ValueError("Keys(reference_only=...) names keys the reference does not record")
        self.reference = tuple(reference) if reference is not None else None
        self.reference_only = tuple(reference_only)

    def for_reference(self, key: str) -> bool:
        """Whether the reference's job records ``key`` (every key, unless ``reference`` was given)."""
        return self.reference is None or self.kind_of(key) in self.reference

    def for_student(self, key: str) -> bool:
        """Whether the student's job records ``key`` (every key but those of ``reference_only``)."""
        return self.kind_of(key) not in self.reference_only

    def __getattr__(self, name: str) -> Key:
        try:
            return self.__dict__["keys"][name]
        except KeyError:
            raise AttributeError(f"no record key named {name!r}") from None

    def kind_of(self, key: str) -> str | None:
        matching = [name for name, k in self.keys.items() if k.matches(key)]
        return matching[0] if len(matching) == 1 else None


#: records the grader adds itself, beside what the probe recorded: how each of the
#: student's module-level names looked (``names/<name>``), when each record arrived
#: (``grader/arrivals``) and the timing driver's results (``grader/timing``)
NAMES = Key("names/{name}")
ARRIVALS = "grader/arrivals"
TIMING = "grader/timing"


class ExerciseSettings(Protocol):
    """What a check may read of its exercise (:class:`grader.exercise_folder.ExerciseSpec` is one: named here
    as a Protocol, so that this layer names no chapter's module, not even for a type)."""

    id: str
    #: the share of the reference's gain a timed check asks of a student's speed-up
    speedup_fraction: float
    #: a course release's bars for the speed-ups, by function (its preview has no reference to time)
    release_speedup_bar: dict[str, float]
    #: the exercise's jobs dispatch synchronously on the CPU
    sync_cpu_dispatch: bool


#: an exercise's hidden inputs as its checks read them: its ``Inputs`` TypedDict (``CheckContext[Inputs]``)
InputsT = TypeVar("InputsT")


@dataclass
class CheckContext(Generic[InputsT]):
    """What a check may know besides the records: the exercise, the hidden inputs, the seed.

    Generic in the hidden inputs' type: a check annotated ``ctx: CheckContext[Inputs]`` (its exercise's
    ``Inputs`` TypedDict) reads ``ctx.inputs["cases"]`` typed, and the type checker names a misspelt key."""

    #: the exercise (its settings, e.g. ``speedup_fraction``): an :class:`~grader.exercise_folder.ExerciseSpec`
    exercise: ExerciseSettings
    #: the hidden inputs both sides received (what the exercise's ``inputs(rng)`` drew)
    inputs: InputsT
    #: the run's seed
    seed: int
    #: a course release's preview: the reference's records stand in for its run (no
    #: reference process; a speed-up bar comes from the chapter, see :mod:`grader.preview`)
    preview: bool = False
    #: the status of a check that failed only because a function is not defined:
    #: ``not_attempted`` for a notebook (the function's cell was not run), else ``failed``
    missing: str = "failed"
    #: the backend the student's values were computed on (``cpu``, ``tpu``, ``gpu``; ``None``: not known):
    #: a check of values computed on the device widens its tolerance to the device's float32
    #: (:func:`grader.primitives.numeric.on_device`)
    device: str | None = None
