"""What a host (and a template) imports once, before any fork: the standard library's modules a job may
use, NumPy, JAX and its submodules, the grader's instruments and the chapter's modules, then frozen for
the collector (:func:`preload_frozen`). Never the student's code, never JAX's backend."""
from __future__ import annotations

import gc
import importlib
import sys

from grader.child import jax_setup


def _preload(modules: list[str], chapter_folders: list[str]) -> dict:
    """Import what every job needs, so that forking is cheap and jobs import nothing of ours.

    ``modules``: the chapter's modules (exercise packages, provided code), found in
    ``chapter_folders`` when the chapter is not one of the grader's own.
    """
    for name in ("math", "functools", "itertools", "collections", "statistics", "time", "typing",
                 "dataclasses", "numbers", "operator", "contextlib", "abc", "enum", "re", "copy",
                 "random", "warnings", "traceback", "tempfile", "json", "string", "textwrap", "inspect",
                 "resource"):
        importlib.import_module(name)
    import numpy  # noqa: F401
    import jax
    import jax.numpy  # noqa: F401
    import jaxlib

    for name in ("jax.lax", "jax.random", "jax.nn", "jax.tree_util", "jax.extend", "jax.extend.core",
                 "jax.scipy", "jax.scipy.special", "jax.numpy.linalg", "jax.experimental", "jax.stages",
                 "jax.monitoring", "jax.errors", "jax.debug"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    from grader import chapters

    chapters.extend(chapter_folders)
    for name in ("grader.primitives.compiles", "grader.primitives.timing", "grader.primitives.instrument",
                 "grader.primitives.purity",
                 "grader.primitives.structure", "grader.primitives.numeric", "grader.child.guard",
                 "grader.child.job", "grader.child.compiler", *modules):  # a job's own code, imported once here
        importlib.import_module(name)  # everything a probe may use: the guard's snapshot must see it all
    from grader.primitives.compiles import COUNTER

    COUNTER.install()
    jax_setup.prepare_host()

    return {
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "jaxlib": getattr(jaxlib, "__version__", "?"),
    }


def preload_frozen(modules: list[str], chapter_folders: list[str]) -> dict:
    """:func:`_preload`, then everything it made frozen for the jobs to come (``gc.freeze``).

    Importing JAX leaves about 150 000 objects for the collector to track, all kept for
    good. Collecting while they are made finds nothing; frozen before the first fork, they
    are skipped by every job's collections, which would otherwise walk them all, and write
    to each of their pages (copying them from the host's memory into the job's).
    """
    gc.disable()
    try:
        return _preload(modules, chapter_folders)
    finally:
        gc.freeze()
        gc.enable()

