"""The words the grader's processes say to each other, each declared once, here.

A message between two of the grader's processes is a JSON object whose ``op`` is one
word of the boundary it crosses, in the direction it goes; both ends take the word from
here (``message(ToJob.INPUTS, inputs=...)`` to send, ``word_of(message, FromJob)`` to
read), as both ends of a record take its key from an exercise's ``Keys``. A misspelt word
is an ``AttributeError`` where it is written, and a word the receiving end does not know
is a :class:`ProtocolError` the moment it arrives, never a wait that ends in a time-out::

    grade batch ──JSON lines──▶ batch worker        ToWorker             (grader.batch.worker)
    grading ──control socket──▶ host template       ToTemplate / FromTemplate (grader.child.template)
    grading ──control socket──▶ host                ToHost / FromHost    (grader.child.host)
    grading ───job socket─────▶ job                 ToJob / FromJob      (grader.child.job, .probe)

The batch worker's answers (one JSON line a student) carry no word: it says one thing.
A message is framed and encoded by :mod:`grader.wire`; :class:`ProtocolError` is its
error too.
"""
from __future__ import annotations

from enum import StrEnum
from typing import Any, TypedDict, TypeVar

#: the key under which a message carries its word
OP = "op"


class ProtocolError(Exception):
    """A peer sent something that is not a well-formed message (a word it may not say included)."""


class ToWorker(StrEnum):
    """``grade batch`` to a batch worker process, one JSON line each on its standard input."""

    REFERENCE = "reference"  #: the class's reference outcomes, shipped as data once per worker and seed: ``reference``
    WARM = "warm"  #: start the hosts for this chapter and sandbox now, before a student comes
    GRADE = "grade"  #: grade one packed student (``submission``, ``name``, ``seed``, ``exercises``, ``options``, ...)


class ToTemplate(StrEnum):
    """The grader to a host template (:class:`grader.runner.host_template.HostTemplate`), on its control socket."""

    SPAWN = "spawn"  #: fork a host named ``host``, whose control socket travels with the message
    KILL = "kill"  #: kill the host ``host`` and its jobs
    EXIT = "exit"  #: end, with every host forked


class FromTemplate(StrEnum):
    """A host template to the grader."""

    READY = "ready"  #: imported and listening: ``versions``, ``pid``, ``template``
    SPAWNED = "spawned"  #: forked the host ``host`` (its ``pid``)
    HOST_EXITED = "host_exited"  #: the host ``host`` has ended


class ToHost(StrEnum):
    """The grader to a host (:class:`grader.runner.host_handles.HostProcess`), on its control socket."""

    FORK = "fork"  #: fork the job ``job`` of ``exercise`` (its socket and output file travel with the message)
    DUMP = "dump"  #: write where the job ``job`` is now (it ran past its limit)
    KILL = "kill"  #: kill the job ``job``
    CORES = "cores"  #: run on the CPUs ``cores``, itself and every job but those named in ``apart``
    EXIT = "exit"  #: end, killing every job


class FromHost(StrEnum):
    """A host to the grader."""

    READY = "ready"  #: imported and listening: ``versions``, ``pid``
    FAILED = "failed"  #: a host the template forked could not be isolated (``error``): it never serves
    STARTED = "started"  #: the job ``job`` is forked (its ``pid``)
    EXITED = "exited"  #: the job ``job`` has ended (its ``status``, its peak memory)
    CORES = "cores"  #: the answer to ``cores``: ``ok`` when every thread was moved


class ToJob(StrEnum):
    """The grader to a job, on the job's socket."""

    #: the hidden inputs, only after the student's module is imported: ``inputs``; to a reference job,
    #: ``ahead`` too (the inputs of seeds drawn ahead, :mod:`grader.ahead`)
    INPUTS = "inputs"
    GO = "go"  #: the answer to a ``mark``: what the job does next starts after the grader's stamp
    TIME = "time"  #: a timed exercise's probe: time ``case`` (``reps``, ``batch_baseline``, ``batch_candidate``)
    PING = "ping"  #: a timed exercise's probe: answer ``pong`` (is it in step?)
    STOP = "stop"  #: a timed exercise's probe: stop serving, end the job
    COMPILE = "compile"  #: to the class's compiler (:mod:`grader.child.compiler`): compile ``module`` with ``options``
    #: to a job that asked: the class's compiler wrote the program under ``key`` (``None``: compile it
    #: yourself)
    COMPILED = "compiled"


