"""``grade PATH`` (the ``check`` command) and ``grade verify``: grading one submission
and checking a signed report."""
from __future__ import annotations

import math
import shutil
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from grader import ahead, safetext
from grader.chapter import ChapterError, load_chapter
from grader.cli import relay
from grader.cli.app import EXIT_FAIL_UNDER, UserError, cli, gather, lang_option, limit_options, setup_logging
from grader.cli.keys import signing_key
from grader.copies import REPORT_DIR_NAME
from grader.i18n import Catalog, T, default_lang, grader_catalog
from grader.options import LimitOptions
from grader.report.common import pasteable

if TYPE_CHECKING:
    from grader.chapter import Chapter
    from grader.grading import GradeOptions, Machinery
    from grader.results import Report


@dataclass(frozen=True)
class Bar:
    """A ``--fail-under`` bar: points, or a percentage of the maximum score."""

    #: the bar: points, or a percentage of the maximum score
    value: float
    #: whether ``value`` is a percentage
    percent: bool

    def points(self, max_score: float) -> float:
        return max_score * self.value / 100 if self.percent else self.value

    def describe(self, max_score: float) -> str:
        """``60`` or ``60% (48 / 80)``."""
        if not self.percent:
            return f"{self.value:g}"
        return f"{self.value:g}% ({self.points(max_score):g} / {max_score:g})"


class BarType(click.ParamType):
    """Points (``60``) or a percentage of the maximum score (``75%``)."""

    name = "POINTS|PERCENT%"

    def convert(self, value, param, ctx) -> Bar:
        if isinstance(value, Bar):
            return value
        text = str(value).strip()
        percent = text.endswith("%")
        try:
            number = float(text[:-1] if percent else text)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number < 0 or (percent and number > 100):
            self.fail(grader_catalog().render(T("error.fail_under", value=text), default_lang()), param, ctx)
        return Bar(number, percent)


@dataclass(frozen=True)
class Selection:
    """What ``grade PATH`` grades of the submission, and on which hidden inputs."""

    #: the chapter's id; ``None``: told from the submission
    chapter: str | None
    #: the exercises (``-k``); empty: all
    exercises: tuple[str, ...]
    #: the copy to grade in a folder or zip that holds the chapter twice (``--inside``)
    inside: str | None
    #: the hidden inputs' seed (``--seed``); ``None``: a fresh one
    seed: int | None


@dataclass(frozen=True)
class Output:
    """Where ``grade PATH`` writes its report, and what it prints."""

    #: the reports' folder (``--report-dir``); ``None``: the default beside the submission
    report_dir: Path | None
    #: the language (``--lang``); ``None``: from the locale
    lang: str | None
    #: print the JSON report instead of the table (``--json``)
    as_json: bool
    #: exit with status 1 below this score (``--fail-under``)
    fail_under: Bar | None
    #: the key file that signs the JSON report (``--sign-key``)
    sign_key: Path | None
    #: open the HTML report when done (``--open``)
    open_: bool


@cli.command("check", short_help="Grade one submission (the same as grade PATH).")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--chapter", help="Chapter id, e.g. ch4 (default: told from the name, else from the files).")
@click.option("--report-dir", type=click.Path(path_type=Path),
              help="Where the reports go: report.json, report.md and report.html (with -k: report.partial.json, "
                   "report.partial.md and report.partial.html), and the hints shown (hints.json). Default: .grade/ "
                   "inside the folder graded, .grade/NAME/ beside NAME.zip or NAME.ipynb.")
@click.option("--inside", metavar="PATH",
              help="In a folder or .zip that holds the chapter twice (its modules and its notebook), grade "
                   "this copy: a path inside it, e.g. exercises/ch4.ipynb (default: the one you changed).")
@click.option("-k", "--exercise", "exercises", multiple=True,
              help="Grade only this exercise (ex03_static_args, ex03 or 3); repeatable.")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=None,
              help="Replay the hidden inputs of an earlier run (its seed is in the report).")
