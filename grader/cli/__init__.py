"""The ``grade`` command: a thin layer over :mod:`grader.grading`, the renderers and the
authoring tools. :func:`main` is the console entry point."""
import os

# Before NumPy loads: its BLAS would start a thread per core, which spins after each call;
# the command's own arrays are tiny, and the cores belong to the code being graded.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from grader.cli import batch, check, dev  # noqa: E402,F401 - they add their commands to the group
from grader.cli.app import EXIT_FAIL_UNDER, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, UserError, cli, main  # noqa: E402

__all__ = ["EXIT_FAIL_UNDER", "EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "UserError", "cli", "main"]