class FromJob(StrEnum):
    """A job to the grader."""

    HELLO = "hello"  #: JAX's backend started, the limits set: ``env``, ``memory``
    NO_BACKEND = "no_backend"  #: JAX's backend could not start (the accelerator held by another process): ``error``
    IMPORTED = "imported"  #: the student's module imported: ``names`` (how each module-level name looked), ``skipped``
    IMPORT_ERROR = "import_error"  #: the student's module raised on import: ``type``, ``message``, ``where``, ...
    INTEGRITY = "integrity"  #: the instruments as found after a ``stage``: ``changed``, ``compiles_total``
    RECORD = "obs"  #: one record of the probe's: ``key``, ``value``
    MARK = "mark"  #: a moment on the grader's clock under ``key``: the job waits for ``go``
    CALLING = "calling"  #: the probe calls the student's ``function`` now (for a live display)
    PROBE_ERROR = "probe_error"  #: the probe itself failed (the grader's bug): ``type``, ``traceback``
    AHEAD = "ahead"  #: a reference job: its probe's ``records`` on the inputs of the seed drawn ahead at ``index``
    DONE = "done"  #: the probe ended
    TIMED = "timed"  #: a timed exercise's probe: the figures of a ``time`` request, or its ``error``
    PONG = "pong"  #: a timed exercise's probe: the answer to ``ping``
    COMPILE = "compile"  #: a batch student's job: have the class's compiler compile ``module`` with ``options``
    COMPILED = "compiled"  #: the class's compiler: the program is in the class's cache under ``key`` (or ``error``)
    PROGRAMS = "programs"  #: a student's job, after its probe: what each function it called traced to (``functions``)


# ------------------------------------------------------------------ what each word carries
# Every boundary's conversation, typed per word (a job's first, then the hosts', the template's, a batch
# worker's): the fields a message of each word carries (its ``op`` aside), as
# TypedDicts. :func:`word_of` refuses a message that lacks a field its word requires (a ProtocolError naming
# the word and the field, never a KeyError later), and tests/test_protocol.py reads every ``message(...)``
# the code sends, so a sender that forgets a required field or adds an undeclared one fails there.


class _CallRecordRequired(TypedDict):
    #: ``ok`` (returned: ``value``), ``raised`` (``type``, ``message``, ``where``, ...), ``not_attempted`` (the
    #: stub's ``NotImplementedError``), ``missing`` (the module does not define it)
    status: str
    #: the function's name as feedback says it
    function: str


class CallRecord(_CallRecordRequired, total=False):
    """The record of one call of a student's function, the ``value`` of a ``FromJob.RECORD`` that a probe's
    ``ctx.call`` made (:class:`grader.child.probe.Called`)."""

    #: what it returned, described as plain data (:func:`grader.child.probe.describe`)
    value: dict
    #: what it raised: the exception's class name, its text, the kind of JAX misuse, the submission's line
    type: str
    message: str
    kind_of_error: str | None
    where: str | None
    #: the built-in exception classes it is an instance of (a ``ValueError`` subclass is a ``ValueError``)
    is_a: list[str]
    #: where the function is defined, when it raised inside JAX rather than on a line of the submission
    defined: str | None


class _InputsFieldsRequired(TypedDict):
    inputs: dict


class InputsFields(_InputsFieldsRequired, total=False):
    ahead: list[dict]
    part: list[int]


class TimeFields(TypedDict):
    case: str
    reps: int
    batch_baseline: int
    batch_candidate: int


class CompileFields(TypedDict):
    module: Any
    options: Any


class _CompiledFieldsRequired(TypedDict):
    key: str | None


class CompiledFields(_CompiledFieldsRequired, total=False):
    error: str


class _HelloFieldsRequired(TypedDict):
    env: dict
    memory: Any


class HelloFields(_HelloFieldsRequired, total=False):
    cpu_s: float


class _NoBackendFieldsRequired(TypedDict):
    error: str


class NoBackendFields(_NoBackendFieldsRequired, total=False):
    cpu_s: float


class _ImportedFieldsRequired(TypedDict):
    names: dict
    skipped: list


class ImportedFields(_ImportedFieldsRequired, total=False):
    cpu_s: float


class _ImportErrorFieldsRequired(TypedDict):
    type: str
    message: str


