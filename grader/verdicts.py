"""Judging: from how an exercise's jobs ended to the exercise's result. Pure functions.

:func:`judge` takes what the student's job and the reference's job recorded (their
:class:`~grader.runner.job_sessions.JobOutcome`) and returns an
:class:`~grader.results.ExerciseResult` with every check's verdict, plus what the
instructor should know about the student's process (tampering). It starts nothing and
keeps nothing: the grading run schedules the jobs and collects the results.
"""
from __future__ import annotations

import logging
import signal
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from grader.checks import (ARRIVALS, NAMES, CheckContext, Fail, GraderError, Missing, NotAttempted, Records,
                           Pass)
from grader.i18n import T, Text, Words
from grader.primitives.numeric import summarize
from grader.results import CheckResult, ExerciseResult, exercise_status

if TYPE_CHECKING:
    from grader.exercise_folder import ExerciseSpec
    from grader.runner.job_sessions import JobOutcome

log = logging.getLogger("grader")

#: how a message's ``where`` (``file:line`` of the module graded) and ``file`` read for the
#: student (a notebook's cell and line, the notebook): :meth:`grader.submission.Submission.locate`
Locate = Callable[[str | None], "str | Text"]


@dataclass
class Termination:
    """How the student's child process ended for this exercise."""

    #: ``None`` (normally), ``timeout`` or ``error``
    kind: str | None = None
    #: why, in the student's words
    reason: Text | None = None


def judge(ex: ExerciseSpec, student: JobOutcome, reference: JobOutcome | None, *, inputs: dict, seed: int,
          locate: Locate = lambda where: where or "?", preview: bool = False,
          missing: str = "failed") -> tuple[ExerciseResult, list[dict]]:
    """The result of exercise ``ex`` from its jobs' outcomes, and any integrity finding.

    ``ex`` is the :class:`~grader.chapter.ExerciseSpec` (its checks are the functions
    its module declares); ``reference`` is ``None`` when the exercise needs no
    reference run or the student attempted nothing. ``preview``: ``reference`` comes
    from a release's records (:mod:`grader.preview`; the checks know it from their context).
    ``missing``: the status of a check that failed only because a function is not defined
    (``not_attempted`` for a notebook, whose cell of that function was not run).
    """
    memory = out_of_memory(student, ex)
    if memory is not None and not student.names:  # the import ran out of memory, however it ended
        return unrunnable(ex, _located(memory, locate), output=student.output), []
    if student.end == "import_error":
        d = student.detail
        reason = _located(T("job.import_error", file=ex.filename, type=d.get("type", "?"),
                            message=d.get("message", ""), where=d.get("where") or ex.filename), locate)
        return unrunnable(ex, reason, output=student.output), []
    termination = termination_of(student, ex) if memory is None else Termination("error", memory)
    termination.reason = _located(termination.reason, locate)
    if student.end == "timeout" and (student.detail.get("hung") or {}).get("phase") == "importing":
        return unrunnable(ex, termination.reason, "timeout", output=student.output), []  # never imported
    problems = tampering(student)
    if problems:
        finding = {"file": ex.filename, "line": 0, "code": "runtime", "detail": ex.id,
                   "message": T("integrity.runtime", detail=problems)}
        return unrunnable(ex, problems, "failed", output=student.output), [finding]
    data = dict(student.records)
    data[ARRIVALS] = dict(student.arrivals)
    for name, described in student.names.items():
        data[NAMES(name=name)] = {**described, "file": ex.filename}
    s = Records("student", data, module_file=ex.filename)
    ref_data: dict = {}
    if reference is not None:
        if reference.end == "done":
            ref_data = dict(reference.records)
        else:
            log.error("reference run of %s failed: %s %s\n%s", ex.id, reference.end, reference.detail,
                      reference.output[-2000:])
    r = Records("reference", ref_data)
    checks = run_checks(ex, s, r, CheckContext(exercise=ex, inputs=inputs, seed=seed, preview=preview,
                                               missing=missing, device=(student.env or {}).get("backend")),
                        termination)
    if reference is not None and reference.end != "done":
        for check in checks:
            if check.status == "error":
                check.message = T("release.no_record", seed=seed) if preview \
                    else T("job.reference_failed", how=how_it_ended(reference))
    for check in checks:
        check.message, check.hint = _located(check.message, locate), _located(check.hint, locate)
    status = exercise_status(checks, termination.kind)
    result = ExerciseResult(id=ex.id, title=ex.title, section=ex.section, checks=checks, status=status,
                            error=termination.reason if termination.kind else None, output=student.output,
                            notes=[_located(T("notebook.skipped", where=str(item.get("where") or "?"),
                                              type=str(item.get("type") or "?"), message=str(item.get("message", ""))),
                                            locate) for item in getattr(student, "skipped", ())])
    return result, []


