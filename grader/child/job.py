"""One job: the forked child that imports one student module and runs its probe.

The conversation with the grader, over the job's socket (the words are
:mod:`grader.protocol`'s ``FromJob`` and ``ToJob``)::

    job    -> HELLO (env, memory)                 backend started, limits set
    job    -> IMPORTED (names)                    or IMPORT_ERROR (type, message, where)
    grader -> INPUTS (inputs, ahead?, part?)      hidden inputs, only after the import; the seeds
                                                  drawn ahead (a reference's); which of the jobs
                                                  sharing the probe this is ([index, count])
    job    -> RECORD (key, value)                 any number, as they happen
    job    -> MARK (key)                          a moment on the grader's clock: the job waits
    grader -> GO                                  for this, stamped when the grader sends it
    job    -> DONE (work)                         or PROBE_ERROR (type, traceback)

Hidden inputs arrive after the student's module has been imported, so code run at
import time cannot see them.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import socket
import sys
import time
import traceback
from types import ModuleType
from typing import Any, Iterator

from grader.child import jax_setup
from grader.protocol import FromJob, ToJob, message, word_of
from grader.wire import Channel


def _environment() -> dict:
    import jax
    import jaxlib

    device = jax.devices()[0]
    return {
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "jaxlib": getattr(jaxlib, "__version__", "?"),
        "backend": jax.default_backend(),
        "device_kind": getattr(device, "device_kind", str(device)),
        "device_count": jax.device_count(),
        "cpu_count": os.cpu_count(),
    }


#: the matrix products' precision of a job on an accelerator (the student's and the reference's alike). A TPU
#: multiplies float32 matrices in one pass of bfloat16 by default inside ``jit`` and exactly outside it: on
#: a TPU v5e the provided ``heavy`` jitted differed from its eager run by 2.7e-4 (relative 2e-3) and by
#: nothing under ``highest``; a GPU's TensorFloat-32 likewise. Values are compared at float32 precision,
#: as on a CPU, and a device's default is never taken for a student's mistake.
MATMUL_PRECISION = "highest"


@contextlib.contextmanager
def pools_for_one_cpu(pin: bool = True) -> Iterator[None]:
    """JAX's backend started while this process may run on one CPU only, then every CPU again.

    XLA sizes its thread pools by the CPUs a process may use when its client starts (61 threads on
    13 CPUs, 13 on one; 17 and 13 on two), and keeps them. A job's work is small, and a timed one is
    timed on one CPU: pools per core only add threads, and every thread counts against the user's
    process limit where jobs have no uid of their own (``RLIMIT_NPROC``: 256 jobs' threads failed there)."""
    from grader import affinity

    cpus = affinity.available()
    one = [cpus[os.getpid() % len(cpus)]] if len(cpus) > 1 and pin else []  # jobs spread over the CPUs
    pinned = bool(one) and affinity.pin(os.getpid(), one)
    try:
        yield
    finally:  # back, unless the host moved the job meanwhile (a timed exercise's rounds: ToHost.CORES)
        if pinned and affinity.available() == one:
            affinity.pin(os.getpid(), cpus)


def _limit_memory(limits: dict, backend: str) -> dict:
    """Cap the address space once the backend is up (accelerators reserve huge ranges); returns what
    the grader needs to tell a job that ran out of memory: the resident memory the job holds
    now, before the student's code runs (``rss_kb``), the address space it holds now (``vm_kb``, the
    cap's base), and the memory it may add (``limit_bytes``, ``None`` where nothing is capped)."""
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    rss_kb = int(fields.get("VmRSS", "0 kB").split()[0])
    extra = limits.get("memory_bytes")
    if not extra or backend != "cpu":
        return {"rss_kb": rss_kb, "limit_bytes": None}
    import resource

    current = int(fields["VmSize"].split()[0]) * 1024
    cap = current + int(extra)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    return {"rss_kb": rss_kb, "vm_kb": current // 1024, "limit_bytes": int(extra)}


def _import_error(exc: BaseException, module_dir: str) -> dict:
    from grader.trusted import safe_str, student_frame

    info = message(FromJob.IMPORT_ERROR, type=type(exc).__name__, message=safe_str(exc))
    if isinstance(exc, SyntaxError):
        info["where"] = f"{os.path.basename(exc.filename or '?')}:{exc.lineno}"
        info["message"] = str(exc.msg)
    else:
        info["where"] = student_frame(exc.__traceback__, module_dir)
    return info


#: a file beside the modules saying that they are a notebook's (:mod:`grader.replay`): each is run
#: statement by statement, as :func:`import_notebook` does
NOTEBOOK_MODULES = ".notebook"
#: at most this many statements that raised are told to the grader
MAX_SKIPPED = 20


def import_notebook(name: str, module_dir: str) -> tuple[ModuleType, list[dict]]:
    """Import the module ``name`` made of a notebook's cells, one top-level statement at a time.

    The cells ran in the student's kernel; a statement that raises here (a device assert,
    an API of another JAX version, a module the grader lacks) is skipped and listed
    (``where``, ``type``, ``message``), and the next one runs, as the next cell did. As in
    IPython (``InteractiveShell.init_builtins`` puts ``display`` into the builtins), a
    cell's ``display(...)`` is a name; here it shows nothing. A ``from __future__`` import
    holds for the statements after it. ``SystemExit`` and ``KeyboardInterrupt`` stop the
    import, as in a module.
    """
    import __future__
    import ast
    import builtins
    import importlib.util

    from grader.trusted import safe_str, student_frame

    if not hasattr(builtins, "display"):
        builtins.display = _display
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    with open(spec.origin, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), spec.origin)
    flags, skipped = 0, []
    for node in tree.body:
        code = compile(ast.Module(body=[node], type_ignores=[]), spec.origin, "exec", flags=flags, dont_inherit=True)
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            flags |= sum(getattr(__future__, a.name).compiler_flag for a in node.names
                         if hasattr(__future__, a.name))
        try:
            exec(code, module.__dict__)  # noqa: S102 - the student's own statement, in the sandbox
        except Exception as exc:  # noqa: BLE001 - told, and the next statement runs
            if len(skipped) < MAX_SKIPPED:
                skipped.append({"where": student_frame(exc.__traceback__, module_dir) or
                                f"{os.path.basename(spec.origin)}:{node.lineno}",
                                "type": type(exc).__name__, "message": safe_str(exc)[:200]})
    return module, skipped


def _display(*objects: Any, **options: Any) -> None:
    """IPython's ``display``, where nothing is displayed."""
    return None


STACK_FILE = ".stack"
_stack_file = None


def _dump_stack_on_request() -> None:
    """On SIGUSR1 (sent by the host when the job ran past its limit), write every thread's stack.

    faulthandler writes from C, so even a ``while True: pass`` or a long compile is
    interrupted to say where it is; the grader reads the file to tell the student the
    line their code was stuck on.
    """
    import faulthandler
    import signal

    global _stack_file
    try:
        _stack_file = open(STACK_FILE, "w")  # noqa: SIM115 - held open for the job's life
        faulthandler.register(signal.SIGUSR1, file=_stack_file, all_threads=True, chain=False)
    except (OSError, RuntimeError, ValueError):
        pass


#: this process's CPU seconds, by the clock taken before any student code ran (for the report's timings)
_PROCESS_TIME = time.process_time


def _cpu() -> float:
    return round(_PROCESS_TIME(), 4)


class _JaxWork:
    """Seconds this job spent in JAX's stages (tracing, lowering, compiling, loading programs from the
    persistent cache), from JAX's own duration events, and how many programs it compiled or loaded
    (``programs``), of which loaded from the cache (``loaded``); for the report's timings, never for a verdict."""

    EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace_s",
              "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
              "/jax/core/compile/backend_compile_duration": "compile_s",
              "/jax/compilation_cache/cache_retrieval_time_sec": "cache_load_s"}

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(self.EVENTS.values(), 0.0)
        self.programs = self.loaded = 0
        #: 1 where this job compiles quickly (:mod:`grader.child.quick_compile`)
        self.quick = 0
        try:
            import jax.monitoring

            jax.monitoring.register_event_duration_secs_listener(self._on_duration)
            jax.monitoring.register_event_listener(self._on_event)
        except (ImportError, AttributeError):
            pass

    def _on_duration(self, name: str, duration: float, **_kwargs: Any) -> None:
        field = self.EVENTS.get(name)
        if field is not None:
            self.seconds[field] += duration
            self.programs += field == "compile_s"

    def _on_event(self, name: str, **_kwargs: Any) -> None:
        self.loaded += name == "/jax/compilation_cache/cache_hits"

    def summary(self) -> dict:
        try:
            from grader.child.compiler import SERVED

            return {"cpu_s": _cpu(), "programs": int(self.programs), "loaded": int(self.loaded), "served": SERVED[0],
                    "quick": self.quick, **{k: round(float(v), 4) for k, v in self.seconds.items()}}
        except Exception:  # noqa: BLE001 - figures for the timings only: a job never fails on them
            return {}


