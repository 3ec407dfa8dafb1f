"""The ``grade`` command group, its entry point and what every command shares.

``grade PATH`` grades one submission (the student's one command, :mod:`grader.cli.check`);
further verbs are subcommands (``grade verify``, ``grade dev ...``). A user's mistake is
one line on standard error and exit status 2; ``--fail-under`` alone gives 1; a bug of
the grader's is one line too, its traceback in a log file.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import os
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any, Callable

import click

import grader
from grader import __version__, interrupts, safetext
from grader.i18n import LANGS, Catalog, T, default_lang, grader_catalog

log = logging.getLogger("grader")
EXIT_OK, EXIT_FAIL_UNDER, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UserError(click.ClickException):
    """A mistake of the user's: one line, exit status 2 (a file's name in it: its controls shown, never sent)."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str):
        from grader import safetext

        super().__init__(safetext.terminal(message))


class _GradeGroup(click.Group):
    """``grade PATH ...`` runs the ``check`` command; known verbs run themselves.

    ``grade --help`` lists the grading options too, since ``grade PATH`` is the command
    a student runs and the one its errors refer to.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = ["check", *args]
        return super().parse_args(ctx, args)

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage("grade", "PATH [OPTIONS]  |  grade COMMAND [ARGS]...")

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The grading options (``grade PATH [OPTIONS]``), then the group's own and its commands."""
        check = self.commands["check"]
        rows = [record for param in check.get_params(ctx)
                if isinstance(param, click.Option) and "--help" not in param.opts
                for record in [param.get_help_record(ctx)] if record]
        with formatter.section("Grading options (grade PATH [OPTIONS]) / 评测选项"):
            formatter.write_dl(rows)
        super().format_options(ctx, formatter)


@click.group(cls=_GradeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="grade")
def cli() -> None:
    """Grade JAX exercises with hidden checks: grade exercises/ch4

    评测 JAX 练习：grade exercises/ch4

    PATH is a folder with the chapter's modules, a notebook (.ipynb), or a .zip of
    either; a folder or zip holding both is graded from the copy you changed. The
    reports go to .grade/ inside the folder (.grade/NAME/ beside NAME.zip or
    NAME.ipynb): report.json, report.md and report.html, or with -k
    report.partial.json, report.partial.md and report.partial.html.
    """


def lang_option(fn):
    return click.option("--lang", type=click.Choice(LANGS), default=None,
                        help="Report language (default: from the locale). 报告语言。")(fn)


def limit_options(fn):
    """``--sandbox``, ``--timeout``, ``--exercise-timeout`` and ``--memory-limit``: how a submission
    is isolated and limited (``grade PATH`` and ``grade batch`` alike)."""
    options = [
        click.option("--sandbox", type=click.Choice(["auto", "bwrap", "process"]), default="auto",
                     show_default=True, help="Isolation of the student's code."),
        click.option("--timeout", "timeout_s", type=click.FloatRange(1, None), default=900.0, show_default=True,
                     help="Time limit for the whole submission, in seconds."),
        click.option("--exercise-timeout", "exercise_timeout_s", type=click.FloatRange(1, None), default=None,
                     help="Cap every exercise's time limit (seconds)."),
        click.option("--memory-limit", "memory_mb", type=click.IntRange(256, None), default=4096,
                     show_default=True, help="Memory for each exercise's process, in MiB, on top of JAX's own "
                                             "(CPU only)."),
        click.option("--device", type=click.Choice(["auto", "cpu", "device"]), default="auto", show_default=True,
                     help="Where the speed-ups and timings are measured: auto (the accelerator, a TPU or GPU, when "
                          "no other process holds it, else the CPU, saying why), cpu, or device (the accelerator, "
                          "or an error)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def gather(**groups: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Hand a command its options grouped: for each ``name=Group`` (a dataclass), the options named
    after ``Group``'s fields come as one ``Group`` object, the parameter ``name``. Put it right above
    the function, under its Click options: ``@gather(limits=LimitOptions)`` turns ``--sandbox``,
    ``--timeout``, ``--exercise-timeout`` and ``--memory-limit`` into ``limits``."""
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            for name, group in groups.items():
                kwargs[name] = group(**{f.name: kwargs.pop(f.name) for f in dataclasses.fields(group)})
            return fn(**kwargs)

        return command

    return decorate


def setup_logging(verbose: bool) -> None:
    """The grader's log on standard error (``--verbose``: INFO too); a line may quote a student's text
    (a file name, an error), so its controls are shown, never sent (:func:`grader.safetext.terminal`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_TerminalFormatter("grade: %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])


class _TerminalFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return safetext.terminal(super().format(record))


# ------------------------------------------------------------------ entry point
def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` was caused by Ctrl-C: Python wraps what a class's ``__set_name__`` raises (a dataclass's
    field, say, as a module is imported) in a ``RuntimeError``, the ``KeyboardInterrupt`` as its cause."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one line for every error, never a traceback for the user's mistake; after
    Ctrl-C, status 130 (:func:`grader.interrupts.interrupted_exit`)."""
    code = _main(argv)
    if code == interrupts.EXIT_INTERRUPTED:  # the command's own process (no argv given) may end itself
        return interrupts.interrupted_exit(end_process=argv is None)
    return code


def _main(argv: list[str] | None) -> int:
    if signal.getsignal(signal.SIGINT) is grader._quiet_interrupt:  # started: Ctrl-C is handled below from now
        signal.signal(signal.SIGINT, interrupts.on_sigint)
    args = sys.argv[1:] if argv is None else list(argv)
    if not args:  # `grade` alone: show how to use it
        with click.Context(cli, info_name="grade") as ctx:
            click.echo(cli.get_help(ctx))
        return EXIT_OK
    try:
        cli.main(args=args, prog_name="grade", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        message = exc.format_message()
        if isinstance(exc, click.UsageError) and not isinstance(exc, UserError):
            message += " (see grade --help)"
        click.echo(f"grade: error: {message}", err=True)
        return EXIT_USAGE
    except click.Abort:
        click.echo("grade: interrupted", err=True)
        return interrupts.EXIT_INTERRUPTED
    except KeyboardInterrupt:
        click.echo("grade: interrupted", err=True)
        return interrupts.EXIT_INTERRUPTED
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    except Exception as exc:  # noqa: BLE001 - the grader's own bug: one line, details in a file
        if _interrupted(exc):  # Ctrl-C inside something that wraps what it raised (a class being made)
            click.echo("grade: interrupted", err=True)
            return interrupts.EXIT_INTERRUPTED
        log_path = Path(tempfile.gettempdir()) / f"grade-error-{os.getpid()}.log"
        log_path.write_text(traceback.format_exc(), encoding="utf-8")
        lang = default_lang()
        text = Catalog.render(grader_catalog(), T("error.internal", detail=f"{type(exc).__name__}: {exc}",
                                                  log=str(log_path)), lang)
        click.echo(f"grade: {text}", err=True)
        return EXIT_INTERNAL
    return EXIT_OK