@lang_option
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report instead of the table.")
@click.option("--fail-under", type=BarType(), default=None,
              help="Exit with status 1 when the score is below this: points (e.g. 60) or a percentage of the "
                   "maximum score (e.g. 75%).")
@limit_options
@click.option("--allow-weak-sandbox", is_flag=True, envvar="GRADER_ALLOW_WEAK_SANDBOX",
              help="As root without bubblewrap, where the exercises cannot run as uids of their own: run the "
                   "student's code as root anyway (refused otherwise, saying how to get a real sandbox).")
@click.option("--sign-key", type=click.Path(path_type=Path), envvar="GRADE_SIGN_KEY", default=None,
              help="Sign the JSON report with this key file (HMAC); check it later with grade verify.")
@click.option("--open", "open_", is_flag=True, help="Open the HTML report in the browser when grading is done.")
@click.option("--watch", is_flag=True,
              help="Grade, then grade again each exercise whose file you save (Ctrl-C stops). 保存即重新评测。")
@click.option("--hint", "hint", metavar="CHECK",
              help="Show the next layer of a check's hint (e.g. ex02/piecewise.values), without grading: "
                   "why it matters under jit, then a worked explanation of the concept.")
@click.option("-v", "--verbose", is_flag=True, help="Log what the grader does on standard error.")
@gather(what=Selection, limits=LimitOptions, output=Output)
def check_cmd(path: Path, what: Selection, limits: LimitOptions, output: Output, watch: bool, hint: str | None,
              verbose: bool, allow_weak_sandbox: bool) -> None:
    """Grade one submission and write its report. 评测一份作业并写出报告。

    With -k only some exercises are graded: that partial report goes to
    report.partial.json, report.partial.md and report.partial.html, and the full
    report is left as it is. So does the report of a run stopped with Ctrl-C before
    its end.
    """
    from grader.runner.devices import unsupported_system

    lang = output.lang or default_lang()
    catalog = grader_catalog()
    if unsupported_system() is not None and hint is None:  # before anything that needs Linux (fcntl, /proc)
        raise UserError(catalog.render(unsupported_system(), lang))
    from grader.grading import Interrupted, Machinery, grade
    from grader.runner.service import defer_starts, idle_seconds
    from grader.report.render import write_reports
    from grader.submission import SubmissionError

    setup_logging(verbose)
    report_dir = output.report_dir
    if hint is not None:
        _show_hint(path, what.chapter, hint, report_dir, lang)
        return
    # never where a student's code reads it
    key = signing_key(output.sign_key, lang, limits.sandbox) if output.sign_key else None
    path, exercises = _one_exercise_file(path, what.chapter, what.exercises, catalog, lang)
    try:
        options = limits.grade_options(chapter=what.chapter, exercises=exercises, inside=what.inside, seed=what.seed,
                                       allow_weak_sandbox=allow_weak_sandbox)
        # a student's own gradings: seeds drawn ahead, hosts forked warm from the user's service
        machinery = Machinery(ahead=ahead.count(), service=idle_seconds() > 0)
        _build_once(path, what.chapter, limits.sandbox, catalog, lang)
        if watch:
            _watch(path, options, machinery, report_dir or _default_report_dir(path), lang)
            return
        defer_starts()  # a service for the next grading starts once this command has said everything (grader.cli)
        live = sys.stderr.isatty() and not output.as_json
        if live:
            click.echo(safetext.terminal(f"grade: {path} …"), err=True)  # a folder's name: its controls shown
        report = _grade_live(path, options, machinery, catalog, lang) if live else grade(path, options, machinery)
    except SubmissionError as exc:
        raise UserError(catalog.render(exc.text, lang)) from None
    except Interrupted as stop:  # Ctrl-C: every process is gone; keep what was graded
        report = stop.report
        catalog = _chapter_of(report).catalog
        written = write_reports(report, catalog, lang, report_dir or _default_report_dir(path), key=key)
        click.echo(catalog.render(T("ui.interrupted", done=len(report.exercises), total=len(report.exercises)
                                    + len(stop.pending), path=str(written)), lang), err=True)
        sys.exit(130)
    if relay.SERVED[0]:
        report.timings["command_from"] = "warm command"  # this process forked from one (grader.cli.command_server)
    catalog = _chapter_of(report).catalog
    target = report_dir or _default_report_dir(path)
    earlier = last_full_report(target) if report.partial else None
    try:
        written = write_reports(report, catalog, lang, target, key=key)
    except OSError as exc:
        if report_dir is not None:
            raise UserError(catalog.render(T("error.report_dir", path=str(target), detail=exc.strerror), lang)) \
                from None
        target = Path(tempfile.mkdtemp(prefix="grade-report-"))
        written = write_reports(report, catalog, lang, target, key=key)
    _say_written(report, written, catalog, lang, output, earlier, key)
    if output.fail_under is not None and report.score < output.fail_under.points(report.max_score) - 1e-9:
        below = T("ui.below_bar", score=f"{report.score:g}", max_score=f"{report.max_score:g}",
                  bar=output.fail_under.describe(report.max_score))
        click.echo(f"grade: {catalog.render(below, lang)}", err=True)
        sys.exit(EXIT_FAIL_UNDER)


