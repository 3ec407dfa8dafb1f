"""Checking from inside a notebook: ``from grader.notebook import check; check("ex02")``.

In the student's kernel, :func:`check` takes the code of the cells as they last ran:
IPython's history, in the order the cells ran, with, for each run since this module
was imported, the cell it came from (when the front end says) and whether it raised.
It writes those runs as a notebook, ``.grade/NAME-kernel/session.ipynb`` in the kernel's folder
(kept beside the report: it is exactly what was graded), and grades that in a process
of its own, ``python -m grader.notebook ORDER``, the way ``grade`` grades a saved
notebook: the same sandboxed child processes, the same checks and the same report
files (:mod:`grader.ipynb` says which runs are replayed).

The kernel only hands over source text: nothing of its namespace is read, the student's
code never runs in it for grading, and the grading process shares none of the kernel's
(possibly patched) modules. :func:`check` returns a :class:`Checked`: the score to
assert on, shown as a table in Jupyter (HTML) and as the terminal's table elsewhere.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader import interrupts
from grader.i18n import LANGS, Catalog, T, Text, default_lang, grader_catalog
from grader.ipynb import Run

if TYPE_CHECKING:
    from grader.grading import Progress

#: the folder (in the kernel's working folder) the graded runs and the reports go to
REPORT_DIR_NAME = ".grade"
SESSION_NAME = "session.ipynb"


@dataclass
class Checked:
    """What :func:`check` returns: the score, and the report shown under the cell."""

    #: the points scored by the exercises graded
    score: float = 0.0
    #: the points they are worth
    max_score: float = 0.0
    #: by exercise id: ``{"score": ..., "max_score": ..., "status": ...}``
    exercises: dict = field(default_factory=dict)
    #: the ``grade-report/1`` JSON object written (empty when nothing was graded)
    report: dict = field(default_factory=dict)
    #: the path of ``report.json`` (``report.partial.json`` for some exercises), when written
    report_path: str | None = None
    #: the report as the terminal table (plain text)
    text: str = ""
    #: the report as an HTML fragment (:func:`grader.report.inline.render_inline`)
    html: str = ""
    #: one line saying why nothing could be graded (no kernel, an unknown exercise), else ``None``
    error: str | None = None
    #: True when grading was interrupted: ``exercises`` holds those graded before
    interrupted: bool = False

    @property
    def passed(self) -> bool:
        """Whether every check of the exercises graded passed."""
        return self.error is None and self.max_score > 0 and self.score >= self.max_score - 1e-9

    def __repr__(self) -> str:
        return self.text if self.error is None else self.error

    def _repr_html_(self) -> str:
        if self.error is None:
            return self.html
        from grader.report import html_parts as html
        from grader.report.inline import fragment

        return fragment(f'<p class="problem">{html.escape(self.error)}</p>')


class _RunLog:
    """For each run of a cell in this kernel (by execution count): the cell's id, when the
    front end sends one, and the exception it raised, if any. Fed by IPython's
    ``post_run_cell`` event once this module is imported."""

    def __init__(self) -> None:
        self.runs: dict[int, tuple[str | None, str | None]] = {}
        self.shells: set[int] = set()

    def watch(self, shell: Any) -> None:
        if id(shell) not in self.shells:
            shell.events.register("post_run_cell", self.record)
            self.shells.add(id(shell))

    def record(self, result: Any) -> None:
        count = getattr(result, "execution_count", None)
        if not isinstance(count, int):
            return
        error = result.error_before_exec or result.error_in_exec
        cell_id = getattr(getattr(result, "info", None), "cell_id", None)
        self.runs[count] = (cell_id if isinstance(cell_id, str) else None,
                            type(error).__name__ if error is not None else None)

    def history(self, shell: Any) -> list[Run]:
        """Every run of this kernel's session, in the order they ran, as the history keeps them."""
        raw = list(shell.history_manager.input_hist_raw)
        return [Run(count, raw[count], *self.runs.get(count, (None, None))) for count in range(1, len(raw))]


_LOG = _RunLog()


def _shell() -> Any:
    """The IPython shell running this code, or ``None`` outside IPython (a kernel has imported it already)."""
    if "IPython" not in sys.modules:
        return None
    from IPython import get_ipython

    shell = get_ipython()
    return shell if shell is not None and hasattr(shell, "history_manager") else None


def _watch_at_import() -> None:
    shell = _shell()
    if shell is not None:
        _LOG.watch(shell)


_watch_at_import()


