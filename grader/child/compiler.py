"""The class's compiler: programs a batch's students compile alike, compiled once, by the grader.

In a batch, each student's jobs load the reference's programs by key and write none of
their own (a job runs the student's code: whatever it wrote could not be trusted by
the next student). Yet students of a class write much the same code, and XLA compiles
the same program again for each: most of what a class costs. So a student's job does
not compile a program it cannot find; it asks the grader (:func:`route_compiles`), and
the grader hands the program to the class's compiler: a job of its own (:func:`serve`),
in a sandbox of its own, that runs no student code and writes the class's cache
(:func:`grader.store.class_dir`). It reads the program (MLIR) and the compiler's options
as sent, works out the program's key itself with JAX's own function
(``jax._src.compiler._get_cache_key``: a digest of the program without its debug
information, the options and the versions), compiles the program when the key is not
there yet, and says the key. The asking job then loads it from the class's cache by
that key, as it loads the reference's programs. The compiler strips the program's debug
information first and names its module :data:`~grader.child.jax_setup.PROGRAM_NAME` (its
key is computed without either: :func:`~grader.child.jax_setup.name_free_cache_keys`): no
student's file names, lines or function names end up in what a classmate loads.

What a job can put into the class's cache is therefore only what the grader compiled
from a program whose digest is the key: a job that sends something else makes an
entry under that something else's key, which only a job that lowered the very same
program ever loads. The class's cache is read-only in every student's sandbox and not
listable.

JAX reports a program loaded so as a compile all the same (``backend_compile_duration``
is timed around the whole of ``compile_or_get_cached``), so compile counts do not
change; nor does the XLA dump's cross-check, which only looks for more modules than
reported. A program with host callbacks (``jax.debug.print``) is never cached by JAX
and is compiled by the job itself, as is any program the class's compiler cannot take
(an error, a program it cannot parse, no answer before the job's deadline).
"""
from __future__ import annotations

import base64
import io
import threading
import time
from typing import Any

from grader.protocol import OP, FromJob, ToJob, message, word_of

#: programs the class's compiler parses in one MLIR context before it makes a fresh one
PROGRAMS_PER_CONTEXT = 64
#: programs of this job compiled by the class's compiler and loaded from the class's cache (for the timings)
SERVED = [0]


def route_compiles(channel: Any) -> bool:
    """In a student's job: a program not in any cache is compiled by the class's compiler (see the
    module), asked for over ``channel``; ``False`` where JAX has no such place to hook."""
    try:
        from jax._src import compiler
    except ImportError:
        return False
    local = getattr(compiler, "_compile_and_write_cache", None)
    read = getattr(compiler, "_cache_read", None)
    if local is None or read is None:
        return False
    main = threading.main_thread()

    def compile_in_class(backend, computation, executable_devices, compile_options, host_callbacks,
                         module_name, cache_key):
        # a callback's program is never cached; another thread's request could cross the probe's messages
        if not host_callbacks and threading.current_thread() is main:
            key = _ask(channel, computation, compile_options)
            if key is not None and key == cache_key:
                executable, _ = read(module_name, cache_key, compile_options, backend, executable_devices)
                if executable is not None:
                    SERVED[0] += 1
                    return executable
        return local(backend, computation, executable_devices, compile_options, host_callbacks,
                     module_name, cache_key)

    compiler._compile_and_write_cache = compile_in_class
    return True


def _ask(channel: Any, computation: Any, compile_options: Any) -> str | None:
    """The key the class's compiler wrote the program under, or ``None``."""
    try:
        program = io.BytesIO()
        computation.operation.write_bytecode(file=program)
        options = compile_options.SerializeAsString()
    except Exception:  # noqa: BLE001 - a program that cannot be sent is compiled here
        return None
    channel.send(message(FromJob.COMPILE, module=base64.b64encode(program.getvalue()).decode("ascii"),
                         options=base64.b64encode(options).decode("ascii")))
    answer = channel.recv()
    if answer is None:  # the grader is gone
        raise SystemExit(0)
    if word_of(answer, ToJob) is not ToJob.COMPILED:
        raise RuntimeError(f"the grader answered a compile request with {answer[OP]!r}")
    key = answer.get("key")
    return key if isinstance(key, str) else None


def _without_dumps(options: Any) -> Any:
    """``options`` with XLA's dump settings cleared: a job's options name its own dump folder (the
    grader counts what XLA compiled there), and a student's could name any folder the compiler may
    write, the class's cache among them. Dumping changes no program, and JAX leaves these settings
    out of a program's key (``cache_key._hash_serialized_compile_options``), so the key is the same."""
    debug = options.executable_build_options.debug_options
    for name in dir(debug):
        if name.startswith("xla_dump"):
            value = getattr(debug, name)
            setattr(debug, name, type(value)())  # "", False, 0
    options.env_option_overrides = [(flag, value) for flag, value in options.env_option_overrides
                                    if not str(flag).lstrip("-").startswith("xla_dump")]
    return options


def serve(channel: Any) -> None:
    """The class's compiler: compile each program sent (``compile``), answer its key (``compiled``),
    until the grader closes the channel. Runs no student code; its cache is the class's."""
    import numpy as np
    from jax._src import compiler, xla_bridge
    from jax._src.interpreters import mlir
    from jax._src.lib import xla_client as xc
    from jax._src.lib.mlir import ir, passmanager

    from grader.child import jax_setup

    backend = xla_bridge.get_backend()
    devices = np.array(backend.local_devices()[:1])
    executable_devices = xc.DeviceList(tuple(devices.flat))
    served = 0
    while True:
        order = channel.recv()
        if order is None or word_of(order, ToJob) is not ToJob.COMPILE:
            return
        if served % PROGRAMS_PER_CONTEXT == 0:  # a context keeps every constant parsed in it
            context = mlir.make_ir_context()
            with context:
                strip = passmanager.PassManager.parse("builtin.module(strip-debuginfo)")
        served += 1
        began = time.process_time()
        try:
            with context:
                module = ir.Module.parse(base64.b64decode(str(order.get("module")), validate=True))
                strip.run(module.operation)  # no student's file, line or name in what others load
                module.operation.attributes["sym_name"] = ir.StringAttr.get(jax_setup.PROGRAM_NAME)
                options = _without_dumps(xc.CompileOptions.ParseFromString(
                    base64.b64decode(str(order.get("options")), validate=True)))
                key = compiler._get_cache_key(options, backend, module, devices)
                if key is None:
                    raise ValueError("no cache key")
                if not compiler._is_executable_in_cache(backend, key):
                    compiler._compile_and_write_cache(backend, module, executable_devices, options, [],
                                                      jax_setup.PROGRAM_NAME, key)
            answer = message(FromJob.COMPILED, key=key)
        except Exception as exc:  # noqa: BLE001 - the asking job compiles it itself
            answer = message(FromJob.COMPILED, key=None, error=f"{type(exc).__name__}: {exc}"[:300])
        answer["cpu_s"] = round(time.process_time() - began, 4)  # for the asking job's timings
        channel.send(answer)