def _say_written(report: Report, written: Path, catalog: Catalog, lang: str, output: Output, earlier: dict | None,
                 key: bytes | None) -> None:
    """The report on standard output (its table, or its JSON), where it was written, whether it is signed;
    the HTML report opened in the browser with ``--open``."""
    from grader.report.render import render_terminal

    if output.as_json:
        click.echo(safetext.json(written.read_text(encoding="utf-8")), nl=False)  # a terminal acts on no control
    else:
        click.echo(render_terminal(report, catalog, lang, color=sys.stdout.isatty(), earlier=earlier), nl=False)
        written_key = "ui.partial_written" if report.partial else "ui.report_written"
        where = T(written_key, json=pasteable(written), md=pasteable(written.with_suffix(".md")),
                  html=pasteable(written.with_suffix(".html")))
        click.echo(safetext.terminal(catalog.render(where, lang)))
    if output.open_ and not output.as_json:
        _open_in_browser(written.with_suffix(".html"), catalog, lang)
    if key is not None:
        from grader.signing import ALGORITHM, key_id

        click.echo(catalog.render(T("ui.signed", algorithm=ALGORITHM, key_id=key_id(key), path=str(written),
                                    key_file=str(output.sign_key)), lang),
                   err=output.as_json)


def _one_exercise_file(path: Path, chapter_id: str | None, exercises: tuple[str, ...], catalog: Catalog,
                       lang: str) -> tuple[Path, tuple[str, ...]]:
    """``grade exercises/ch4/ex02_where.py`` grades that exercise of its folder (``grade exercises/ch4
    -k ex02``); a ``.py`` file that is none of the chapter's exercise files is one line saying so."""
    if path.suffix != ".py" or not path.is_file():
        return path, exercises
    from grader.submission import SubmissionError, resolve_chapter

    try:
        chapter = resolve_chapter(path.parent, chapter_id)
    except SubmissionError as exc:
        raise UserError(catalog.render(exc.text, lang)) from None
    exercise = next((ex for ex in chapter.exercises if ex.filename == path.name), None)
    if exercise is None:
        raise UserError(catalog.render(T("error.not_an_exercise_file", path=str(path), chapter=chapter.id,
                                         expected=", ".join(ex.filename for ex in chapter.exercises[:2]),
                                         folder=pasteable(path.parent)), lang))
    return path.parent, (*exercises, exercise.id)


def _build_once(path: Path, chapter: str | None, sandbox: str, catalog: Catalog, lang: str) -> None:
    """The first grading of a chapter on a machine builds the programs every grading needs first
    (:func:`grader.batch.warmup.build_once`), saying so on standard error."""
    from grader import submission as submissions
    from grader.batch.warmup import build_once

    try:
        found = submissions.resolve_chapter(path, chapter)
    except Exception:  # noqa: BLE001 - the grading names what is wrong with the path
        return
    build_once(found, sandbox=sandbox, say=lambda text: click.echo(catalog.render(text, lang), err=True),
               ahead=ahead.count())


