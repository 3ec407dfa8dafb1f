"""What each word of the grader's process boundaries carries (:mod:`grader.protocol`), as TypedDicts.

Every boundary's conversation is typed per word (a job's first, then the hosts', the template's, a batch
worker's): the fields a message of each word carries (its ``op`` aside). :data:`grader.protocol.FIELDS` maps
each word to its TypedDict; :func:`grader.protocol.word_of` refuses a message that lacks a field its word
requires (a ProtocolError naming the word and the field, never a KeyError later), and
tests/test_protocol.py reads every ``message(...)`` the code sends, so a sender that forgets a required
field or adds an undeclared one fails there. A type checker reads them too (``CallRecord``: a probe's
record of a call).
"""
from __future__ import annotations

from typing import Any, TypedDict


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


class HelloServiceFields(TypedDict):
    """``ToService.HELLO``: the grading's settings, as a digest (the service serves one set of them)."""

    key: str


class SpawnHostFields(TypedDict):
    """``ToService.SPAWN``: fork a host of ``side`` (``student`` or ``reference``) named ``host``."""

    host: str
    side: str


class ServiceReadyFields(TypedDict):
    """``FromService.READY``: where a grading's modules go (``stage``: a folder of the grading's own is made
    under it) and the scratch folders of the hosts it forks, by side."""

    stage: str
    student_scratch: str
    reference_scratch: str
    pid: int


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


