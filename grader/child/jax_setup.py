"""JAX made ready for the jobs: in a host before it forks (:func:`prepare_host`), and in each job
before the student's code runs (the compilation caches, one MLIR context).

Everything here makes a job cheaper and changes nothing it computes: the same programs are
lowered, compiled and counted, and the same tracebacks are raised.
"""
from __future__ import annotations

import os
import threading


def prepare_host() -> None:
    """What a host does once, after its imports and before its first fork, so that no job does it."""
    from grader.child import platforms

    premake_mlir_context()
    warm_first_lowering()
    if platforms.find_no_plugins():
        platforms.cpu_alone()
    cache_traceback_filter()


def use_compile_caches(own: str | None, read: list[str], *, mark_compiles: bool = False) -> None:
    """Load programs compiled in earlier runs from JAX's persistent cache (even the smallest):
    from this side's own folder ``own`` (where new programs are written), else from the
    ``read`` folders, by key only. ``mark_compiles``: the reference's job, whose folder the
    student's jobs read: it marks each program it is compiling (:class:`TieredCache`).

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
            compilation_cache._cache = TieredCache(own, read, mark_compiles=mark_compiles)
            compilation_cache._cache_initialized = True
        cache = compilation_cache._cache
    if isinstance(cache, TieredCache) and cache.marking:
        _mark_only_what_is_written(cache)
    if isinstance(cache, TieredCache) and cache.own is None:
        # nothing can be written (a batch's student): JAX would serialize and compress every program
        # it compiles for a write that is dropped; it writes only what took at least this long
        jax.config.update("jax_persistent_cache_min_compile_time_secs", NEVER_WRITE_S)


#: a compile time no program reaches: a job whose cache is read-only has JAX write nothing
NEVER_WRITE_S = 1e9


def around_compiles(marker: str, make) -> bool:
    """Put ``make(compile_or_get_cached)`` in place of JAX's ``jax._src.compiler.compile_or_get_cached``,
    through which every program a job compiles or loads goes; once per ``marker`` (a second call is a
    no-op). ``False`` where JAX has no such function (nothing is changed)."""
    try:
        from jax._src import compiler
    except ImportError:
        return False
    inner = getattr(compiler, "compile_or_get_cached", None)
    if inner is None:
        return False
    done = getattr(inner, "wrapped_for", ())
    if marker not in done:
        outer = make(inner)
        outer.wrapped_for = (*done, marker)
        compiler.compile_or_get_cached = outer
    return True


def _mark_only_what_is_written(cache: "TieredCache") -> None:
    """JAX looks a program with host callbacks (``jax.debug.print``) up in the cache, then compiles it
    and never writes it (``jax._src.compiler._cache_write``): no mark for such a program, or a student's
    job lowering the same would wait for a program that never comes."""

    def make(compile_or_get_cached):
        def marking_only_cacheable(backend, computation, devices, compile_options, host_callbacks, *args, **kwargs):
            cache.unwritten.active = bool(host_callbacks)
            try:
                return compile_or_get_cached(backend, computation, devices, compile_options, host_callbacks,
                                             *args, **kwargs)
            finally:
                cache.unwritten.active = False

        return marking_only_cacheable

    around_compiles("marks", make)


class TieredCache:
    """JAX's cache interface over one writable folder and read-only folders (``<key>-cache`` files,
    as JAX's own file cache names them).

    The reference's job and the student's run side by side and, for a fresh seed, lower some
    programs that no grading compiled before (ex08's ``flops_of`` functions, whose shapes are
    drawn per seed): both compiled each. Now the reference's job (``mark_compiles``) marks a
    program it did not find as being compiled (``<key>-compiling``, :data:`grader.store.COMPILING`)
    until it has written it; a student's job that finds no program but such a mark in a folder it
    reads waits for that program (at most :data:`WAIT_S`) and loads it, as it loads any of the
    reference's programs. The mark says only that the program whose key the job computed itself
    is on its way; a job that cannot wait for it (the reference's ended first, or wrote nothing)
    compiles it itself, as before.
    """

    def __init__(self, own: str | None, read: list[str], *, mark_compiles: bool = False):
        self._path = own or read[0]
        self.own = own
        self.read = [folder for folder in read if folder]
        self.folders = [folder for folder in (own, *read) if folder]
        if own is not None:
            try:
                os.makedirs(own, exist_ok=True)
            except OSError:  # cannot be made: nothing written, nothing lost
                self.own = None
        self.marking = mark_compiles and self.own is not None
        #: the marks this job made, removed as each program is written (and all at its end: :meth:`unmark`)
        self.marks: set[str] = set()
        #: the last program this job looked for was one it waited for (:meth:`_wait_for`)
        self.following = False
        #: ``active`` while JAX looks up a program it will not write (:func:`_mark_only_what_is_written`)
        self.unwritten = threading.local()

    def get(self, key: str) -> bytes | None:
        found = self._read(key, self.folders)
        if found is not None:
            return found
        if self.marking:
            if not getattr(self.unwritten, "active", False):
                self._mark(key)
            return None
        return self._wait_for(key)

    def _read(self, key: str, folders: list[str]) -> bytes | None:
        for folder in folders:
            try:
                with open(os.path.join(folder, f"{key}-cache"), "rb") as handle:
                    return handle.read()
            except OSError:
                continue
        return None

    def _mark(self, key: str) -> None:
        from grader.store import COMPILING

        mark = os.path.join(self.own, key + COMPILING)
        try:
            os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except OSError:  # marked by another of the reference's jobs, or not writable: no mark of ours
            return
        self.marks.add(mark)

    def _wait_for(self, key: str) -> bytes | None:
        """The program of ``key`` from a folder where the reference's job marked it as being compiled,
        once written (``None``: no fresh mark, or none written in time).

        Right after a program waited for so, the reference's job is a step ahead on the same
        work: the next program it is about to mark may not be marked yet. So the next miss looks
        for a mark a little longer (:data:`FOLLOW_S`, once) before the job compiles it itself."""
        import time

        following, self.following = self.following, False
        look_until = time.monotonic() + (FOLLOW_S if following else 0.0)
        while True:
            for folder in self.read:
                found = self._wait_in(folder, key)
                if found is not None:
                    self.following = True
                    return found
            if time.monotonic() >= look_until:
                return None
            time.sleep(POLL_S)

    def _wait_in(self, folder: str, key: str) -> bytes | None:
        import time

        from grader.store import COMPILING, COMPILING_FRESH_S

        mark = os.path.join(folder, key + COMPILING)
        try:
            if os.stat(mark).st_mtime < time.time() - COMPILING_FRESH_S:
                return None
        except OSError:
            return None
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            time.sleep(POLL_S)
            found = self._read(key, [folder])
            if found is not None or not os.path.exists(mark):
                return found if found is not None else self._read(key, [folder])
        return None

    def put(self, key: str, value: bytes) -> None:
        if self.own is None:
            return
        path = os.path.join(self.own, f"{key}-cache")
        try:
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
        finally:
            self._unmark(key)

    def _unmark(self, key: str) -> None:
        from grader.store import COMPILING

        if self.own:
            self._drop(os.path.join(self.own, key + COMPILING))

    def unmark(self) -> None:
        """Remove every mark this job still holds (its end: a program it never wrote is not on its way)."""
        for mark in list(self.marks):
            self._drop(mark)

    def _drop(self, mark: str) -> None:
        if mark in self.marks:
            self.marks.discard(mark)
            try:
                os.unlink(mark)
            except OSError:
                pass

    def clear(self) -> None:
        pass


#: how long a student's job waits for a program the reference's job is compiling, how often it looks, and
#: how long it looks for the mark of the program after one it waited for
WAIT_S, POLL_S, FOLLOW_S = 2.0, 0.004, 0.06


def unmark_compiles() -> None:
    """At a job's end: the marks of programs it was compiling and never wrote, removed (:class:`TieredCache`)."""
    try:
        from jax._src import compilation_cache
    except ImportError:
        return
    cache = getattr(compilation_cache, "_cache", None)
    if isinstance(cache, TieredCache):
        cache.unmark()


def portable_cache_keys() -> None:
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


#: the module name every cached program is keyed under, and the class's compiler compiles under
PROGRAM_NAME = "jit_program"
#: how programs are keyed (:func:`name_free_cache_keys`): a cache built under another kind of key is built again
KEYS = "name-free"


def name_free_cache_keys() -> bool:
    """Key each cached program by what it computes, not by the name of the function it was traced from.

    JAX names a program's module after the Python function (``jit_mean_abs``, ``jit__lambda``)
    and that name is part of the program's key (``jax._src.cache_key.get``: the key's prefix,
    and the module's ``sym_name`` in the digest of ``_canonicalize_ir``, which strips only the
    debug information). The same computation traced from a lambda, a renamed function or a
    method was compiled again: a student's own correct work that computes what the reference
    computes, under other names, found none of the reference's programs. Here the digest is of
    the program with its module renamed :data:`PROGRAM_NAME`, and so is the prefix: everything
    else (the program's every operation, the compiler's options, the versions) is keyed as JAX
    keys it. A program loaded so keeps the name it was compiled under (what ``Compiled.as_text()``
    shows): a reference function's, or the class's compiler's :data:`PROGRAM_NAME`, never a
    classmate's. ``False`` where JAX has no such place to hook (keys as JAX makes them)."""
    try:
        from jax._src import cache_key
        from jax._src.lib.mlir import ir
    except ImportError:
        return False
    canonicalize, get = getattr(cache_key, "_canonicalize_ir", None), getattr(cache_key, "get", None)
    if canonicalize is None or get is None:
        return False
    if getattr(get, "name_free", False):
        return True

    def name_free_ir(module, ignore_callbacks):
        with module.context:
            renamed = module.operation.clone()
            renamed.attributes["sym_name"] = ir.StringAttr.get(PROGRAM_NAME)
            return canonicalize(renamed, ignore_callbacks)

    def name_free_key(module, *args, **kwargs) -> str:
        return f"{PROGRAM_NAME}-{get(module, *args, **kwargs).rsplit('-', 1)[-1]}"

    name_free_key.name_free = True  # type: ignore[attr-defined]
    cache_key._canonicalize_ir = name_free_ir
    cache_key.get = name_free_key
    return True


#: programs lowered in one MLIR context before a fresh one is made (:func:`one_mlir_context`)
LOWERINGS_PER_CONTEXT = 64


def one_mlir_context() -> None:
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


#: what JAX imports on a process's first lowering, after the dialects :func:`premake_mlir_context` loads
FIRST_LOWERING_MODULES = ("jaxlib.mlir.dialects.builtin", "jaxlib.mlir.extras.meta")


def warm_first_lowering() -> bool:
    """In a host, before it forks: what every job's first lowering would otherwise do for itself, none of
    it the backend's: import the modules it imports (:data:`FIRST_LOWERING_MODULES`, 3-4 ms) and compile
    the regular expressions that tell JAX's own source files from the user's (``source_info_util``'s
    ``_exclude_path_regex`` and ``_include_path_regex``, cached per process; JAX clears them when a
    path is added, as a module registers one on import, and compiles them again then). A job's first
    program cost 18-28 ms of CPU where the next took 6-8; this takes 5-8 ms of it off every job.
    ``False`` where JAX has none of them (nothing is done)."""
    import importlib

    try:
        for name in FIRST_LOWERING_MODULES:
            importlib.import_module(name)
        from jax._src import source_info_util

        source_info_util._exclude_path_regex()
        source_info_util._include_path_regex()
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
    original, excluded = (getattr(traceback_util, "include_filename", None),
                          getattr(traceback_util, "_exclude_paths", None))
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