def unrunnable(ex: ExerciseSpec, reason: Words, status: str = "error", *, output: str = "") -> ExerciseResult:
    """An exercise none of whose checks could run: one reason for all, no hint about other mistakes."""
    checks = [CheckResult(id=c.id, title=c.title, category=c.category, points=0.0, max_points=c.points,
                          status=status, message=reason, hint=None, hint_id="none") for c in ex.checks]
    return ExerciseResult(id=ex.id, title=ex.title, section=ex.section, checks=checks, status=status,
                          error=reason, unrunnable=True, output=output)


def untouched(ex: ExerciseSpec, reason: Words) -> ExerciseResult:
    """An exercise the student has not started (a notebook none of whose cells of it ran): every
    check not attempted, for ``reason``, and nothing else to say."""
    checks = [CheckResult(id=c.id, title=c.title, category=c.category, points=0.0, max_points=c.points,
                          status="not_attempted", message=reason, hint=None, hint_id="none") for c in ex.checks]
    return ExerciseResult(id=ex.id, title=ex.title, section=ex.section, checks=checks, status="not_attempted")


# ------------------------------------------------------------------ the checks
def run_checks(ex: ExerciseSpec, student: Records, reference: Records, ctx: CheckContext,
               termination: Termination) -> list[CheckResult]:
    """Judge every check of one exercise, in the chapter file's order. A check that failed only
    because a function is not defined shows no numbers and no hint about another mistake;
    its status is ``ctx.missing``."""
    missing = ctx.missing
    results: dict[str, CheckResult] = {}
    for spec in ex.checks:
        result = CheckResult(id=spec.id, title=spec.title, category=spec.category, points=0.0,
                             max_points=spec.points, status="failed", hint=spec.hint, hint_id="check")
        results[spec.id] = result
        blocking = [results[d] for d in spec.depends if results[d].status != "passed"]
        if blocking:
            if all(b.status == "not_attempted" for b in blocking):
                result.status, result.message = "not_attempted", T("check.not_attempted_dep")
            else:
                result.status = "skipped"
                result.message = T("check.skipped", depends=[b.title for b in blocking])
                if all(b.measured.get("left_out") for b in blocking):  # only the grader's own failure stands
                    result.measured = {"left_out": True}  # in its way: left out as that one is, never 0
            continue
        try:
            outcome = spec.function(student, reference, ctx)
        except Fail as failure:
            result.message, result.measured = failure.message, failure.measured
            result.hint, result.hint_id = spec.resolve_hint(_placed(failure.hint, ex))
            if _only_missing(failure.message):  # one sentence per function, no numbers, no hint
                result.status, result.measured, result.hint, result.hint_id = missing, {}, None, "none"
                if isinstance(failure.message, list):
                    result.message = summarize(failure.message)
        except NotAttempted as na:
            result.status, result.message = "not_attempted", T("check.not_attempted", function=na.function)
        except Missing:  # the job ended first: the exercise's line says why; no hint about another mistake
            function = spec.id.split(".")[0]
            described = student.data.get(NAMES(name=function))
            if termination.kind is None and isinstance(described, dict) and described.get("missing"):
                # the job ran to its end: the record is missing because the function is
                result.status, result.message = missing, T("call.missing", name=function, file=student.module_file)
            else:
                result.status = termination.kind or "error"
                result.message = termination.reason or T("check.missing")
            result.hint, result.hint_id = None, "none"
        except GraderError as exc:
            log.error("grader error in %s/%s: %s", ex.id, spec.id, exc)
            result.status, result.message = "error", T("check.grader_error", detail=str(exc))
            result.measured = {"left_out": True}
        except Exception as exc:  # a bug in the check: the grader's fault, not the student's
            log.error("check %s/%s crashed:\n%s", ex.id, spec.id, traceback.format_exc())
            result.status = "error"
            result.message = T("check.grader_error", detail=f"{type(exc).__name__}: {exc}")
            result.measured = {"left_out": True}
        else:
            if isinstance(outcome, Pass):
                result.message, result.measured = outcome.message or T("check.passed"), outcome.measured
            else:
                result.message, result.measured = T("check.passed"), outcome or {}
            result.status, result.points = "passed", spec.points
    return leave_out_the_graders_failures(list(results.values()))


