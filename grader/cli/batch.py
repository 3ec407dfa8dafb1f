"""``grade batch SUBMISSIONS/ --chapter ch4 --out RESULTS/ [-j N]``: a whole class in one command.

A thin layer over :func:`grader.batch.run.run_batch`: options in, a progress bar with
an ETA on a terminal (rich) or a line per student otherwise, one line at the end
naming the gradebook and the summary. Exit status 0 when the batch ran to its end
(whatever the grades), 2 when it cannot start, 130 when interrupted (what was graded
is kept; the same command resumes).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from pathlib import Path

import click

from grader.cli.app import UserError, cli, gather, lang_option, limit_options, setup_logging
from grader.cli.keys import signing_key
from grader.i18n import T, default_lang, grader_catalog
from grader.options import LimitOptions


@cli.command("batch", short_help="Grade a class: a platform's download, or a folder per student.")
@click.argument("submissions", type=click.Path(path_type=Path))
@click.option("--layout", type=click.Choice(["auto", "folders", "canvas", "moodle", "gradescope"]), default="auto",
              show_default=True, help="How SUBMISSIONS is laid out: told from its names, or the platform it came from.")
@click.option("--assignment", default="",
              help="The assignment's column in the platform's gradebook import (Canvas: 'Chapter 4 (98765)', as in "
                   "Canvas's own export); default: the chapter's title.")
@click.option("--gradebook", "gradebook", type=click.Path(path_type=Path), default=None,
              help="The platform's own grading file to fill and upload again (Moodle's grading worksheet, Canvas's "
                   "Grades > Export, Gradescope's roster): written to OUT under its own name.")
@click.option("--teams", is_flag=True,
              help="Moodle: the assignment has 'Students submit in groups' on (its folders are named after groups); "
                   "told without this from a Default group folder or the worksheet's Group column.")
@click.option("--chapter", required=True, help="Chapter id, e.g. ch4.")
@click.option("--out", "out", type=click.Path(path_type=Path), required=True,
              help="Results folder: reports, grades.csv, junit.xml, summary.md/html, manifest.json.")
@click.option("-j", "--jobs", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Submissions graded at once (local processes, or a local Dask cluster's workers).")
@click.option("-k", "--exercise", "exercises", multiple=True,
              help="Grade only this exercise (ex03_static_args, ex03 or 3); repeatable.")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=None,
              help="The class's seed (default: the one RESULTS/ recorded, else a fresh one).")
@click.option("--executor", type=click.Choice(["local", "dask"]), default="local", show_default=True,
              help="Where the gradings run: here, or on Dask (a local cluster, or --scheduler).")
@click.option("--scheduler", default=None, help="A running Dask scheduler's address (tcp://host:8786).")
@limit_options
@click.option("--allow-weak-sandbox", is_flag=True,
              help="Grade even without bubblewrap and per-job uids (the summary says so on its first line).")
@click.option("--force", is_flag=True, help="Grade every student again, even those already graded.")
@click.option("--similarity", is_flag=True,
              help="Also rank the pairs of students whose work is unusually alike, by source and by what their "
                   "functions trace to (similarity.html, similarity.csv: for the instructor only).")
@click.option("--sign-key", "sign_key", type=click.Path(path_type=Path), envvar="GRADE_SIGN_KEY", default=None,
              help="Seal the results with this key file (HMAC), to check them anywhere with grade verify RESULTS/ "
                   "--key FILE; default: a key of the batch's own, kept on this machine.")
@lang_option
@click.option("-v", "--verbose", is_flag=True, help="Log what the grader does on standard error.")
@gather(limits=LimitOptions)
def batch_cmd(submissions: Path, layout: str, assignment: str, gradebook: Path | None, teams: bool, chapter: str,
              out: Path, jobs: int, exercises: tuple[str, ...], seed: int | None, executor: str, scheduler: str | None,
              limits: LimitOptions, allow_weak_sandbox: bool, force: bool, similarity: bool, sign_key: Path | None,
              lang: str | None, verbose: bool) -> None:
    """Grade every submission in SUBMISSIONS: a platform's download as it comes (Canvas's or
    Moodle's zip, Gradescope's export, or the folder they unzip to), or a folder with a
    folder, notebook or .zip per student. 批量评分全班作业（可直接使用平台的下载文件）。

    Running the same command again resumes: students already graded with unchanged
    files and the same seed are kept (--force grades them again).
    """
    from grader.runner.devices import unsupported_system

    lang = lang or default_lang()
    catalog = grader_catalog()
    words = lambda text: catalog.render(text, lang)  # noqa: E731
    if unsupported_system() is not None:  # before anything that needs Linux is imported (fcntl, /proc)
        raise UserError(words(unsupported_system()))
    from grader.batch.run import BatchError, BatchOptions, make_executor, run_batch

    setup_logging(verbose)
    if scheduler and executor != "dask":
        raise UserError(words(T("batch.error.scheduler_needs_dask")))
    if executor == "dask":
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise UserError(words(T("batch.error.no_dask"))) from None
    settings = limits.to_dict()
    if settings.pop("device") != "auto":  # many gradings at once: where JAX puts them, the CPU beside a TPU
        raise UserError(words(T("batch.error.device")))
    options = BatchOptions(chapter=chapter, out=out, exercises=exercises, seed=seed, jobs=jobs, executor=executor,
                           scheduler=scheduler, allow_weak_sandbox=allow_weak_sandbox, **settings,
                           force=force, lang=lang, layout=layout, assignment=assignment, gradebook=gradebook,
                           teams=teams, similarity=similarity,
                           sign_key=signing_key(sign_key, lang, limits.sandbox) if sign_key is not None else None)
    try:
        if scheduler is None:  # graded on this machine: the chapter's programs built once, first
            _build_once(chapter, limits.sandbox, words)
        display = _Display(words, options)
        executor = make_executor(options)
        if executor_name(executor) == "dask":
            executor.on_dashboard = lambda url: display.say(T("batch.ui.dashboard", url=url,
                                                              log=str(Path(out) / DASK_LOG)))
        with display, dask_logs(Path(out) / DASK_LOG, verbose=verbose, dask=executor_name(executor) == "dask"):
            result = run_batch(submissions, options, executor=executor, on_plan=display.plan, on_result=display.row)
    except BatchError as exc:
        raise UserError(words(exc.text)) from None
    except KeyboardInterrupt as stop:
        partial = getattr(stop, "result", None)
        if partial is None:  # before the class was planned (the sandbox probed, the download read, the build)
            click.echo(words(T("batch.ui.interrupted_early", out=str(out))), err=True)
        else:
            click.echo(words(T("batch.ui.interrupted", done=len(partial.graded) + len(partial.skipped),
                               total=len(partial.rows), out=str(out))), err=True)
        sys.exit(130)
    problems = sum(r.status != "completed" for r in result.rows)
    lost = getattr(executor, "workers_lost", 0)
    if lost:
        click.echo(words(T("batch.ui.workers_lost", n=lost, graded=sum(r.status == "completed" for r in result.rows),
                           total=len(result.rows))), err=True)
    click.echo(words(T("batch.ui.done", graded=len(result.graded), skipped=len(result.skipped), problems=problems,
                       grades=str(result.paths["grades"]), summary=str(result.paths["summary_html"]))))
    if result.similarity is not None:
        click.echo(words(T("batch.similarity.written", pairs=len(result.similarity.pairs),
                           students=len(result.similarity.students), html=str(result.paths["similarity_html"]),
                           csv=str(result.paths["similarity_csv"]))))


@cli.command("similarity", short_help="Pairs of a batch's students unusually alike.")
@click.argument("results", type=click.Path(path_type=Path))
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="The lowest score a pair reported has (0 to 1; default 0.5).")
@lang_option
def similarity_cmd(results: Path, threshold: float | None, lang: str | None) -> None:
    """Compare the students of a batch graded with --similarity (its RESULTS folder): writes
    similarity.html and similarity.csv there, for the instructor only. 找出作业异常相似的学生对（仅供教师）。"""
    from grader.batch.manifest import MANIFEST
    from grader.batch.similarity import THRESHOLD, collect, similarity_report
    from grader.chapter import ChapterError, load_chapter

    lang = lang or default_lang()
    words = lambda text: grader_catalog().render(text, lang)  # noqa: E731
    try:
        manifest = json.loads((Path(results) / MANIFEST).read_text(encoding="utf-8"))
        chapter = load_chapter(str(manifest["chapter"]))
    except (OSError, ValueError, KeyError, TypeError, ChapterError):
        raise UserError(words(T("batch.similarity.not_results", path=str(results)))) from None
    if not collect(results):
        raise UserError(words(T("batch.similarity.no_programs", path=str(results))))
    graded = [name for name, entry in (manifest.get("students") or {}).items() if entry.get("report")]
    found = similarity_report(Path(results), chapter, lang=lang, graded=graded, seed=manifest.get("seed"),
                              threshold=THRESHOLD if threshold is None else threshold)
    click.echo(words(T("batch.similarity.written", pairs=len(found.pairs), students=len(found.students),
                       html=str(found.paths["html"]), csv=str(found.paths["csv"]))))


def _build_once(chapter: str, sandbox: str, words) -> None:
    """Before the first batch (or grading) of a chapter on this machine, its programs are built
    (:func:`grader.batch.warmup.build_once`): no student's grading compiles them."""
    from grader.batch.warmup import build_once
    from grader.chapter import ChapterError, load_chapter

    try:
        found = load_chapter(chapter)
    except ChapterError:  # the batch names what is wrong
        return
    build_once(found, sandbox=sandbox, say=lambda text: click.echo(words(text), err=True))