def run(order: dict, sock: socket.socket) -> None:
    try:
        _run(order, sock)
    finally:  # a program the reference's job marked as being compiled and never wrote is not on its way
        jax_setup.unmark_compiles()


def _run(order: dict, sock: socket.socket) -> None:
    channel = Channel(sock, expects=ToJob)
    options = order.get("options", {})
    work = _JaxWork()
    jax_setup.one_mlir_context()
    import jax  # the settings below come before the backend starts: each client reads them once

    if options.get("platform"):  # the CPU beside an accelerator that admits one process at a time
        jax.config.update("jax_platforms", options["platform"])
    if options.get("sync_cpu_dispatch"):
        jax.config.update("jax_cpu_enable_async_dispatch", False)
    caches = options.get("compile_cache_read") or []
    if options.get("compile_cache") or caches:
        jax_setup.use_compile_caches(options.get("compile_cache"), caches,
                                     mark_compiles=order.get("side") == "reference")
        jax_setup.name_free_cache_keys()
    try:
        with pools_for_one_cpu(not options.get("on_device")):  # a TPU's runtime starts its own (170 threads)
            env = _environment()
    except Exception as exc:  # noqa: BLE001 - the accelerator held by another process, say: the grader decides
        from grader.trusted import safe_str

        channel.send(message(FromJob.NO_BACKEND, error=safe_str(exc)[:800], cpu_s=_cpu()))
        return
    if env["backend"] != "cpu":  # an accelerator's float32 matrix products at float32 precision, on both sides
        jax.config.update("jax_default_matmul_precision", MATMUL_PRECISION)
        env["matmul_precision"] = MATMUL_PRECISION
    if (options.get("compile_cache") or caches) and env["backend"] == "cpu":
        jax_setup.portable_cache_keys()
    memory = _limit_memory(order.get("limits", {}), env["backend"])
    channel.send(message(FromJob.HELLO, env=env, memory=memory, cpu_s=_cpu()))
    from grader.child import compiler

    if options.get("serve") == "compiles":  # the class's compiler: no student's module, programs to compile
        channel.send(message(FromJob.IMPORTED, names={}, skipped=[], cpu_s=_cpu()))
        compiler.serve(channel)
        return
    if options.get("class_compiler"):
        compiler.route_compiles(channel)
    if (options.get("quick_compile") or options.get("quick_until_timed")) and env["backend"] == "cpu":
        from grader.child.quick_compile import quick_compiles

        work.quick = int(quick_compiles())

    from grader.child import guard
    from grader.child.probe import ProbeContext, describe_callable, prepare
    from grader.child.programs import FirstCalls
    from grader.primitives.compiles import COUNTER

    prepare()
    package = importlib.import_module(order["package"])  # the exercise package (already imported by the host)
    watch = guard.snapshot(tuple(order.get("chapter_modules", ())))

    _dump_stack_on_request()
    module_dir = os.path.realpath(order["module_dir"])
    sys.dont_write_bytecode = True
    sys.path.insert(0, module_dir)
    skipped: list[dict] = []
    try:
        if os.path.exists(os.path.join(module_dir, NOTEBOOK_MODULES)):
            module, skipped = import_notebook(order["student_module"], module_dir)
        else:
            module = importlib.import_module(order["student_module"])
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import included
        channel.send(_import_error(exc, module_dir))
        return
    names = {}
    for name in order.get("functions", ()):
        if hasattr(module, name):
            names[name] = describe_callable(getattr(module, name))
        else:
            names[name] = {"missing": True}
    channel.send(message(FromJob.IMPORTED, names=names, skipped=skipped, cpu_s=_cpu()))
    channel.send(message(FromJob.INTEGRITY, stage="import", changed=watch.changes()))

    given = channel.recv()
    if not given or word_of(given, ToJob) is not ToJob.INPUTS:
        return
    keys = getattr(package, "KEYS", None)
    if keys is None or options.get("all_records"):  # a release's reference run plays the student too: every record
        keep = None
    elif order.get("side") == "reference":
        keep = keys.for_reference
    else:
        keep = keys.for_student if getattr(keys, "reference_only", ()) else None
    first_calls = FirstCalls() if options.get("programs") and order.get("side") == "student" else None
    ctx = ProbeContext(channel, module, given["inputs"], module_dir, os.getcwd(), keep=keep,
                       side="reference" if order.get("side") == "reference" else "student", part=given.get("part"),
                       first_calls=first_calls)
    probed = _PROCESS_TIME()
    try:
        package.probe(ctx)
    except BaseException as exc:  # noqa: BLE001
        channel.send(message(FromJob.PROBE_ERROR, type=type(exc).__name__,
                             traceback="".join(traceback.format_exception(exc))[-4000:]))
        return
    channel.send(message(FromJob.INTEGRITY, stage="probe", changed=watch.changes(), compiles_total=COUNTER.total))
    if first_calls is not None:  # after every record and the compiles counted: no verdict depends on it
        channel.send(message(FromJob.PROGRAMS, functions=first_calls.traced()))
    if order.get("side") == "reference":
        probe_ahead(channel, lambda inputs, sink: package.probe(ProbeContext(
            sink, module, inputs, module_dir, os.getcwd(), keep=keep, side="reference")), given.get("ahead"),
            budget_s=_PROCESS_TIME() - probed)
    channel.send(message(FromJob.DONE, work=work.summary()))