def leave_out_the_graders_failures(results: list[CheckResult]) -> list[CheckResult]:
    """A check the grader itself could not judge (the reference could not be timed or run, a check's own bug:
    ``measured["left_out"]``; or skipped because only such a check stands in its way) is left out of the
    exercise's total: it gets the points of the exercise's other checks at their rate (8 of 8 elsewhere:
    all of its own; 4 of 8: half), so the student loses nothing to the grader's failure and gains nothing
    either, and the chapter's maximum stays what gradebooks know. Its message says so. Where every check
    is the grader's failure, none gets points (nothing was judged)."""
    left_out = [r for r in results if r.status in ("error", "skipped") and r.measured.get("left_out")]
    judged = [r for r in results if all(r is not out for out in left_out)]
    judged_max = sum(r.max_points for r in judged)
    if not left_out or judged_max <= 0:
        return results
    rate = sum(r.points for r in judged) / judged_max
    for result in left_out:
        result.points = round(result.max_points * rate, 4)
        result.measured = {**result.measured, "rate": round(rate, 4)}
        result.message = [result.message, T("check.left_out", points=f"{result.points:g}",
                                            max_points=f"{result.max_points:g}", percent=f"{100 * rate:.0f}")]
    return results


def _only_missing(message: Words) -> bool:
    """Whether every sentence of a failure's message says that a function is not defined."""
    if isinstance(message, list):
        return bool(message) and all(_only_missing(m) for m in message)
    if isinstance(message, Text) and message.key == "numeric.repeated":
        return _only_missing(message.args.get("message"))
    return isinstance(message, Text) and message.key == "call.missing"


def _placed(hint: str | Text | None, ex: ExerciseSpec) -> str | Text | None:
    """A grader hint (``hint.*``) with the chapter's section for that kind of error filled in."""
    if isinstance(hint, Text) and hint.key.startswith("hint.") and "section" not in hint.args:
        kind = hint.key.rsplit(".", 1)[1] if hint.key.startswith("hint.exception.") else ""
        section = ex.error_sections.get(kind) or ex.error_sections.get("") or T("hint.section_unknown")
        return Text(hint.key, {**hint.args, "section": section})
    return hint


def _located(text: Words, locate: Locate) -> Words:
    """``text`` with every ``where`` (a line) and ``file`` (the module) argument read as the
    student knows the place (a notebook's cell, the notebook)."""
    if isinstance(text, list):
        return [_located(t, locate) for t in text]
    if isinstance(text, Text):
        args = {k: (locate(v) if k in ("where", "file") and isinstance(v, str) else _located(v, locate))
                for k, v in text.args.items()}
        return Text(text.key, args)
    return text


