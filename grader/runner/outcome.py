"""How one job ended, and what it recorded before that: :class:`JobOutcome` (made by
:class:`grader.runner.job_sessions.JobSession`, judged by :mod:`grader.verdicts`, kept by
:class:`grader.outcomes.ReferenceCache`)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterable


@dataclass
class JobOutcome:
    """How one job ended, and what it recorded before that."""

    #: how the job ended: ``done``, ``import_error``, ``timeout``, ``crashed``, ``probe_error``,
    #: ``protocol_error``, ``disk_limit``, ``host_lost``, ``abandoned`` (the grader no longer
    #: needed it), ``cancelled`` (grading was interrupted) or ``not_started``
    end: str
    #: ``student`` or ``reference``: whose job it was
    side: str = ""
    #: what the probe recorded, by key (the exercise package's ``KEYS``)
    records: dict[str, Any] = field(default_factory=dict)
    #: how each of the exercise's module-level names looked after the import
    names: dict[str, dict] = field(default_factory=dict)
    #: a notebook's statements that raised when its module was imported, each skipped
    #: (``where``, ``type``, ``message``: :func:`grader.child.job.import_notebook`)
    skipped: list[dict] = field(default_factory=list)
    #: the job's environment (Python, JAX, backend, device), from its first message
    env: dict | None = None
    #: more on the end: an import error's type, message and place; a hang's phase,
    #: function and line (``hung``); the exit code or signal (``exit``); its memory
    #: (``memory``: ``rss_kb`` when the student's code started, ``limit_bytes`` it may add,
    #: ``peak_kb`` the most it held); ...
    detail: dict = field(default_factory=dict)
    #: what the student's code printed: the head and the tail, up to the limits
    output: str = ""
    #: how much it printed in all
    output_bytes: int = 0
    #: seconds from the fork to the end
    duration_s: float = 0.0
    #: the job's reports on its instruments (after the import, after the probe)
    integrity: list[dict] = field(default_factory=list)
    #: modules in XLA's dump, counted by the grader
    xla_compiles: int | None = None
    #: when each record reached the grader (seconds after the job started)
    arrivals: dict[str, float] = field(default_factory=dict)
    #: what the job's process spent, for the report's timings (never for a verdict): its CPU seconds
    #: once started (``started_cpu_s``: JAX's backend up), once the module was imported
    #: (``imported_cpu_s``) and at the end of the probe (``cpu_s``), as the job says; JAX's stages in
    #: seconds (``trace_s``, ``lower_s``, ``compile_s``, of which ``cache_load_s`` loading programs
    #: from the persistent cache; ``programs``: how many, of which ``loaded`` from the cache);
    #: ``total_cpu_s``: the kernel's count, from the host; ``kept_uses``: a kept job's (:mod:`grader.runner.kept`)
    work: dict = field(default_factory=dict)
    #: the jobs that shared the probe, each as it ended (:func:`combined`; none for one job): each is held
    #: to its own reports on its instruments
    parts: list["JobOutcome"] = field(default_factory=list)
    #: a student's job where a batch asked for the class's similarity: what each function it called traced to,
    #: by name (:mod:`grader.child.programs`); no check reads it
    programs: dict[str, dict] = field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        """Its fields by name, the values themselves (:func:`dataclasses.asdict` would copy every record's
        arrays first, for :func:`grader.wire.encode` to read them once)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def attempted(self, functions: Iterable[str] | None = None) -> bool:
        """Whether some call of the student's got past ``NotImplementedError`` (returned or raised);
        ``functions``: of these only (the exercise's, not the provided code its probe calls too).

        A stub records only "not attempted" calls, and then no reference run is needed; nor
        after an import error, or a crash before any record (the checks report those).
        """
        names = None if functions is None else set(functions)
        return self.end != "import_error" and any(
            isinstance(v, dict) and v.get("status") in ("ok", "raised")
            and (names is None or v.get("function") in names)
            for v in self.records.values())


def combined(parts: list[JobOutcome]) -> JobOutcome:
    """One outcome of the jobs that shared a probe (an exercise's ``parts``), as the checks judge one job's.

    How it ended is the first part's that did not end ``done`` (with its detail), else ``done``; the
    records and when they arrived are every part's (each key once, the first part's where two made it);
    the names, the skipped statements and the environment are the first part's (every part imported the
    same module); each part is kept as it ended, its reports on its instruments judged on their own
    (:func:`grader.verdicts.tampering`); the output is each part's in turn (the whole lines a later part
    began with as the first part began, the module's prints at its import say, said once); the time the
    longest part's; what they spent, summed.
    """
    first = parts[0]
    ended = next((part for part in parts if part.end != "done"), first)
    records: dict[str, Any] = {}
    arrivals: dict[str, float] = {}
    work: dict[str, Any] = {}
    for part in parts:
        for key, value in part.records.items():
            records.setdefault(key, value)
        for key, value in part.arrivals.items():
            arrivals.setdefault(key, value)
        for key, value in part.work.items():
            work[key] = round(work.get(key, 0) + value, 4) if isinstance(value, (int, float)) else value
    work["parts"] = len(parts)
    compiles = [part.xla_compiles for part in parts if part.xla_compiles is not None]
    return JobOutcome(
        end=ended.end, side=first.side, records=records, names=first.names, skipped=first.skipped, env=first.env,
        detail=ended.detail, output=_apart([part.output for part in parts]),
        output_bytes=sum(part.output_bytes for part in parts), duration_s=max(part.duration_s for part in parts),
        integrity=[item for part in parts for item in part.integrity], xla_compiles=sum(compiles) if compiles else None,
        arrivals=arrivals, work=work, parts=list(parts),
        programs={name: entry for part in reversed(parts) for name, entry in part.programs.items()})


def _apart(outputs: list[str]) -> str:
    """The parts' outputs in turn, each on lines of its own, without the whole lines a later one begins with
    that the first one began with too."""
    first = outputs[0].splitlines(keepends=True)
    text = outputs[0]
    for output in outputs[1:]:
        same = 0
        for mine, theirs in zip(output.splitlines(keepends=True), first):
            if mine != theirs or not mine.endswith("\n"):
                break
            same += len(mine)
        if output[same:]:
            text += ("\n" if text and not text.endswith("\n") else "") + output[same:]
    return text
