"""The ``grade`` command: a thin layer over :mod:`grader.grading`, the renderers and the
authoring tools. :func:`main` is the console entry point.

Light to import: :func:`main` first hands a student's command to the user's warm command where one runs
(:mod:`grader.cli.relay`); the command group and its modules are imported when the command runs here, or when
one of their names is asked of this package (``from grader.cli import cli``)."""
from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["EXIT_FAIL_UNDER", "EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "UserError", "cli", "main"]

# Before NumPy loads: its BLAS would start a thread per core, which spins after each call;
# the command's own arrays are tiny, and the cores belong to the code being graded.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _app() -> Any:
    from grader.cli import app, batch, check, dev  # noqa: F401 - they add their commands to the group

    return app


def main(argv: list[str] | None = None) -> int:
    """Console entry point (:func:`grader.cli.app.main`): the command's own process first tries the warm command."""
    if argv is None:
        from grader.cli.relay import through_warm_command

        code = through_warm_command(sys.argv[1:])
        if code is not None:
            return code
    try:
        return _app().main(argv)
    finally:
        after_the_command()


def after_the_command() -> None:
    """What waits for the command to have said everything: a warm service to start for the next grading
    (:func:`grader.runner.service.defer_starts`)."""
    service = sys.modules.get("grader.runner.service")
    if service is not None:
        service.start_deferred()


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(_app(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