# ------------------------------------------------------------------ how a job ended
def tampering(outcome: JobOutcome) -> list[Text] | None:
    """Why the job's records cannot be trusted, if they cannot.

    The job reports on its instruments after the import and after the probe; a change,
    a missing final report, or fewer compiles reported than XLA's own dump holds all
    mean that the student's code reached into the grader's side of the process.
    """
    if outcome.parts:  # jobs that shared the probe: each one's reports against its own compiles
        return [problem for part in outcome.parts for problem in tampering(part) or ()] or None
    problems: list[Text] = []
    changed = sorted({name for report in outcome.integrity for name in (report.get("changed") or [])
                      if isinstance(name, str)})
    if changed:
        problems.append(T("integrity.tampered", names=", ".join(changed[:8]) + (" …" if len(changed) > 8 else "")))
    final = next((r for r in outcome.integrity if r.get("stage") == "probe"), None)
    if outcome.end == "done" and final is None:
        problems.append(T("integrity.no_report"))
    reported = final.get("compiles_total") if final else None
    if type(reported) is int and outcome.xla_compiles is not None and outcome.xla_compiles > reported:
        problems.append(T("integrity.compiles_hidden", xla=outcome.xla_compiles, reported=reported))
    return problems or None


def how_it_ended(outcome: JobOutcome) -> Text:
    """A job's end in a few words: a timeout, a signal, an exit code."""
    exit_info = outcome.detail.get("exit", {})
    if outcome.end == "timeout":
        return T("job.timeout", seconds=round(outcome.duration_s, 1))
    if "signal" in exit_info:
        number = exit_info["signal"]
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "?"
        if number == signal.SIGXFSZ:
            return T("job.output_limit")
        return T("job.signal", signal=number, name=name)
    if "code" in exit_info:
        return T("job.exit_code", code=exit_info["code"])
    if outcome.end == "no_backend":
        return T("job.no_backend", error=str(outcome.detail.get("error", "?"))[:300])
    if outcome.detail.get("host_error"):
        return T("job.host_failed", why=outcome.detail["host_error"])
    return T("job.host_lost")


def termination_of(outcome: JobOutcome, ex: ExerciseSpec) -> Termination:
    """How the student's job ended, as the exercise's error line says it."""
    end = outcome.end
    if end == "done":
        return Termination()
    if end == "timeout":
        return Termination("timeout", timeout_text(outcome, ex))
    if end == "crashed":
        exit_info = outcome.detail.get("exit", {})
        if exit_info.get("signal") == signal.SIGXCPU:
            return Termination("timeout", T("job.timeout", seconds=round(outcome.duration_s, 1)))
        return Termination("error", T("job.crashed", how=how_it_ended(outcome)))
    if end == "probe_error":
        return Termination("error", T("job.probe_error", type=outcome.detail.get("type", "?")))
    if end == "disk_limit":
        return Termination("error", T("job.disk_limit", used=outcome.detail.get("disk_bytes", 0) >> 20,
                                      limit=outcome.detail.get("limit", 0) >> 20))
    if end == "protocol_error":
        return Termination("error", T("job.protocol_error", error=outcome.detail.get("error", "?")))
    if end == "no_backend":
        return Termination("error", T("job.no_backend", error=str(outcome.detail.get("error", "?"))[:300]))
    if end == "host_lost" and outcome.detail.get("host_error"):  # the process that forks jobs did not start
        return Termination("error", T("job.host_failed", why=outcome.detail["host_error"]))
    return Termination("error", T("job.host_lost"))


