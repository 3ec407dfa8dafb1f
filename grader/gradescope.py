"""Grading on Gradescope: ``python -m grader.gradescope ROOT``, what ``run_autograder`` runs.

Gradescope puts a student's files in ``ROOT/submission`` (``ROOT`` is ``/autograder``)
and reads ``ROOT/results/results.json``. :func:`main` grades the submission as a final
grading does: a fresh seed, and the reference solutions of the autograder's own
``ROOT/source/solutions/<chapter>`` (``setup.sh`` left them readable by root only; the
student's code runs as a uid of its own). The folder goes to the grader's usual
submission reading: the chapter's modules, a notebook, a checkout with the files deeper
inside; a single ``.zip`` uploaded alone is read as the zip.

``results.json`` is always written: a test per check (:func:`grader.batch.gradebook.gradescope`),
above them the score of each exercise, the device and the sandbox that ran; for a
submission that cannot be graded, a score of 0 and one line in English and Chinese
saying what is wrong and what to submit. What the student's code does costs its
exercise only (the grader isolates it); a bug of the grader's own is a score of 0 that
says so, its traceback on standard output, which Gradescope shows the instructor only
(``stdout_visibility``), with the whole report's table and its integrity warnings.

``python -m grader.gradescope --check ROOT`` is ``setup.sh``'s check: whether the
installed grader, the chapter and its reference are ready (exit 1 when not). Then
``--build ROOT`` builds the programs every grading compiles into the cache that
``run_autograder`` grades with (:mod:`grader.batch.warmup`), so that no submission pays
for them: each submission's container starts from the image setup.sh made.

``ROOT/source/jit-grader.json`` (:class:`Config`) holds what ``grade dev gradescope``
was told: the chapter, the report's language, the sandbox and the limits.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as in grader.cli: the cores belong to the graded code

import json  # noqa: E402
import math  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

from grader import __version__, affinity  # noqa: E402
from grader.i18n import LANGS, Catalog, T, Text, grader_catalog  # noqa: E402
from grader.options import LimitOptions  # noqa: E402

#: the autograder's settings, in its source folder
CONFIG_FILE = "jit-grader.json"
#: what the report's ``submission`` is called in the gradebook row
SUBMISSION = "submission"


@dataclass
class Config:
    """What ``grade dev gradescope`` was told, for every grading of the autograder it built."""

    #: the chapter's id (``ch4``)
    chapter: str
    #: the language of what students read: ``en``, ``zh`` or ``both`` (English, then Chinese)
    lang: str = "en"
    #: the language of the lines for the instructor (``setup.sh``'s, the standard output's)
    instructor_lang: str = "en"
    #: ``auto``, ``bwrap`` or ``process`` (see :func:`grader.runner.sandbox.plan`)
    sandbox: str = "auto"
    #: the whole submission's time limit, in seconds
    timeout_s: float = 900.0
    #: caps every exercise's own time limit (seconds); ``None``: the chapter's limits
    exercise_timeout_s: float | None = None
    #: memory for each exercise's process, in MiB, on top of JAX's own
    memory_mb: int = 4096
    #: the device measured on: ``auto``, ``cpu`` or ``device`` (:mod:`grader.runner.devices`)
    device: str = "auto"
    #: the versions of the machine that built the autograder (``jax``, ``jaxlib``, ``python``, ``grader``)
    built_with: dict | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def read(cls, root: Path) -> "Config":
        data = json.loads((Path(root) / "source" / CONFIG_FILE).read_text(encoding="utf-8"))
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    @property
    def langs(self) -> tuple[str, ...]:
        return LANGS if self.lang == "both" else (self.lang,)

    @property
    def limits(self) -> LimitOptions:
        """The sandbox and limits every submission is graded under."""
        return LimitOptions(sandbox=self.sandbox, timeout_s=self.timeout_s, exercise_timeout_s=self.exercise_timeout_s,
                            memory_mb=self.memory_mb, device=self.device)


def reference_dir(root: Path, chapter: str) -> Path:
    """Where the autograder keeps the reference solutions of ``chapter``."""
    return Path(root) / "source" / "solutions" / chapter


def cpus_allowed(cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """The CPUs this container may use: its affinity, capped by a cgroup CPU quota (Docker's ``--cpus``,
    which ``os.cpu_count()`` does not see); exercises are graded that many at once, and one more."""
    cpus = len(affinity.available()) or os.cpu_count() or 1
    for quota_file, period_file in ((cgroup / "cpu.max", None),
                                    (cgroup / "cpu" / "cpu.cfs_quota_us", cgroup / "cpu" / "cpu.cfs_period_us")):
        try:
            fields = quota_file.read_text().split()
            if period_file is not None:
                fields.append(period_file.read_text().strip())
            quota, period = float(fields[0]), float(fields[1])
        except (OSError, ValueError, IndexError):  # no such cgroup, or "max": no quota
            continue
        if quota > 0 and period > 0:
            return max(1, min(cpus, math.ceil(quota / period)))
    return max(1, cpus)


def submission_path(folder: Path) -> Path:
    """What to grade in Gradescope's submission folder: the folder, or the one ``.zip`` uploaded alone in it."""
    try:
        entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    except OSError:
        return folder
    if len(entries) == 1 and entries[0].is_file() and entries[0].suffix.lower() == ".zip":
        return entries[0]
    return folder