def _watch(path: Path, options: GradeOptions, machinery: Machinery, report_dir: Path, lang: str) -> None:
    """``grade PATH --watch``: grade, then grade again on every save, until Ctrl-C."""
    catalog = grader_catalog()
    try:
        import watchfiles  # noqa: F401 - the watch extra
    except ImportError:
        raise UserError(catalog.render(T("watch.needs_watchfiles"), lang)) from None
    from grader.watch import Watcher

    watcher = Watcher(path, options, catalog, lang, out=sys.stdout, report_dir=report_dir,
                      screen=sys.stdout.isatty(), color=sys.stdout.isatty(), machinery=machinery,
                      timings={"command_from": "warm command"} if relay.SERVED[0] else None)
    try:
        watcher.run()
    except KeyboardInterrupt:
        click.echo(watcher.words(T("watch.stopped", path=str(report_dir))))


def _show_hint(path: Path, chapter_id: str | None, wanted: str, report_dir: Path | None, lang: str) -> None:
    """``grade PATH --hint CHECK``: the next layer of that check's hint, and how many are left."""
    from grader.hint_layers import HintError, next_layer
    from grader.submission import SubmissionError, resolve_chapter

    catalog = grader_catalog()
    try:
        chapter = resolve_chapter(path, chapter_id)
        layer = next_layer(chapter, wanted, report_dir or _default_report_dir(path))
    except SubmissionError as exc:
        raise UserError(catalog.render(exc.text, lang)) from None
    except HintError as exc:
        raise UserError(catalog.render(exc.text, lang)) from None
    words = lambda text: chapter.catalog.render(text, lang)  # noqa: E731
    status = words(T(f"ui.status.{layer.status}")) if layer.status else words(T("hint_layers.not_graded"))
    click.echo(words(T("hint_layers.header", number=layer.number, total=layer.total, check=layer.key,
                       title=layer.check.title, status=status)))
    click.echo(words(layer.text))
    closing = "hint_layers.last" if layer.number >= layer.total else "hint_layers.more"
    click.echo(words(T(closing, path=str(path), check=wanted)))


def _open_in_browser(page: Path, catalog: Catalog, lang: str) -> None:
    """Open the HTML report with the system's browser; say where it is when none can be opened."""
    import webbrowser

    try:
        opened = webbrowser.open(page.resolve().as_uri())
    except webbrowser.Error:
        opened = False
    if not opened:
        click.echo(catalog.render(T("ui.open_failed", path=str(page)), lang), err=True)


def _chapter_of(report: Report) -> Chapter:
    """The report's chapter."""
    return load_chapter(report.chapter)


def _grade_live(path: Path, options: GradeOptions, machinery: Machinery, catalog: Catalog, lang: str) -> Report:
    """Grade with a status line on the terminal saying what is graded now."""
    from grader.grading import grade
    from grader.report.live import LiveStatus

    width = min(shutil.get_terminal_size((100, 24)).columns, 160) - 1
    with LiveStatus(sys.stderr, catalog, lang, width=width) as status:
        return grade(path, options, replace(machinery, on_progress=status))


@cli.command("verify", short_help="Check a signed report or a batch's results (exit 0: valid).")
@click.argument("report", type=click.Path(path_type=Path))
@click.option("--key", "key_path", type=click.Path(path_type=Path), envvar="GRADE_SIGN_KEY", default=None,
              help="The key file the report (or the batch, with grade batch --sign-key) was signed with.")
