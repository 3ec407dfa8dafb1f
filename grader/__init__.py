"""An auto-grader for the JAX ``jax.jit`` chapter: hidden checks, isolated and exact.

Entry points: the ``grade`` command (:mod:`grader.cli`) and :func:`grader.grading.grade`.
"""
__version__ = "0.1.0"
