"""The words the grader's processes say to each other, each declared once, here.

A message between two of the grader's processes is a JSON object whose ``op`` is one
word of the boundary it crosses, in the direction it goes; both ends take the word from
here (``message(ToJob.INPUTS, inputs=...)`` to send, ``word_of(message, FromJob)`` to
read), as both ends of a record take its key from an exercise's ``Keys``. A misspelt word
is an ``AttributeError`` where it is written, and a word the receiving end does not know
is a :class:`ProtocolError` the moment it arrives, never a wait that ends in a time-out::

    grade batch ──JSON lines──▶ batch worker        ToWorker             (grader.batch.worker)
    grading ──control socket──▶ host template       ToTemplate / FromTemplate (grader.child.template)
    grading ──unix socket─────▶ warm service        ToService / FromService (grader.runner.service_daemon)
    grading ──control socket──▶ host                ToHost / FromHost    (grader.child.host)
    grading ───job socket─────▶ job                 ToJob / FromJob      (grader.child.job, .probe)

The batch worker's answers (one JSON line a student) carry no word: it says one thing.
A message is framed and encoded by :mod:`grader.wire`; :class:`ProtocolError` is its
error too. What each word carries is :mod:`grader.word_fields`' (:data:`FIELDS`).
"""
from __future__ import annotations

from enum import StrEnum
from typing import Any, TypeVar

from grader.word_fields import (
    InputsFields,
    TimeFields,
    CompileFields,
    CompiledFields,
    HelloFields,
    NoBackendFields,
    ImportedFields,
    ImportErrorFields,
    IntegrityFields,
    RecordFields,
    MarkFields,
    CallingFields,
    ProbeErrorFields,
    AheadFields,
    DoneFields,
    TimedFields,
    ProgramsFields,
    Empty,
    ForkFields,
    JobNamed,
    CoresFields,
    ReadyFields,
    FailedFields,
    StartedFields,
    ExitedFields,
    MovedFields,
    HostNamed,
    SpawnedFields,
    ReferenceFields,
    WarmFields,
    GradeFields,
    HelloServiceFields,
    SpawnHostFields,
    ServiceReadyFields,
)

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


class ToService(StrEnum):
    """A grading to the warm service of its user (:mod:`grader.runner.service_daemon`), on its unix socket."""

    HELLO = "hello"  #: the grading's ``key`` (its settings): answered ``ready``, ``busy``, ``other`` or ``failed``
    SPAWN = "spawn"  #: fork a host of ``side`` named ``host``, whose control socket travels with the message
    KILL = "kill"  #: kill the host ``host`` and its jobs
    RELEASE = "release"  #: the grading is over: its hosts ended, what they left emptied; answered ``released``
    EXIT = "exit"  #: end now


class FromService(StrEnum):
    """The warm service to a grading."""

    READY = "ready"  #: its templates are ready: where a grading's modules and its hosts' folders lie
    BUSY = "busy"  #: another grading holds it (this one starts hosts of its own)
    OTHER = "other"  #: it serves other settings (the grading starts a service of its own in its place)
    FAILED = "failed"  #: it cannot serve (``error``), or a host could not be forked
    SPAWNED = "spawned"  #: forked the host ``host`` (its ``pid``)
    HOST_EXITED = "host_exited"  #: the host ``host`` has ended
    RELEASED = "released"  #: the grading's hosts are gone, what they left is emptied


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


#: what each word of each boundary carries, by direction (a word's value may be another direction's too:
#: ``compiled`` is said both ways, ``ready`` by a host and by the template)
FIELDS: dict[type[StrEnum], dict[str, type]] = {
    ToWorker: {ToWorker.REFERENCE: ReferenceFields, ToWorker.WARM: WarmFields, ToWorker.GRADE: GradeFields},
    ToTemplate: {ToTemplate.SPAWN: HostNamed, ToTemplate.KILL: HostNamed, ToTemplate.EXIT: Empty},
    FromTemplate: {FromTemplate.READY: ReadyFields, FromTemplate.SPAWNED: SpawnedFields,
                   FromTemplate.HOST_EXITED: HostNamed},
    ToService: {ToService.HELLO: HelloServiceFields, ToService.SPAWN: SpawnHostFields, ToService.KILL: HostNamed,
                ToService.RELEASE: Empty, ToService.EXIT: Empty},
    FromService: {FromService.READY: ServiceReadyFields, FromService.BUSY: Empty, FromService.OTHER: Empty,
                  FromService.FAILED: FailedFields, FromService.SPAWNED: SpawnedFields,
                  FromService.HOST_EXITED: HostNamed, FromService.RELEASED: Empty},
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
BOUNDARIES: tuple[type[StrEnum], ...] = (ToWorker, ToTemplate, FromTemplate, ToService, FromService, ToHost, FromHost,
                                         ToJob, FromJob)


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