class ImportErrorFields(_ImportErrorFieldsRequired, total=False):
    where: str | None


class _IntegrityFieldsRequired(TypedDict):
    stage: str
    changed: Any


class IntegrityFields(_IntegrityFieldsRequired, total=False):
    compiles_total: int


class RecordFields(TypedDict):
    key: str
    value: Any


class MarkFields(TypedDict):
    key: str


class CallingFields(TypedDict):
    function: str


class ProbeErrorFields(TypedDict):
    type: str
    traceback: str


class AheadFields(TypedDict):
    index: int
    records: dict


class DoneFields(TypedDict, total=False):
    work: dict


class TimedFields(TypedDict, total=False):
    """A ``time`` request's figures (``baseline``, ``candidate``, ...), or its ``error``."""

    error: str


class ProgramsFields(TypedDict):
    """``FromJob.PROGRAMS``: by function, ``{"jaxpr": text}`` or ``{"error": why}`` (:mod:`grader.child.programs`)."""

    functions: dict[str, dict[str, str]]


class Empty(TypedDict):
    """A word that carries nothing but itself."""


# ------------------------------------------------------------------ the hosts', the template's and a worker's words
class _ForkFieldsRequired(TypedDict):
    #: the job's name, its exercise, the exercise's package and the modules a job imports
    job: str
    exercise: str
    package: str
    chapter_modules: list[str]
    student_module: str
    module_dir: str
    #: the student's functions the probe calls
    functions: list[str]
    #: the job's own folder, its limits (``grader.runner.job_sessions.Limits.for_job``), its exercise's options
    workdir: str
    limits: dict
    options: dict
    #: ``student`` or ``reference``
    side: str


class ForkFields(_ForkFieldsRequired, total=False):
    """``ToHost.FORK``: a job to fork (its socket and output file travel with the message)."""

    #: a job's own uid and group, and the grading's group (per-job uids)
    uid: int
    gid: int
    groups: list[int]


class JobNamed(TypedDict):
    """A word about one job: ``ToHost.DUMP``, ``ToHost.KILL``."""

    job: str


class _CoresFieldsRequired(TypedDict):
    cores: list[int]


class CoresFields(_CoresFieldsRequired, total=False):
    """``ToHost.CORES``: the CPUs the host and its jobs run on; the jobs ``apart`` keep theirs."""

    apart: list[str]


class _ReadyFieldsRequired(TypedDict):
    #: the versions the host imported (JAX, jaxlib, Python) and its pid
    versions: dict
    pid: int


class ReadyFields(_ReadyFieldsRequired, total=False):
    """``FromHost.READY``, ``FromTemplate.READY``: imported and listening."""

    #: said by the template that forks hosts
    template: bool


class FailedFields(TypedDict):
    """``FromHost.FAILED``: a forked host could not be isolated."""

    error: str


class StartedFields(TypedDict):
    """``FromHost.STARTED``: the job is forked."""

    job: str
    pid: int


class _ExitedFieldsRequired(TypedDict):
    job: str
    #: its peak memory and the CPU seconds it used
    peak_rss_kb: int
    cpu_s: float


class ExitedFields(_ExitedFieldsRequired, total=False):
    """``FromHost.EXITED``: the job has ended, by a ``signal`` or with an exit ``code``."""

    signal: int
    code: int


class MovedFields(TypedDict):
    """``FromHost.CORES``: the answer to ``cores`` (``job`` is ``cores``), ``ok`` when every thread moved."""

    job: str
    ok: bool


class HostNamed(TypedDict):
    """A word about one host the template forks: ``ToTemplate.SPAWN``, ``ToTemplate.KILL``,
    ``FromTemplate.HOST_EXITED``."""

    host: str


class SpawnedFields(TypedDict):
    """``FromTemplate.SPAWNED``: the host is forked."""

    host: str
    pid: int


class ReferenceFields(TypedDict):
    """``ToWorker.REFERENCE``: the class's reference outcomes (``grader.batch.reference.compute``)."""

    reference: dict


class _WarmFieldsRequired(TypedDict):
    chapter: str
    #: the batch's settings (``grader.batch.run._settings``): the sandbox, the limits
    options: dict


class WarmFields(_WarmFieldsRequired, total=False):
    """``ToWorker.WARM``: start the hosts for this chapter and sandbox now (a student's payload, less the
    submission)."""

    name: str
    display: str
    exercises: list[str]
    seed: int
    lang: str
    #: the CPUs of the batch worker's slot, asked of the machine's (:mod:`grader.batch.cpus`)
    slots: int | None
    reference: dict