# ------------------------------------------------------------------ in the kernel
def check(*exercises: str, seed: int | None = None, lang: str | None = None, chapter: str | None = None,
          report_dir: str | os.PathLike | None = None, timeout_s: float = 900.0) -> Checked:
    """Grade the code of the cells as they last ran, in the sandbox, and return the result.

    ``exercises``: ids such as ``"ex02"`` (``ex02_where``, ``2``); none: every exercise.
    ``seed`` replays the hidden inputs of an earlier run; ``lang`` is ``en`` or ``zh``
    (default: from the locale); ``report_dir`` is where the graded runs and the reports
    go (default: ``.grade/NAME-kernel/`` in the kernel's working folder, NAME the notebook's, else
    ``.grade/kernel/``: apart from ``grade`` on the folder, ``.grade/``, and on the saved notebook,
    ``.grade/NAME/``).
    """
    catalog = grader_catalog()
    if lang is not None and lang not in LANGS:
        return Checked(error=catalog.render(T("notebook.bad_lang", lang=lang, langs=", ".join(LANGS)), "en"))
    lang = lang or default_lang()
    shell = _shell()
    if shell is None:
        return Checked(error=catalog.render(T("notebook.not_in_kernel"), lang))
    _LOG.watch(shell)
    notebook = _notebook_name()
    folder = Path(report_dir) if report_dir is not None else \
        Path.cwd() / REPORT_DIR_NAME / (f"{Path(notebook).stem}-kernel" if notebook else "kernel")
    session = folder / SESSION_NAME
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_session(session, _LOG.history(shell))
    except OSError as exc:
        return Checked(error=catalog.render(T("notebook.cannot_write", path=str(session),
                                              detail=exc.strerror or str(exc)), lang))
    order = {"session": str(session), "exercises": [str(e) for e in exercises], "seed": seed, "lang": lang,
             "chapter": chapter, "report_dir": str(folder), "timeout_s": timeout_s, "notebook": _notebook_name(),
             "result": str(folder / ".check-result.json")}
    what = ", ".join(exercises) if exercises else catalog.render(T("notebook.every_exercise"), lang)
    return _grade_in_a_process(order, _Status(catalog, lang, what))