#: a seed drawn ahead whose probe took more CPU than this compiled programs of its own
AHEAD_CPU_S = 0.05


def probe_ahead(channel: Channel, probe: Any, ahead: Any, budget_s: float = 0.0) -> None:
    """The reference's probe again on the inputs of each seed drawn ahead (:mod:`grader.ahead`), its
    records sent in one message per seed. The programs are those the probe just compiled (the shapes
    are the exercise's own), so each costs milliseconds. A seed whose probe took longer (more than
    :data:`AHEAD_CPU_S`) compiled programs of its own (shapes drawn per seed, as ex08's): such seeds
    are probed until together they cost what the job's own probe did (``budget_s``), and at least one.
    A probe that fails ends it."""
    costly = 0.0
    for index, inputs in enumerate(ahead if isinstance(ahead, list) else ()):
        started, sink = _PROCESS_TIME(), _Kept()
        try:
            probe(inputs, sink)
        except BaseException:  # noqa: BLE001 - nothing kept of it; the main outcome stands
            return
        channel.send(message(FromJob.AHEAD, index=index, records=sink.records))
        spent = _PROCESS_TIME() - started
        costly += spent if spent > AHEAD_CPU_S else 0.0
        if costly > max(budget_s, AHEAD_CPU_S):
            return


class _Kept:
    """A probe's channel for a seed drawn ahead: its records kept, nothing else said, nothing asked."""

    def __init__(self) -> None:
        self.records: dict[str, Any] = {}

    def send(self, said: dict) -> None:
        if word_of(said, FromJob) is FromJob.RECORD:
            self.records[said["key"]] = said["value"]

    def recv(self) -> None:
        raise RuntimeError("a probe run ahead asks the grader nothing")