#: what a process out of memory says, in Python, in JAX's runtime and in C++ (a refused allocation
#: under the job's address-space limit, ``RLIMIT_AS``)
MEMORY_WORDS = ("MemoryError", "RESOURCE_EXHAUSTED", "Out of memory", "std::bad_alloc", "Cannot allocate memory")
#: the share of the memory a job may add that, held when it was stopped or ended, means memory was
#: what it spent its time on (filling gigabytes of pages takes seconds: the time limit may come first).
#: Held as resident memory at its peak, or, for a job its time limit stopped, as address space: an
#: array's pages are reserved at once and filled one fault at a time, so on a busy machine a job
#: stopped while filling gigabytes has reserved them and holds only part of them (a run of the test
#: suite beside busy processes: a 30 GiB import stopped at 20 s with less than half of 4 GiB resident)
MEMORY_SHARE = 0.5
#: the share of it a job stopped by its time limit must hold resident besides, for the address space it
#: reserved to count: it was filling those pages (a slow loop's threads reserve address space too, a
#: malloc arena of 64 MiB each, and fill little of it)
FILLING_SHARE = 0.125


def _memory_held(memory: dict, end: str) -> bool:
    """Whether a job held :data:`MEMORY_SHARE` of the memory it may add (see there)."""
    limit = memory.get("limit_bytes")
    if not isinstance(limit, int) or limit <= 0:
        return False

    def grew(base: Any, peak: Any) -> int | None:
        return (peak - base) * 1024 if isinstance(base, int) and isinstance(peak, int) else None

    resident = grew(memory.get("rss_kb"), memory.get("peak_kb"))
    if resident is not None and resident >= MEMORY_SHARE * limit:
        return True
    reserved = grew(memory.get("vm_kb"), memory.get("peak_vm_kb")) if end == "timeout" else None
    return reserved is not None and resident is not None and reserved >= MEMORY_SHARE * limit \
        and resident >= FILLING_SHARE * limit


def out_of_memory(outcome: JobOutcome, ex: ExerciseSpec) -> Text | None:
    """The one message for a job that ran out of memory, whichever way that showed (a ``MemoryError``,
    JAX's ``RESOURCE_EXHAUSTED``, a crash that says so, or a time limit reached while the job held
    more than :data:`MEMORY_SHARE` of its memory); ``None`` for any other end.

    How it shows depends on how fast the machine fills memory, which depends on what else
    runs beside the job: the same code fails a big allocation at once, or runs out of time
    filling pages first. The student is told the same either way.
    """
    end, detail = outcome.end, outcome.detail
    if end not in ("import_error", "crashed", "probe_error", "timeout"):
        return None
    said = ""
    if end == "import_error":
        said = f"{detail.get('type', '')}: {detail.get('message', '')}"
    elif end in ("crashed", "probe_error"):
        said = outcome.output[-3000:] + str(detail.get("type", "")) + str(detail.get("traceback", ""))[-3000:]
    memory = detail.get("memory") or {}
    limit = memory.get("limit_bytes")
    held = _memory_held(memory, end)
    if not held and not any(word in said for word in MEMORY_WORDS):
        return None
    hung = detail.get("hung") or {}
    where = detail.get("where") if end == "import_error" else hung.get("where")
    if not outcome.names:
        doing = T("job.doing.import", file=ex.filename)
    elif hung.get("function"):
        doing = T("job.doing.call", function=hung["function"])
    else:
        doing = T("job.doing.code")
    return T("job.out_of_memory", doing=doing, limit=round(limit / 2**20) if isinstance(limit, int) else "?",
             at=T("job.memory_at", where=where) if where and where != "?" else "")


def timeout_text(outcome: JobOutcome, ex: ExerciseSpec) -> Text:
    """What ran past its limit: the import or a call, and the student's line when known."""
    hung = outcome.detail.get("hung") or {}
    at = T("job.stuck_at", where=hung["where"]) if hung.get("where") else ""
    if hung.get("phase") == "importing":
        return T("job.hung_import", file=ex.filename, seconds=round(outcome.duration_s), at=at)
    if hung.get("phase") == "calling" and hung.get("function"):
        return T("job.hung_call", function=hung["function"], seconds=round(outcome.duration_s, 1), at=at)
    return T("job.timeout", seconds=round(outcome.duration_s, 1))
