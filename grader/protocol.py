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
from typing import Any, TypeVar

#: the key under which a message carries its word
OP = "op"


class ProtocolError(Exception):
    """A peer sent something that is not a well-formed message (a word it may not say included)."""


class ToWorker(StrEnum):
    """``grade batch`` to a batch worker process, one JSON line each on its standard input."""

    #: the class's reference outcomes, shipped as data once per worker and seed: ``reference``
    REFERENCE = "reference"
    #: start the hosts of this chapter and sandbox now, before the first student comes (no ``submission``)
    WARM = "warm"
    #: grade one packed student (``submission``, ``name``, ``seed``, ``exercises``, ``options``, ...)
    GRADE = "grade"


class ToTemplate(StrEnum):
    """The grader to a host template (:class:`grader.runner.hosts.HostTemplate`), on its control socket."""

    #: fork a host named ``host``, whose control socket travels with the message
    SPAWN = "spawn"
    #: kill the host ``host`` and its jobs
    KILL = "kill"
    #: end, with every host forked
    EXIT = "exit"


class FromTemplate(StrEnum):
    """A host template to the grader."""

    #: imported and listening: ``versions``, ``pid``, ``template``
    READY = "ready"
    #: forked the host ``host`` (its ``pid``)
    SPAWNED = "spawned"
    #: the host ``host`` has ended
    HOST_EXITED = "host_exited"


class ToHost(StrEnum):
    """The grader to a host (:class:`grader.runner.hosts.HostProcess`), on its control socket."""

    #: fork the job ``job`` of ``exercise`` (its socket and output file travel with the message)
    FORK = "fork"
    #: write where the job ``job`` is now (it ran past its limit)
    DUMP = "dump"
    #: kill the job ``job``
    KILL = "kill"
    #: end, killing every job
    EXIT = "exit"


class FromHost(StrEnum):
    """A host to the grader."""

    #: imported and listening: ``versions``, ``pid``
    READY = "ready"
    #: a host the template forked could not be isolated (``error``): it never serves
    FAILED = "failed"
    #: the job ``job`` is forked (its ``pid``)
    STARTED = "started"
    #: the job ``job`` has ended (its ``status``, its peak memory)
    EXITED = "exited"


class ToJob(StrEnum):
    """The grader to a job, on the job's socket."""

    #: the hidden inputs, only after the student's module is imported: ``inputs``
    INPUTS = "inputs"
    #: the answer to a ``mark``: what the job does next starts after the grader's stamp
    GO = "go"
    #: a timed exercise's probe: time ``case`` (``reps``, ``batch_baseline``, ``batch_candidate``)
    TIME = "time"
    #: a timed exercise's probe: answer ``pong`` (is it in step?)
    PING = "ping"
    #: a timed exercise's probe: stop serving, end the job
    STOP = "stop"


class FromJob(StrEnum):
    """A job to the grader."""

    #: JAX's backend started, the limits set: ``env``, ``memory``
    HELLO = "hello"
    #: the student's module imported: ``names`` (how each module-level name looked), ``skipped``
    IMPORTED = "imported"
    #: the student's module raised on import: ``type``, ``message``, ``where``, ...
    IMPORT_ERROR = "import_error"
    #: the grader's instruments as the job found them after a ``stage``: ``changed``, ``compiles_total``
    INTEGRITY = "integrity"
    #: one record of the probe's: ``key``, ``value``
    RECORD = "obs"
    #: a moment on the grader's clock under ``key``: the job waits for ``go``
    MARK = "mark"
    #: the probe calls the student's ``function`` now (for a live display)
    CALLING = "calling"
    #: the probe itself failed (the grader's bug): ``type``, ``traceback``
    PROBE_ERROR = "probe_error"
    #: the probe ended
    DONE = "done"
    #: a timed exercise's probe: the figures of a ``time`` request, or its ``error``
    TIMED = "timed"
    #: a timed exercise's probe: the answer to ``ping``
    PONG = "pong"


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
        return words(said)
    except ValueError:
        known = ", ".join(w.value for w in words)
        raise ProtocolError(f"{words.__name__}: unknown word {said!r} (known: {known})") from None


def fields(received: dict) -> dict:
    """A message's fields, without its word."""
    return {k: v for k, v in received.items() if k != OP}
