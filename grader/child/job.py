"""One job: the forked child that imports one student module and runs its probe.

The conversation with the grader, over the job's socket (the words are
:mod:`grader.protocol`'s ``FromJob`` and ``ToJob``)::

    job    -> HELLO (env, memory)                 backend started, limits set
    job    -> IMPORTED (names)                    or IMPORT_ERROR (type, message, where)
    grader -> INPUTS (inputs)                     hidden inputs, only after the import
    job    -> RECORD (key, value)                 any number, as they happen
    job    -> MARK (key)                          a moment on the grader's clock: the job waits
    grader -> GO                                  for this, stamped when the grader sends it
    job    -> DONE (work)                         or PROBE_ERROR (type, traceback)

Hidden inputs arrive after the student's module has been imported, so code run at
import time cannot see them.
"""
from __future__ import annotations

import importlib
import os
import socket
import sys
import time
import traceback
from types import ModuleType
from typing import Any

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


def _limit_memory(limits: dict, backend: str) -> dict:
    """Cap the address space once the backend is up (accelerators reserve huge ranges); returns what
    the grader needs to tell a job that ran out of memory: the resident memory the job holds
    now, before the student's code runs (``rss_kb``), and the memory it may add (``limit_bytes``,
    ``None`` where nothing is capped)."""
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
    return {"rss_kb": rss_kb, "limit_bytes": int(extra)}


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


def _use_compile_caches(own: str | None, read: list[str]) -> None:
    """Load programs compiled in earlier runs from JAX's persistent cache (even the smallest):
    from this side's own folder ``own`` (where new programs are written), else from the
    ``read`` folders, by key only.

    A program's key is a digest of the program itself (and of the compiler's options
    and versions), so a folder of ``read`` serves only a program this job lowered
    identically: the reference's programs give a student nothing they did not write.
    Those folders are never written and, made unlistable for the jobs' uids, never
    browsed. JAX reports a program loaded from a cache as a backend compile all the
    same, so compile counts do not change.
    """
    import jax

    try:
        jax.config.update("jax_compilation_cache_dir", own or read[0])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        from jax._src import compilation_cache
    except (AttributeError, ValueError, ImportError, IndexError):  # a JAX without these: compile as before
        return
    with compilation_cache._cache_initialized_mutex:
        if compilation_cache._cache is None:
            compilation_cache._cache = _TieredCache(own, read)
            compilation_cache._cache_initialized = True
        cache = compilation_cache._cache
    if isinstance(cache, _TieredCache) and cache.own is None:
        # nothing can be written (a batch's student): JAX would serialize and compress every program
        # it compiles for a write that is dropped; it writes only what took at least this long
        jax.config.update("jax_persistent_cache_min_compile_time_secs", NEVER_WRITE_S)


#: a compile time no program reaches: a job whose cache is read-only has JAX write nothing
NEVER_WRITE_S = 1e9


class _TieredCache:
    """JAX's cache interface over one writable folder and read-only folders (``<key>-cache`` files,
    as JAX's own file cache names them)."""

    def __init__(self, own: str | None, read: list[str]):
        self._path = own or read[0]
        self.own = own
        self.folders = [folder for folder in (own, *read) if folder]
        if own is not None:
            try:
                os.makedirs(own, exist_ok=True)
            except OSError:  # cannot be made: nothing written, nothing lost
                self.own = None

    def get(self, key: str) -> bytes | None:
        for folder in self.folders:
            try:
                with open(os.path.join(folder, f"{key}-cache"), "rb") as handle:
                    return handle.read()
            except OSError:
                continue
        return None

    def put(self, key: str, value: bytes) -> None:
        if self.own is None:
            return
        path = os.path.join(self.own, f"{key}-cache")
        if os.path.exists(path):
            return
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as handle:
                handle.write(value)
            os.chmod(tmp, 0o644)  # readable by key from a student's sandbox (the folder itself is not listable)
            os.replace(tmp, path)
        except OSError:  # a full folder: no cache, no harm
            try:
                os.unlink(tmp)
            except OSError:
                pass

    def clear(self) -> None:
        pass


def _portable_cache_keys() -> None:
    """On a CPU, key each cached program by the program alone, not by the cache's folder.

    JAX points XLA's GPU autotuning caches into the compilation cache's folder, and
    that path becomes part of every program's key: the same program cached in two
    folders is two different entries, and no folder can be given programs compiled for
    another (a student's job loading the reference's programs). A CPU has nothing to autotune.
    """
    import jax

    try:
        jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
    except (AttributeError, ValueError):  # a JAX without the setting: keys as before
        pass


#: programs lowered in one MLIR context before a fresh one is made (:func:`_one_mlir_context`)
LOWERINGS_PER_CONTEXT = 64


def _one_mlir_context() -> None:
    """Lower every program of this job in one MLIR context (one per thread).

    JAX makes a fresh context for each program it lowers, and loading its dialects into
    it takes about a third of the time of lowering a small program and loading it from
    the persistent cache; a job lowers dozens. The programs are the same text, so they
    compile (and count) the same and are found in the cache under the same keys. A
    context keeps every constant lowered in it, so a fresh one is made after
    :data:`LOWERINGS_PER_CONTEXT` programs (a loop that jits new closures over large
    arrays holds no more memory than before). A JAX without this function is left as it is.
    """
    import threading

    try:
        from jax._src.interpreters import mlir

        make = mlir.make_ir_context
    except (ImportError, AttributeError):
        return
    local = threading.local()
    premade = [_PREMADE.pop()] if _PREMADE else []  # the host's, made before the fork: for one thread

    def shared_context():
        context, uses = getattr(local, "context", None), getattr(local, "uses", 0)
        if context is None or uses >= LOWERINGS_PER_CONTEXT:
            try:
                context = premade.pop() if context is None else make()
            except IndexError:
                context = make()
            uses = 0
            local.context = context
        local.uses = uses + 1
        return context

    mlir.make_ir_context = shared_context


