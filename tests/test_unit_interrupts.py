"""What a Ctrl-C leaves in CPython's own state, and how ``grade`` ends after it (grader.interrupts).

Both were seen in ``test_ctrl_c``'s Ctrl-C at 0.3 s into a grading, about one run in 60 on a loaded machine:

* status -2 after "grade: interrupted": the interrupt landed in ``dataclasses._create_fn``'s
  ``exec(txt, ...)`` as ``grader.grading`` imported; ``run_eval_code_obj`` (CPython ``Python/pythonrun.c``)
  set ``_Py_UnhandledKeyboardInterrupt``, and ``Py_RunMain`` (``Modules/main.c``) called ``exit_sigint``
  after ``python -m grader`` had returned 130 (strace: ``rt_sigaction(SIGINT, SIG_DFL)``, then
  ``kill(self, SIGINT)``, after the line);
* a ``grade`` still running 20 s after Ctrl-C: two grading threads waiting in ``importlib._bootstrap``'s
  ``_get_module_lock`` for the global import lock (``_imp.acquire_lock()``) that the interrupt had left to
  the main thread, which was joining them (py-spy);
* the same hang in CI, the interrupt itself lost: "Exception ignored in: <function
  _get_module_lock.<locals>.cb>" (the lock's weakref callback, raised in just after it took the lock).

The command's handler (``interrupts.on_sigint``) keeps the interrupt out of the import machinery; the
rest is the net beneath it.

Each case runs in a process of its own: an import lock left held would hang the test run itself.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT
from grader import interrupts


def _as_at_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def _run(tmp_path, main: str, *, then: str = "", timeout: float = 60) -> subprocess.CompletedProcess:
    """``python -m entry`` whose ``__main__`` is ``main`` (and ``then``), the checkout importable, SIGINT as
    at a terminal."""
    package = tmp_path / "entry"
    package.mkdir(exist_ok=True)
    (package / "__main__.py").write_text(textwrap.dedent(main) + textwrap.dedent(then), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "entry"], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=timeout, preexec_fn=_as_at_a_terminal)


#: ``grade``'s command raising the interrupt as it does when Ctrl-C lands in a dataclass being made
INTERRUPTED_IN_EXEC = """
    import sys
    from grader.cli import app

    class Interrupted:
        def main(self, **kwargs):
            exec("raise KeyboardInterrupt")  # as dataclasses._create_fn runs a class's __init__

    app.cli = Interrupted()
    sys.argv = ["grade", "check", "somewhere"]
    sys.exit(app.main())  # as the command's own process calls it
"""


def test_cpython_ends_python_m_by_sigint_after_an_interrupt_caught_from_exec_of_a_string(tmp_path):
    """The premise (CPython 3.11): handled or not, an interrupt that ended an ``exec`` of a string ends
    ``python -m`` by SIGINT, whatever status it exits with. Should CPython stop doing so, this fails and
    :func:`grader.interrupts.interrupted_exit`'s ``exec("pass")`` may go."""
    done = _run(tmp_path, """
        import sys
        try:
            exec("raise KeyboardInterrupt")
        except KeyboardInterrupt:
            pass
        sys.exit(130)
    """)
    assert done.returncode == -signal.SIGINT, (done.returncode, done.stderr)


def test_python_m_grader_interrupted_inside_exec_of_a_string_ends_with_130(tmp_path):
    done = _run(tmp_path, INTERRUPTED_IN_EXEC)
    assert (done.returncode, done.stderr.strip()) == (130, "grade: interrupted"), done.stderr


def test_a_thread_left_stuck_by_an_interrupt_does_not_keep_the_command_from_ending(tmp_path):
    """A grading thread that cannot end (waiting for a lock nobody gives back) would keep Python from
    exiting, for ever: the command ends after waiting 2 s for it, with 130 and its output whole."""
    done = _run(tmp_path, """
        import threading
        stuck = threading.Event()
        threading.Thread(target=stuck.wait, name="grading-untimed_0").start()
        print("report written", flush=False)
    """, then=INTERRUPTED_IN_EXEC, timeout=30)
    assert (done.returncode, done.stdout, done.stderr.strip()) == (130, "report written\n", "grade: interrupted")


