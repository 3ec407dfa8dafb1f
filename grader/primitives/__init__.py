"""Check primitives that chapter authors reuse, one module per kind.

Each module holds both halves of its kind: what a probe uses in the child process to
measure (imports JAX lazily), and what a check uses in the grader's process to judge
(plain NumPy). They know nothing of chapters, the command line or rendering.
"""