# ------------------------------------------------------------------ results.json
def results_of(report, catalog: Catalog, config: Config, elapsed_s: float, note: Text | None = None) -> dict:
    """Gradescope's ``results.json`` for a report, in the configured language(s): a test per check;
    with ``both``, the English names, and each output in English, then in Chinese."""
    from grader.batch import gradebook
    from grader.report.render import render_json

    parts = []
    for lang in config.langs:
        row = gradebook.row_from_report(SUBMISSION, json.loads(render_json(report, catalog, lang)), elapsed_s)
        results = gradebook.gradescope(row, hint=catalog.render(T("ui.hint"), lang))
        results["output"] = summary(report, catalog, lang, note)
        parts.append(results)
    results = parts[0]
    for other in parts[1:]:
        results["output"] += "\n\n" + other["output"]
        for test, more in zip(results["tests"], other["tests"]):
            test["output"] = "\n\n".join(text for text in (test["output"], more["output"]) if text)
    results["stdout_visibility"] = "hidden"  # the instructor's: the table, integrity warnings, the seed
    results["extra_data"] = {"seed": report.seed, "sandbox": report.sandbox.get("kind"),
                             "uid_isolation": report.sandbox.get("uid_isolation"), "grader": __version__}
    return results


def summary(report, catalog: Catalog, lang: str, note: Text | None = None) -> str:
    """The text above the tests: the score, a line per exercise (its title, or what stopped it when it
    could not run), the device, versions and sandbox, and what the sandbox lacked."""
    from grader.report.common import ICONS, environment_text, num
    from grader.results import headline

    words = lambda text: catalog.render(text, lang)  # noqa: E731
    lines = [words(headline(report)), ""]
    width = max((len(ex.id) for ex in report.exercises), default=0)
    for ex in report.exercises:
        line = f"{ICONS.get(ex.status, ' ')} {ex.id.ljust(width)}  {num(ex.score) + '/' + num(ex.max_score):>7}  " \
               f"{words(T(f'ui.status.{ex.status}'))}: "
        why = ex.error if ex.error and ex.status in ("error", "timeout") else ex.title
        lines.append(line + words(why))
    lines += ["", words(environment_text(report))]
    lines += [words(text) for text in report.sandbox.get("notes", [])]
    if note is not None:
        lines.append(words(note))
    return "\n".join(lines)


def failed(text: Text, elapsed_s: float) -> dict:
    """``results.json`` of a submission that was not graded: a score of 0 and ``text``, in English
    and in Chinese (one line each), whatever the report's language."""
    from grader.batch import gradebook

    catalog = grader_catalog()
    results = gradebook.gradescope(gradebook.row_from_failure(SUBMISSION, "unreadable", "", elapsed_s))
    results["output"] = "\n".join(catalog.render(text, lang) for lang in LANGS)
    results["stdout_visibility"] = "hidden"
    return results


def unreadable(text: Text, folder: Path, chapter) -> Text:
    """Why a submission cannot be graded, as the student knows it: ``your submission`` for Gradescope's
    folder, a file by its name in it, and what to submit."""
    def shown(value):
        if isinstance(value, str) and value.startswith(str(folder)):
            rest = value[len(str(folder)):].lstrip("/")
            return rest or T("gradescope.your_submission")
        return value

    detail = Text(text.key, {key: shown(value) for key, value in text.args.items()})
    files = f"{chapter.exercises[0].filename} … {chapter.exercises[-1].filename}"
    return T("gradescope.unreadable", detail=detail, files=files)


