"""The ``grade`` command: a thin layer over :mod:`grader.grading`, the renderers and the
authoring tools. :func:`main` is the console entry point."""
from grader.cli import batch, check, dev  # noqa: F401 - they add their commands to the group
from grader.cli.app import EXIT_FAIL_UNDER, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, UserError, cli, main

__all__ = ["EXIT_FAIL_UNDER", "EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "UserError", "cli", "main"]