def test_a_thread_that_ends_soon_after_the_interrupt_is_waited_for(tmp_path):
    done = _run(tmp_path, """
        import threading, time
        def finish():
            time.sleep(0.5)
            print("the thread's last line", flush=True)
        threading.Thread(target=finish, name="grading-untimed_1").start()
    """, then=INTERRUPTED_IN_EXEC, timeout=30)
    assert (done.returncode, done.stdout) == (130, "the thread's last line\n"), done.stderr


LEFT_HELD = """
    import _imp, importlib, sys, threading, time
    from importlib import _bootstrap
    from grader import interrupts

    sys.path.insert(0, {folder!r})
    {hold}
    imported = threading.Event()
    threading.Thread(target=lambda: (importlib.import_module("fresh"), imported.set()), daemon=True).start()
    print("waits while held:", not imported.wait(0.5))
    print("released:", interrupts.release_import_locks() >= 1)
    print("imported after:", imported.wait(10))
"""


@pytest.mark.parametrize("hold", ["_imp.acquire_lock()", "held = _bootstrap._get_module_lock('fresh'); held.acquire()"],
                         ids=["the global import lock", "a module's lock"])
def test_an_import_lock_an_interrupt_left_to_this_thread_is_given_back(tmp_path, hold):
    """What ``importlib._bootstrap`` leaves held when the interrupt lands between its taking a lock and the
    ``try`` that releases it (``_get_module_lock``: ``_imp.acquire_lock()``; ``_ModuleLockManager.__enter__``:
    the module's ``_ModuleLock.acquire()``; the module's lock lives while something refers to it, as the
    interrupt's traceback does): another thread's import waits until it is given back."""
    (tmp_path / "fresh.py").write_text("VALUE = 1\n", encoding="utf-8")
    done = _run(tmp_path, LEFT_HELD.format(folder=str(tmp_path), hold=hold), timeout=30)
    assert done.stdout.splitlines() == ["waits while held: True", "released: True", "imported after: True"], \
        done.stderr


