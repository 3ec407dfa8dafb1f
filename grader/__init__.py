"""An auto-grader for the JAX ``jax.jit`` chapter: hidden checks, isolated and exact.

Entry points: the ``grade`` command (:mod:`grader.cli`) and :func:`grader.grading.grade`.
"""
__version__ = "0.1.0"

import os as _os
import signal as _signal
import sys as _sys


def _quiet_interrupt(signum: int, frame: object) -> None:
    """Ctrl-C while the ``grade`` command is still starting (its modules importing, before
    :func:`grader.cli.main`'s handling begins): nothing is started or written yet, so it ends at once, with
    the command's one line, not a traceback."""
    _os.write(2, b"grade: interrupted\n")
    _os._exit(130)


def _started_as_the_command() -> bool:
    """Whether this process is the ``grade`` command (``grade ...`` or ``python -m grader ...``), not a
    program that imports the package (a test run, a host of the grader: ``python -m grader.runner...``)."""
    argv = getattr(_sys, "orig_argv", [])
    if "-m" in argv[:-1]:
        return argv[argv.index("-m") + 1] == "grader"
    return _os.path.basename(_sys.argv[0] if _sys.argv else "") == "grade"


if _started_as_the_command() and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _quiet_interrupt)
