"""The grader's own bytecode, written beside its modules for the next grading's processes."""
from __future__ import annotations

from pathlib import Path


def keep_bytecode(package: Path | None = None) -> int:
    """Write the bytecode of the grader's own modules beside them, where it is missing or stale.

    Every grading process (the command, and each host in its sandbox) imports these
    modules, and Python compiles a module that has no valid bytecode on every import.
    The hosts never write bytecode (nothing in a sandbox may), and neither does any
    process where ``PYTHONDONTWRITEBYTECODE`` is set, as in many containers: without
    this, every grading compiles them all three times. Written as ``pip install`` would
    (timestamped ``__pycache__`` files), by the grader's own process only; a package it
    may not write to is left as it is. Returns how many modules were compiled.
    """
    import importlib.util
    import py_compile
    import sys

    package = Path(package or Path(__file__).resolve().parent)
    tag = sys.implementation.cache_tag
    if tag is None:
        return 0
    compiled = 0
    for source in package.rglob("*.py"):
        target = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        try:
            stat = source.stat()
            with open(target, "rb") as pyc:
                head = pyc.read(16)
            if head[:4] == importlib.util.MAGIC_NUMBER and int.from_bytes(head[4:8], "little") == 0 and \
                    int.from_bytes(head[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF and \
                    int.from_bytes(head[12:16], "little") == stat.st_size & 0xFFFFFFFF:
                continue
        except OSError:
            pass
        try:
            py_compile.compile(str(source), cfile=str(target), doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
            compiled += 1
        except py_compile.PyCompileError:
            continue  # a module that does not compile: its import will say so
        except OSError:
            break  # a package it may not write to: no use compiling the rest
    return compiled