#: Dask's own log, in the results folder (:data:`grader.batch.manifest.LOGS`)
DASK_LOG = "dask.log"
#: the loggers of Dask and of what it runs on: their INFO lines (a scheduler starting, workers
#: registering, nannies closing) are the cluster's diary, not the instructor's screen
DASK_LOGGERS = ("distributed", "dask", "tornado", "bokeh")


def executor_name(executor) -> str:
    return "dask" if type(executor).__name__ == "DaskExecutor" else "local"


@contextlib.contextmanager
def dask_logs(path: Path, *, verbose: bool, dask: bool):
    """While a batch runs on Dask: Dask's log lines go to ``path`` (made when the first comes), and to
    the terminal too only with ``--verbose``."""
    if not dask:
        yield
        return
    handler = _LogFile(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    loggers = [logging.getLogger(name) for name in DASK_LOGGERS]
    before = [(logger.propagate, logger.level) for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = verbose
        if logger.level == logging.NOTSET or logger.level > logging.INFO:
            logger.setLevel(logging.INFO)
    # A local cluster's workers are processes of their own, which import Dask afresh and set up their
    # logging from Dask's configuration (distributed/config.py, initialize_logging: a "logging" dict
    # with a "version" is given to logging.config.dictConfig), read from the environment they inherit:
    # their lines (a heartbeat that failed while the cluster closed) go to the same file.
    saved = os.environ.get(WORKER_LOGGING)
    os.environ[WORKER_LOGGING] = repr(_worker_logging(path, verbose))
    try:
        yield
    finally:
        for logger, (propagate, level) in zip(loggers, before):
            logger.removeHandler(handler)
            logger.propagate, logger.level = propagate, level
        handler.close()
        if saved is None:
            os.environ.pop(WORKER_LOGGING, None)
        else:
            os.environ[WORKER_LOGGING] = saved


#: Dask's configuration of its logging, as an environment variable (``distributed.logging``)
WORKER_LOGGING = "DASK_DISTRIBUTED__LOGGING"


def _worker_logging(path: Path, verbose: bool) -> dict:
    """The logging of a local cluster's worker processes (``logging.config.dictConfig``'s schema): Dask's
    loggers into ``path``, and standard error too with ``--verbose``."""
    handlers = {"file": {"class": "logging.FileHandler", "filename": str(path), "formatter": "plain",
                         "delay": True}}
    if verbose:
        handlers["terminal"] = {"class": "logging.StreamHandler", "formatter": "plain"}
    return {"version": 1, "disable_existing_loggers": False,
            "formatters": {"plain": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
            "handlers": handlers,
            "loggers": {name: {"handlers": list(handlers), "level": "INFO", "propagate": False}
                        for name in DASK_LOGGERS}}


class _LogFile(logging.Handler):
    """Log lines appended to a file opened at the first one. Not a ``logging.StreamHandler``: Dask
    quiets every stream handler of its logger while a local cluster starts and runs
    (``distributed.utils.silence_logging_cmgr``), and this file is where its lines belong."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = path
        self._file = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self._file is None:
                self._file = self.path.open("a", encoding="utf-8")
            self._file.write(self.format(record) + "\n")
            self._file.flush()
        except Exception:  # noqa: BLE001 - a log line never stops a batch
            self.handleError(record)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        super().close()


class _Display:
    """A progress bar with an ETA on a terminal (rich); a line per student elsewhere."""

    def __init__(self, words, options):
        self.words = words
        self.options = options
        self.bar = None
        self.task = None
        self.max_score = None

    def __enter__(self) -> "_Display":
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

    def plan(self, to_grade: int, skipped: int, seed: int, klass) -> None:
        from grader.batch.layouts import describe
        from grader.batch.run import make_executor

        click.echo(self.words(describe(klass)), err=True)
        click.echo(self.words(T("batch.ui.plan", to_grade=to_grade, skipped=skipped, seed=seed,
                                executor=make_executor(self.options).describe())), err=True)
        if sys.stderr.isatty() and to_grade:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                console=Console(stderr=True), transient=False)
            self.bar.start()
            self.task = self.bar.add_task(self.words(T("batch.ui.progress")), total=to_grade)

    def say(self, text) -> None:
        """One line of the batch's own, above the progress bar when there is one."""
        line = self.words(text)
        if self.bar is not None:
            self.bar.console.print(line, markup=False, highlight=False)
        else:
            click.echo(line, err=True)

    def row(self, row, done: int, total: int) -> None:
        score = f"{row.total:g}"
        most = row.report.get("max_score", "?") if row.report else "–"
        from grader import safetext

        line = safetext.terminal(self.words(T("batch.ui.row", done=done, total=total, name=row.name, score=score,
                                              max_score=most, status=row.status)))  # a name's controls shown
        if self.bar is not None:
            self.bar.console.print(line, markup=False, highlight=False)
            self.bar.advance(self.task)
        else:
            click.echo(line, err=True)