def test_nothing_is_given_back_while_an_import_is_under_way_in_this_thread(tmp_path):
    """Called from a module being imported, the locks are that import's: none is released."""
    (tmp_path / "importing.py").write_text(textwrap.dedent("""
        import _imp
        from grader import interrupts
        RELEASED = interrupts.release_import_locks()
        HELD = _imp.lock_held()
    """), encoding="utf-8")
    done = _run(tmp_path, f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import importing
        print(importing.RELEASED)
    """)
    assert done.stdout.strip() == "0", done.stderr


def test_ctrl_c_while_the_main_thread_holds_an_import_lock_ends_the_schedule_and_its_threads(tmp_path):
    """``run_all`` interrupted with the global import lock left to the main thread (as an interrupted import
    leaves it), its untimed exercises importing a module: each thread ends and ``run_all`` raises the
    interrupt within seconds (before, it joined its threads, which waited for the lock, for ever)."""
    (tmp_path / "fresh.py").write_text("VALUE = 1\n", encoding="utf-8")
    done = _run(tmp_path, f"""
        import _imp, importlib, sys, threading, time
        from types import SimpleNamespace
        from grader import scheduling

        sys.path.insert(0, {str(tmp_path)!r})
        started, imported = threading.Barrier(3), []

        def grade(ex):
            if ex.id == "first":
                return "done"
            started.wait()
            time.sleep(0.3)  # the main thread holds the lock by now
            importlib.import_module("fresh")
            imported.append(ex.id)
            return "done"

        def done(ex, result):
            started.wait()
            _imp.acquire_lock()  # an import cut short by Ctrl-C leaves it so
            raise KeyboardInterrupt

        exercises = [SimpleNamespace(id=name, timed=False, waits=False, timeout_s=1.0)
                     for name in ("first", "a", "b")]
        t0 = time.monotonic()
        try:
            scheduling.run_all(exercises, grade, done, at_once=3, cancel=lambda: None)
        except KeyboardInterrupt:
            print("interrupted within 5 s:", time.monotonic() - t0 < 5)
        print("imported:", sorted(imported))
        print("threads left:", [t.name for t in threading.enumerate() if t.name.startswith("grading-")])
    """, timeout=60)
    assert done.stdout.splitlines() == ["interrupted within 5 s: True", "imported: ['a', 'b']", "threads left: []"], \
        done.stderr


def test_the_commands_handler_raises_the_interrupt_where_no_import_is_under_way():
    with pytest.raises(KeyboardInterrupt):
        interrupts.on_sigint(signal.SIGINT, sys._getframe())


IMPORTING_WHEN_INTERRUPTED = """
    import os, signal, sys, time, _imp
    from grader import interrupts

    sys.path.insert(0, {folder!r})
    signal.signal(signal.SIGINT, {handler})
    interrupts.DEFER_AT_MOST_S = {defer}
    t0 = time.monotonic()
    try:
        import busy
        time.sleep(3)  # the interrupt comes here, at any moment once the import is done (a loaded machine's
        print("not interrupted")  # first moment: a print after the import was cut in two)
    except KeyboardInterrupt:
        print("interrupted:", "busy" in sys.modules, round(time.monotonic() - t0) <= 2)
    print("import lock held:", _imp.lock_held())
"""

#: a module that receives Ctrl-C as it is imported, and takes ``{seconds}`` more to import
BUSY = """
import os, signal, time
os.kill(os.getpid(), signal.SIGINT)
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    pass
DONE = True
"""


@pytest.mark.parametrize("handler, printed", [
    ("interrupts.on_sigint", ["interrupted: True True", "import lock held: False"]),
    ("signal.default_int_handler", ["interrupted: False True", "import lock held: False"]),
], ids=["the grader's", "Python's"])
def test_ctrl_c_during_an_import_in_the_main_thread_comes_once_the_import_is_done(tmp_path, handler, printed):
    """The interrupt that lands in a module being imported comes as the import ends (Python's own handler
    raises it inside, where an import lock may be left held: the second case, for contrast)."""
    (tmp_path / "busy.py").write_text(BUSY.format(seconds=0.3), encoding="utf-8")
    done = _run(tmp_path, IMPORTING_WHEN_INTERRUPTED.format(folder=str(tmp_path), handler=handler, defer=5.0))
    assert done.stdout.splitlines() == printed, done.stderr


def test_an_import_that_does_not_end_is_interrupted_where_it_is_after_the_longest_deferral(tmp_path):
    (tmp_path / "busy.py").write_text(BUSY.format(seconds=30), encoding="utf-8")
    done = _run(tmp_path, IMPORTING_WHEN_INTERRUPTED.format(folder=str(tmp_path), handler="interrupts.on_sigint",
                                                            defer=0.5))
    assert done.stdout.splitlines() == ["interrupted: False True", "import lock held: False"], done.stderr


def test_a_program_that_calls_main_is_never_ended_by_it(tmp_path):
    """Called with its arguments (a test, a program of the course's), ``main`` returns 130 after a stuck
    grading thread's 2 s, and the caller goes on."""
    done = _run(tmp_path, """
        import sys, threading
        from grader.cli import app

        class Interrupted:
            def main(self, **kwargs):
                raise KeyboardInterrupt

        stuck = threading.Event()
        threading.Thread(target=stuck.wait, name="grading-untimed_0").start()
        app.cli = Interrupted()
        print("returned", app.main(["check", "somewhere"]))
        stuck.set()
    """, timeout=30)
    assert (done.returncode, done.stdout) == (0, "returned 130\n"), done.stderr


STARTING_WHEN_INTERRUPTED = """
    import os, signal, subprocess, sys, threading, time
    from grader import interrupts

    signal.signal(signal.SIGINT, {handler})
    main = threading.main_thread().ident
    threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT)).start()
    started = None
    try:  # the child execs only 0.6 s in: Popen waits for it, and the Ctrl-C comes meanwhile
        started = subprocess.Popen(["true"], preexec_fn=lambda: time.sleep(0.6))
        time.sleep(3)
        print("not interrupted")
    except KeyboardInterrupt:
        print("interrupted, the process known:", started is not None)
    if started is not None:
        started.wait()
"""


@pytest.mark.parametrize("handler, printed", [
    ("interrupts.on_sigint", "interrupted, the process known: True"),
    ("signal.default_int_handler", "interrupted, the process known: False"),
], ids=["the grader's", "Python's"])
def test_ctrl_c_while_a_process_starts_comes_once_its_popen_is_known(tmp_path, handler, printed):
    """Raised inside ``subprocess.Popen`` after its fork, an interrupt leaves a running process that nobody knows
    of (a batch worker's scratch folder was left so); the grader's handler lets the constructor return first
    (Python's own raises inside it: the second case, for contrast)."""
    done = _run(tmp_path, STARTING_WHEN_INTERRUPTED.format(handler=handler))
    assert done.stdout.splitlines() == [printed], done.stderr