class _GradeFieldsRequired(TypedDict):
    #: the student's key and the name the class summary shows
    name: str
    display: str
    #: the packed submission (:func:`grader.batch.roster.pack`)
    submission: dict
    chapter: str
    exercises: list[str]
    seed: int
    lang: str
    options: dict


class GradeFields(_GradeFieldsRequired, total=False):
    """``ToWorker.GRADE``: grade one packed student."""

    slots: int | None
    reference: dict


#: what each word of each boundary carries, by direction (a word's value may be another direction's too:
#: ``compiled`` is said both ways, ``ready`` by a host and by the template)
FIELDS: dict[type[StrEnum], dict[str, type]] = {
    ToWorker: {ToWorker.REFERENCE: ReferenceFields, ToWorker.WARM: WarmFields, ToWorker.GRADE: GradeFields},
    ToTemplate: {ToTemplate.SPAWN: HostNamed, ToTemplate.KILL: HostNamed, ToTemplate.EXIT: Empty},
    FromTemplate: {FromTemplate.READY: ReadyFields, FromTemplate.SPAWNED: SpawnedFields,
                   FromTemplate.HOST_EXITED: HostNamed},
    ToHost: {ToHost.FORK: ForkFields, ToHost.DUMP: JobNamed, ToHost.KILL: JobNamed, ToHost.CORES: CoresFields,
             ToHost.EXIT: Empty},
    FromHost: {FromHost.READY: ReadyFields, FromHost.FAILED: FailedFields, FromHost.STARTED: StartedFields,
               FromHost.EXITED: ExitedFields, FromHost.CORES: MovedFields},
    ToJob: {ToJob.INPUTS: InputsFields, ToJob.GO: Empty, ToJob.TIME: TimeFields, ToJob.PING: Empty,
            ToJob.STOP: Empty, ToJob.COMPILE: CompileFields, ToJob.COMPILED: CompiledFields},
    FromJob: {FromJob.HELLO: HelloFields, FromJob.NO_BACKEND: NoBackendFields, FromJob.IMPORTED: ImportedFields,
              FromJob.IMPORT_ERROR: ImportErrorFields, FromJob.INTEGRITY: IntegrityFields,
              FromJob.RECORD: RecordFields, FromJob.MARK: MarkFields, FromJob.CALLING: CallingFields,
              FromJob.PROBE_ERROR: ProbeErrorFields, FromJob.AHEAD: AheadFields, FromJob.DONE: DoneFields,
              FromJob.TIMED: TimedFields, FromJob.PONG: Empty, FromJob.COMPILE: CompileFields,
              FromJob.COMPILED: CompiledFields, FromJob.PROGRAMS: ProgramsFields},
}


Word = TypeVar("Word", bound=StrEnum)

#: every boundary's words, in both directions
BOUNDARIES: tuple[type[StrEnum], ...] = (ToWorker, ToTemplate, FromTemplate, ToHost, FromHost, ToJob, FromJob)


def message(word: StrEnum, **fields: Any) -> dict:
    """A message saying ``word`` (a member of one of the boundaries' words) with ``fields``."""
    if not isinstance(word, StrEnum) or type(word) not in BOUNDARIES:
        raise TypeError(f"a message's word is one of grader.protocol's, not {word!r}")
    if OP in fields:
        raise TypeError(f"a message's word is given once, not again as a field {OP!r}")
    return {OP: word, **fields}


def word_of(received: dict, words: type[Word]) -> Word:
    """The word of a message received, one of ``words``; :class:`ProtocolError` names any other."""
    said = received.get(OP) if isinstance(received, dict) else None
    try:
        word = words(str(said) if said is not None else "")
    except ValueError:
        known = ", ".join(w.value for w in words)
        raise ProtocolError(f"{words.__name__}: unknown word {said!r} (known: {known})") from None
    declared = FIELDS.get(words, {}).get(word)
    if declared is not None:
        missing = sorted(set(getattr(declared, "__required_keys__", ())) - set(received))
        if missing:
            raise ProtocolError(f"{words.__name__}.{word.name} without {', '.join(missing)}")
    return word


def fields(received: dict) -> dict:
    """A message's fields, without its word."""
    return {k: v for k, v in received.items() if k != OP}