@lang_option
def verify_cmd(report: Path, key_path: Path | None, lang: str | None) -> None:
    """Check a signed report.json, or every file of grade batch's results folder: exit 0 if
    valid, 1 if changed or unsigned. 校验报告签名，或批量评分结果文件夹中的每个文件。

    A valid report of a partial run (grade PATH -k ...) is said to be partial, with
    the score of its exercises only. A results folder is checked against its sealed
    manifest: every report, the gradebook and the other exports as the batch wrote them.
    """
    import json

    from grader.signing import verify

    lang = lang or default_lang()
    catalog = grader_catalog()
    if report.is_dir():
        _verify_results(report, key_path, catalog, lang)
        return
    if key_path is None:
        raise UserError(catalog.render(T("error.key_needed", path=str(report)), lang))
    key = signing_key(key_path, lang)
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("schema") != "grade-report/1":
            raise ValueError("no grade-report/1 schema")
    except (OSError, ValueError) as exc:
        raise UserError(catalog.render(T("verify.bad_report", path=str(report), detail=str(exc)), lang)) from None
    result = verify(data, key)
    if result is None:
        click.echo(catalog.render(T("verify.unsigned", path=str(report)), lang), err=True)
        sys.exit(EXIT_FAIL_UNDER)
    if not result:
        click.echo(catalog.render(T("verify.invalid", path=str(report)), lang), err=True)
        sys.exit(EXIT_FAIL_UNDER)
    fields = dict(path=str(report), key_id=data["signature"]["key_id"], score=data.get("score"),
                  max_score=data.get("max_score"))
    graded = [str(e.get("id")) for e in data.get("exercises") or [] if isinstance(e, dict)]
    total = _chapter_size(data)
    if data.get("partial") is True or ("partial" not in data and total and len(set(graded)) < total):
        click.echo(catalog.render(T("verify.valid_partial", n=len(graded), total=total or "?",
                                    ids=", ".join(graded), **fields), lang))
    else:
        click.echo(catalog.render(T("verify.valid", **fields), lang))


def _verify_results(out: Path, key_path: Path | None, catalog: Catalog, lang: str) -> None:
    """``grade verify RESULTS/``: a line for each file not as the batch wrote it (exit 1), else one
    line saying all are."""
    import json

    from grader.batch.manifest import MANIFEST, batch_key, verify
    from grader.signing import key_id

    key = signing_key(key_path, lang) if key_path is not None else None
    problems = verify(out, batch_key(out, key))
    for problem in problems:
        click.echo(catalog.render(problem, lang), err=True)
    if problems:
        click.echo(catalog.render(T("verify.batch.summary", n=len(problems), path=str(out)), lang), err=True)
        sys.exit(EXIT_FAIL_UNDER)
    data = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    who = T("verify.batch.key", key_id=key_id(key)) if key is not None else T("verify.batch.own_key")
    click.echo(catalog.render(T("verify.batch.valid", path=str(out), students=len(data.get("students", {})),
                                exports=len(data.get("exports", {})), sealer=who), lang))


def _chapter_size(data: dict) -> int:
    """How many exercises the report's chapter has: from the report, else from the chapter installed."""
    size = data.get("chapter_exercises")
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    try:
        return len(load_chapter(str(data.get("chapter"))).exercises)
    except ChapterError:
        return 0


def _default_report_dir(path: Path) -> Path:
    """``.grade/`` inside the folder graded; ``.grade/NAME/`` beside ``NAME.zip`` or ``NAME.ipynb`` (each zip and
    notebook a report of its own, however many lie in one folder, apart from the folder's: ``grade exercises``
    and ``grade exercises/ch4.ipynb`` no longer write over each other)."""
    if path.is_dir():
        return path / REPORT_DIR_NAME
    if path.suffix.lower() in (".zip", ".ipynb"):  # beside the folder's own .grade/: never over its report
        return path.parent / REPORT_DIR_NAME / path.stem
    return path.parent / REPORT_DIR_NAME


def last_full_report(folder: Path) -> dict[str, str] | None:
    """The exercises' statuses in the full report of ``folder`` (``{id: status}``), for what to do
    next after a partial run; ``None`` when there is none to read."""
    import json

    try:
        data = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        return {str(e["id"]): str(e["status"]) for e in data["exercises"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