def write_session(path: Path, runs: list[Run]) -> None:
    """The kernel's runs as a notebook of their own (one cell per run, metadata ``grader``),
    which :mod:`grader.ipynb` reads as a history: nbformat 4.5, written as JSON (importing nbformat
    would cost the kernel 2 seconds: :func:`grader.ipynb._version_4`)."""
    metadata = {"grader": {"history": True}, "kernelspec": {"name": "python3", "display_name": "Python 3",
                                                             "language": "python"}}
    cells = []
    for run in runs:
        meta = {"run": run.count, **({"cell_id": run.cell_id} if run.cell_id else {}),
                **({"error": run.error} if run.error else {})}
        cells.append({"cell_type": "code", "execution_count": None, "id": f"run-{run.count}",
                      "metadata": {"grader": meta}, "outputs": [], "source": run.source})
    nb = {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _notebook_name() -> str | None:
    """The notebook the kernel runs for, when the front end says (Jupyter Server sets
    ``JPY_SESSION_NAME``); only used to name it in the report."""
    name = os.environ.get("JPY_SESSION_NAME", "")
    return name if name.endswith(".ipynb") else None


class _Status:
    """One line under the cell while grading runs (how many exercises are done), then nothing."""

    def __init__(self, catalog: Catalog, lang: str, what: str):
        self.catalog, self.lang, self.what = catalog, lang, what
        self.handle = None

    def show(self, text: Text | None) -> None:
        try:
            from IPython.display import display
        except ImportError:
            return
        line = _Line(self.catalog.render(text, self.lang) if text is not None else "")
        if self.handle is None:
            self.handle = display(line, display_id=True)
        else:
            self.handle.update(line)

    def progress(self, event: dict) -> None:
        self.show(T("notebook.progress", what=self.what, done=event.get("done"), total=event.get("total"),
                    exercise=event.get("exercise")))


class _Line:
    """A line of text, displayed as such in HTML too."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        from grader.report import html_parts as html

        return f'<span style="color:#57606a">{html.escape(self.text)}</span>'


def _grade_in_a_process(order: dict, status: _Status) -> Checked:
    """Run ``python -m grader.notebook ORDER`` and read what it left; Ctrl-C (interrupting
    the kernel) stops it as it stops ``grade``: what was graded is kept."""
    result = Path(order["result"])
    result.unlink(missing_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="grade-order-", delete=False) as handle:
        json.dump(order, handle)
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parent.parent)  # found even when the grader is not installed
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    status.show(T("notebook.grading", what=status.what))
    log: list[str] = []
    # a session of its own: an interrupt reaches it once, from here (it then stops as grade does)
    process = subprocess.Popen([sys.executable, "-m", "grader.notebook", handle.name], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                               start_new_session=True)
    try:
        try:
            for line in process.stderr:
                event = _event(line)
                if event is not None:
                    status.progress(event)
                else:
                    log = (log + [line.rstrip()])[-40:]
            process.wait()
        except KeyboardInterrupt:
            _stop(process)
    finally:
        os.unlink(handle.name)
        status.show(None)
    try:
        data = json.loads(result.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        detail = next((line for line in reversed(log) if line.strip()), f"exit status {process.returncode}")
        return Checked(error=grader_catalog().render(T("notebook.grader_failed", detail=detail), order["lang"]))
    return Checked(**data)


#: how long an interrupted grading may take to stop as ``grade`` does (its report of what was graded
#: written) before every process of it is killed
STOP_S = 10.0


def _stop(process: subprocess.Popen) -> None:
    """The kernel was interrupted: stop the grading process as Ctrl-C stops ``grade`` (it ends every process
    it started and writes what was graded); past ``STOP_S``, or on a second interrupt, kill its whole
    session (it leads one: ``start_new_session``) so that nothing of it outlives the cell."""
    try:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=STOP_S)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        process.wait()


def _event(line: str) -> dict | None:
    """A progress line of the grading process (``{"progress": {...}}``), else ``None``."""
    if not line.startswith('{"progress"'):
        return None
    try:
        return json.loads(line)["progress"]
    except (ValueError, KeyError, TypeError):
        return None


# ------------------------------------------------------------------ the grading process
def main(argv: list[str]) -> int:
    """``python -m grader.notebook ORDER``: grade the runs ``check()`` wrote and leave its result.

    ORDER is a JSON file (written by :func:`check`); the result, a JSON object of
    :class:`Checked`'s fields, goes to its ``result`` path. Progress goes to standard
    error, one JSON line per exercise graded.
    """
    order = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # the kernel's interrupt, as grade's Ctrl-C
        signal.signal(signal.SIGINT, interrupts.on_sigint)
    from grader.runner import service

    service.defer_starts()  # a service for the next check() starts once the cell has its result
    try:
        _stop_with_the_kernel()
        checked = _grade_order(order)
    except KeyboardInterrupt:  # interrupted before the grading could stop on its own (starting, writing)
        checked = Checked(interrupted=True,
                          error=grader_catalog().render(T("notebook.interrupted_early"), order.get("lang", "en")))
    target = Path(order["result"])
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(json.dumps(checked.__dict__, ensure_ascii=False, default=str), encoding="utf-8")
    os.replace(tmp, target)
    if checked.interrupted:
        return interrupts.interrupted_exit(0)  # a thread an interrupt left stuck
    service.start_deferred()  # in a session of its own, importing JAX once this process has ended
    return 0


def _grade_order(order: dict) -> Checked:
    from grader.chapter import available_chapters, load_chapter
    from grader.grading import Interrupted, Machinery, grade
    from grader import ahead
    from grader.options import LimitOptions
    from grader.report.render import render_terminal, write_reports
    from grader.report.inline import render_inline
    from grader.results import report_to_dict
    from grader.runner.service import idle_seconds
    from grader.submission import SubmissionError

    lang = order["lang"]
    session = Path(order["session"])
    notebook = order.get("notebook")
    chapter = order.get("chapter")
    if chapter is None and notebook and Path(notebook).stem in available_chapters():
        chapter = Path(notebook).stem
    limits = LimitOptions(timeout_s=float(order.get("timeout_s") or LimitOptions.timeout_s))
    options = limits.grade_options(chapter=chapter, exercises=tuple(order["exercises"]), seed=order.get("seed"))
    interrupted = None
    try:
        # hosts forked warm from the user's service, as grade's (grader.runner.service)
        machinery = Machinery(on_progress=_progress, ahead=ahead.count(), service=idle_seconds() > 0)
        report = grade(session, options, machinery)
    except SubmissionError as exc:
        return Checked(error=grader_catalog().render(exc.text, lang))
    except Interrupted as stop:
        report, interrupted = stop.report, stop
    report.submission = {**report.submission, "from": "kernel history", "notebook": notebook}
    catalog = load_chapter(report.chapter).catalog
    written = write_reports(report, catalog, lang, Path(order["report_dir"]))
    lines = [catalog.render(_graded_cells(session), lang),
             catalog.render(T("notebook.report", path=str(written.with_suffix(".html")),
                               md=str(written.with_suffix(".md"))), lang)]
    if interrupted is not None:
        lines.insert(0, catalog.render(T("notebook.interrupted", done=len(report.exercises), path=str(written),
                                         total=len(report.exercises) + len(interrupted.pending)), lang))
    data = report_to_dict(report, catalog, lang)
    return Checked(score=report.score, max_score=report.max_score, report=json.loads(written.read_text("utf-8")),
                   exercises={e["id"]: {k: e[k] for k in ("score", "max_score", "status")} for e in data["exercises"]},
                   report_path=str(written), interrupted=interrupted is not None,
                   text=render_terminal(report, catalog, lang, width=100) + "\n".join(lines) + "\n",
                   html=render_inline(report, catalog, lang, footer=lines))


def _graded_cells(session: Path) -> Text:
    """Which runs were graded: how many, the first and last, and where they are saved."""
    from grader.ipynb import read_cells

    cells = [cell for cell in read_cells(session)[0] if cell.graded]
    counts = [cell.number for cell in cells] or [0]
    return T("notebook.graded_cells", n=len(cells), first=counts[0], last=counts[-1], path=str(session))


def _progress(event: Progress) -> None:
    """An exercise graded: one JSON line on standard error, for the kernel's status line."""
    if event.state == "done":
        print(json.dumps({"progress": {"done": event.done, "total": event.total, "exercise": event.exercise}}),
              file=sys.stderr, flush=True)


def _stop_with_the_kernel() -> None:
    """Stop grading (as Ctrl-C does: every process it started ends) if the kernel that
    asked for it goes away (restarted, shut down), so that nothing outlives it for long."""
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=watch, name="kernel-watch", daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