# ------------------------------------------------------------------ grading
def grade_submission(root: Path, config: Config, started: float) -> dict:
    """Grade ``root/submission`` and return its ``results.json``; prints the report's table."""
    from grader.chapter import load_chapter
    from grader.grading import Interrupted, Machinery, grade
    from grader.report.render import render_terminal
    from grader.submission import SubmissionError

    chapter = load_chapter(config.chapter)
    reference = reference_dir(root, chapter.id)
    if not reference.is_dir():
        raise FileNotFoundError(f"no reference solutions at {reference}")
    say = chapter.catalog.render
    print(say(T("gradescope.grading", version=__version__, python=sys.executable, chapter=chapter.id),
              config.instructor_lang), flush=True)
    options = config.limits.grade_options(chapter=chapter.id, reference_dir=reference)
    folder = root / "submission"
    note = None
    try:
        report = grade(submission_path(folder), options, Machinery(at_once=cpus_allowed() + 1))
    except SubmissionError as exc:
        text = unreadable(exc.text, folder, chapter)
        print(say(text, config.instructor_lang))
        return failed(text, time.monotonic() - started)
    except Interrupted as stop:  # stopped from outside (Gradescope's time limit): what was graded counts
        report = stop.report
        note = T("gradescope.interrupted", done=len(report.exercises), total=len(chapter.exercises))
    print(render_terminal(report, chapter.catalog, config.instructor_lang, width=110), flush=True)
    return results_of(report, chapter.catalog, config, time.monotonic() - started, note)


def check_ready(root: Path) -> int:
    """``--check``: say whether this autograder can grade (the installed grader, its chapter, the
    reference, the sandbox); 0 when it can, 1 when not."""
    from importlib import metadata

    from grader.chapter import load_chapter
    from grader.runner import sandbox as sandboxes

    config = Config.read(root)
    chapter = load_chapter(config.chapter)
    catalog = chapter.catalog
    reference = reference_dir(root, chapter.id)
    missing = [ex.filename for ex in chapter.exercises if not (reference / ex.filename).is_file()]
    if missing:
        print(catalog.render(T("gradescope.not_ready", path=str(reference), missing=", ".join(missing)),
                             config.instructor_lang))
        return 1
    if sandboxes.reachable_by_others(reference):
        print(catalog.render(T("gradescope.reference_readable", path=str(reference)), config.instructor_lang))
        return 1
    plan = sandboxes.plan(config.sandbox)
    print(catalog.render(T("gradescope.ready", python=sys.version.split()[0], jax=metadata.version("jax"),
                           chapter=chapter.id, n=len(chapter.exercises),
                           points=f"{sum(ex.max_score for ex in chapter.exercises):g}",
                           sandbox=plan.kind + ("+uid" if plan.uid_isolation else "")), config.instructor_lang))
    return 0


def build_programs(root: Path) -> int:
    """``--build``: build the programs every grading compiles (:func:`grader.batch.warmup.build`) into the
    cache ``run_autograder`` grades with; 0 when the reference solutions got full marks, 1 when not."""
    from grader.batch.warmup import build
    from grader.chapter import load_chapter

    config = Config.read(root)
    chapter = load_chapter(config.chapter)
    built = build(chapter, reference_dir=reference_dir(root, chapter.id), sandbox=config.sandbox)
    print(chapter.catalog.render(T("gradescope.built", **built), config.instructor_lang))
    return 0 if built["score"] == built["max_score"] else 1


def _stop(signum, frame) -> None:
    raise KeyboardInterrupt  # the grading stops its processes and keeps what it graded


def main(argv: list[str] | None = None) -> int:
    """``python -m grader.gradescope [--check | --build] [ROOT]`` (``ROOT``: ``$AUTOGRADER_ROOT``, else
    ``/autograder``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    check, build = "--check" in args, "--build" in args
    args = [arg for arg in args if arg not in ("--check", "--build")]
    root = Path(args[0] if args else os.environ.get("AUTOGRADER_ROOT", "/autograder")).resolve()
    if check:
        return check_ready(root)
    if build:
        return build_programs(root)
    started = time.monotonic()
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        config = Config.read(root)
        results = grade_submission(root, config, started)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - the grader's own failure: 0 points that say so
        traceback.print_exc(file=sys.stdout)
        results = failed(T("gradescope.grader_failed", detail=f"{type(exc).__name__}: {exc}"),
                         time.monotonic() - started)
    finally:
        signal.signal(signal.SIGTERM, previous)
    from grader.batch.gradebook import write_text

    write_text(root / "results" / "results.json", json.dumps(results, ensure_ascii=False, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