#: an MLIR context the host made before forking (:func:`premake_mlir_context`), for its jobs' first lowerings
_PREMADE: list = []


def premake_mlir_context() -> bool:
    """In a host, before it forks: import the MLIR dialects JAX loads on its first lowering and make a
    context with them, so that no job pays for either (a job's first lowering otherwise imports
    ``mhlo``'s Python bindings and loads every dialect into a new context).

    A context starts no thread (it shares JAX's thread pool, which starts its threads on its first
    task, in the job), so forking after it is as safe as before; ``False`` where JAX has no such
    function (nothing is made)."""
    try:
        from jax._src.interpreters import mlir

        _PREMADE[:] = [mlir.make_ir_context()]
        return True
    except (ImportError, AttributeError):
        return False


def cache_traceback_filter() -> bool:
    """In a host, before it forks: JAX's traceback filter remembers, for each file, whether its frames
    are JAX's own (``jax._src.traceback_util.include_filename``), for the jobs it forks.

    An exception raised through a jitted function has every frame of its traceback checked
    against each of JAX's ~30 excluded paths (``os.path.commonpath`` and ``os.path.samefile``:
    two ``stat`` calls a path), about 1.5 ms a frame here; a stub's job raises dozens of them
    (``NotImplementedError`` in every call). The answer for a file depends only on the file
    and the excluded paths (added to as modules are imported: the count is part of the key),
    so each is worked out once; the tracebacks are the same. ``False`` where JAX has no such
    function (nothing is changed)."""
    try:
        from jax._src import traceback_util
    except ImportError:
        return False
    original, excluded = getattr(traceback_util, "include_filename", None), getattr(traceback_util, "_exclude_paths", None)
    if original is None or not isinstance(excluded, list) or getattr(original, "remembers", False):
        return False
    known: dict = {}

    def include_filename(filename: str) -> bool:
        key = (filename, len(excluded))
        answer = known.get(key)
        if answer is None:
            answer = known[key] = original(filename)
        return answer

    include_filename.remembers = True
    traceback_util.include_filename = include_filename
    return True


def find_no_plugins() -> bool:
    """In a host, before it forks: where no PJRT plugin is installed (no ``jax_plugins`` module, no entry
    point of that group: a CPU-only JAX), look for them once here, so that no job does.

    Every process's first backend starts by scanning the entry points of every installed
    distribution for plugins (about 10 ms of a job's CPU here); with none found that scan
    loads nothing and starts nothing, so forking after it is as safe as before. Where a
    plugin is installed (a GPU's) nothing is done here: loading it is left to each job.
    ``True`` when the scan was done here."""
    try:
        from importlib import metadata

        from jax._src import xla_bridge

        if getattr(xla_bridge, "jax_plugins", None) is not None or metadata.entry_points(group="jax_plugins"):
            return False
        xla_bridge._discover_and_register_pjrt_plugins()
        return True
    except (ImportError, AttributeError, TypeError):
        return False


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
                    **{k: round(float(v), 4) for k, v in self.seconds.items()}}
        except Exception:  # noqa: BLE001 - figures for the timings only: a job never fails on them
            return {}


def run(order: dict, sock: socket.socket) -> None:
    channel = Channel(sock, expects=ToJob)
    options = order.get("options", {})
    work = _JaxWork()
    _one_mlir_context()
    if options.get("sync_cpu_dispatch"):
        import jax  # before the backend starts: the CPU client reads it once

        jax.config.update("jax_cpu_enable_async_dispatch", False)
    caches = options.get("compile_cache_read") or []
    if options.get("compile_cache") or caches:
        _use_compile_caches(options.get("compile_cache"), caches)
    env = _environment()
    if (options.get("compile_cache") or caches) and env["backend"] == "cpu":
        _portable_cache_keys()
    memory = _limit_memory(order.get("limits", {}), env["backend"])
    channel.send(message(FromJob.HELLO, env=env, memory=memory, cpu_s=_cpu()))
    from grader.child import compiler

    if options.get("serve") == "compiles":  # the class's compiler: no student's module, programs to compile
        channel.send(message(FromJob.IMPORTED, names={}, skipped=[], cpu_s=_cpu()))
        compiler.serve(channel)
        return
    if options.get("class_compiler"):
        compiler.route_compiles(channel)

    from grader.child import guard
    from grader.child.probe import ProbeContext, describe_callable, prepare
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
    ctx = ProbeContext(channel, module, given["inputs"], module_dir, os.getcwd(), keep=keep)
    try:
        package.probe(ctx)
    except BaseException as exc:  # noqa: BLE001
        channel.send(message(FromJob.PROBE_ERROR, type=type(exc).__name__,
                             traceback="".join(traceback.format_exception(exc))[-4000:]))
        return
    channel.send(message(FromJob.INTEGRITY, stage="probe", changed=watch.changes(), compiles_total=COUNTER.total))
    channel.send(message(FromJob.DONE, work=work.summary()))
