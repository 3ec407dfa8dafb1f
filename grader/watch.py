"""Watch mode: ``grade exercises/ch4 --watch``.

It grades the whole chapter once (or the exercises of ``-k``), then re-grades the
exercise whose file changed, on every save, and keeps the progress on screen: a bar,
the table of exercises, what the last save changed, and what to do next; a finished
chapter is marked. The grading processes stay warm between saves (:class:`grader.grading.Grading`
keeps its hosts, and the reference's results for the run's seed), so a re-grade costs
one job. Files are watched with ``watchfiles`` (the ``watch`` extra); an editor's swap
and backup files are ignored, a burst of saves is one re-grade, and Ctrl-C stops it.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, TextIO

from grader.grading import GradeOptions, Grading, Interrupted, Machinery
from grader.i18n import Catalog, T
from grader.report.render import render_terminal, write_reports
from grader.report.common import ICONS, file_to_open, next_exercise, num, pasteable
from grader.results import ExerciseResult, Report, mark_selection

#: a save and the writes an editor makes around it (a temporary file, a rename) are one change
DEBOUNCE_MS, STEP_MS = 1600, 200
#: how often the watcher wakes up when nothing changes (its first answer says it is watching)
WAKE_MS = 300
CLEAR = "\x1b[2J\x1b[H"


#: what a single grading tells to do that ends in "run grade again"; watch mode has its own words for each
WATCH_TODOS = ("todo.file_missing", "todo.syntax_error", "todo.import_error", "todo.hung_import", "todo.other")


class Watcher:
    """Grades a submission, then again on every save of one of its exercise files."""

    def __init__(self, path: Path, options: GradeOptions, catalog: Catalog, lang: str, *, out: TextIO,
                 report_dir: Path, screen: bool, color: bool, machinery: Machinery | None = None,
                 timings: dict | None = None):
        self.path = Path(path)
        #: what the command adds to each report's timings (``command_from``: run by the warm command)
        self.timings = dict(timings or {})
        self.options = options
        self.machinery = machinery
        self.catalog = catalog
        self.lang = lang
        self.out = out
        self.report_dir = report_dir
        self.screen = screen  # a terminal: redraw in place
        self.color = color
        self.results: dict[str, ExerciseResult] = {}
        self.selected: list = []  # the exercises watched: the chapter's, or those of -k

    def words(self, text) -> str:
        return self.catalog.render(text, self.lang)

    # ------------------------------------------------------------- the loop
    def run(self, *, changes: Callable | None = None) -> None:
        """Grade, then watch; returns when stopped (Ctrl-C). ``changes`` replaces ``watchfiles.watch``.

        The files are watched from before the first grading: a save made while it runs, or just
        after the screen says it is watching, is graded too."""
        with Grading(self.path, self.options, self.machinery) as grading:
            # what to do about a problem: save the file again (it is graded at once), not "run grade again"
            self.catalog = grading.chapter.catalog.with_words_of({key: f"watch.{key}" for key in WATCH_TODOS})
            self.selected = grading.chapter.select(self.options.exercises)
            folder = self.path if self.path.is_dir() else self.path.parent
            saves = (changes or _watchfiles)(folder, self._wanted)
            self._grade(grading, tuple(ex.id for ex in self.selected), None)
            for changed in saves:
                exercises = self._exercises_of(grading, changed)
                if exercises:
                    self._grade(grading, exercises, sorted(Path(p).name for p in changed))

    def _grade(self, grading: Grading, exercises: tuple[str, ...], saved: list[str] | None) -> None:
        started = time.monotonic()
        if saved is not None:
            self._say(T("watch.grading", files=", ".join(saved), exercises=", ".join(exercises)))
        try:
            report = grading.run(exercises)
        except Interrupted:
            raise KeyboardInterrupt from None
        for ex in report.exercises:
            self.results[ex.id] = ex
        report.timings.update(self.timings)
        full = self._full_report(grading, report)
        write_reports(full, self.catalog, self.lang, self.report_dir)
        self._draw(grading, report, full, time.monotonic() - started, saved)

    def _full_report(self, grading: Grading, report: Report) -> Report:
        """The chapter as it stands: every exercise's latest result, with this run's seed."""
        exercises = [self.results[ex.id] for ex in grading.chapter.exercises if ex.id in self.results]
        full = Report(chapter=report.chapter, chapter_title=report.chapter_title, seed=report.seed,
                      started_at=report.started_at, duration_s=report.duration_s, submission=report.submission,
                      environment=report.environment, exercises=exercises, integrity=report.integrity,
                      sandbox=report.sandbox, timings=report.timings)
        return mark_selection(full, [ex.id for ex in grading.chapter.exercises])

    # ------------------------------------------------------------- what changed
    def _wanted(self, _change, path: str) -> bool:
        """Only the exercise files themselves (or a notebook: a folder may hold the chapter as one,
        and which copy is graded is told again at every grading): never swap, backup or report files."""
        name = Path(path).name
        if self.path.is_file():
            return name == self.path.name
        if name.startswith((".", "#")) or ".ipynb_checkpoints" in Path(path).parts:
            return False
        return name.endswith(".ipynb") or (name.endswith(".py") and name[:-3].startswith("ex"))

    def _exercises_of(self, grading: Grading, changed: set[str]) -> tuple[str, ...]:
        names = {Path(p).name for p in changed}
        if self.path.is_file() or any(name.endswith(".ipynb") for name in names):  # a notebook holds them all
            return tuple(ex.id for ex in self.selected)
        return tuple(ex.id for ex in self.selected if ex.filename in names)

    # ------------------------------------------------------------- the screen
    def _say(self, text) -> None:
        self.out.write(self.words(text) + "\n")
        self.out.flush()

    def _draw(self, grading: Grading, just: Report, full: Report, seconds: float, saved: list[str] | None) -> None:
        """The screen: the progress bar and every exercise's line; what was just graded in full (on the
        first screen, the whole run: why each exercise that is not full is not); one ``Next:`` line,
        the same exercise a ``grade`` without ``--watch`` would name."""
        chapter = grading.chapter
        lines = [CLEAR] if self.screen else ["", "─" * 60]
        watched = [self.results[ex.id] for ex in self.selected]
        score, most = sum(r.score for r in watched), sum(r.max_score for r in watched)
        done = sum(1 for r in watched if r.status == "passed")
        lines.append(self.words(T("watch.progress", bar=_bar(score, most), score=num(score), max_score=num(most),
                                  done=done, total=len(watched), chapter=chapter.title)))
        for result in watched:
            mark = "  ←" if saved is not None and any(e.id == result.id for e in just.exercises) else ""
            lines.append(f" {ICONS.get(result.status, ' ')} {result.id:<20} {num(result.score):>4}/"
                         f"{num(result.max_score):<3} {self.words(T(f'ui.status.{result.status}'))}{mark}")
        if saved is not None:
            lines += ["", self.words(T("watch.regraded", files=", ".join(saved), seconds=f"{seconds:.1f}"))]
        unfinished = [e for e in just.exercises if e.status != "passed"]
        if unfinished:  # why each is not full; the lines above already list every exercise once
            details = render_terminal(replace(just, exercises=unfinished), self.catalog, self.lang, color=self.color,
                                      head=False, step=False)
            lines += details.rstrip("\n").splitlines()
        nxt = next_exercise(full, scope=[r.id for r in watched])
        if nxt is not None:
            lines += ["", self.words(T("watch.next", exercise=nxt, file=file_to_open(full, nxt)))]
        elif len(watched) == len(chapter.exercises):
            lines += ["", self.words(T("watch.finished", chapter=chapter.title, total=len(chapter.exercises)))]
        else:
            lines += ["", self.words(T("watch.finished_some", ids=", ".join(r.id for r in watched)))]
        lines += ["", self.words(T("watch.watching", path=pasteable(self.path)))]
        self.out.write("\n".join(lines) + "\n")
        self.out.flush()


def _bar(score: float, most: float, width: int = 24) -> str:
    filled = int(round(width * score / most)) if most else 0
    return "█" * filled + "░" * (width - filled)


def _watchfiles(folder: Path, wanted: Callable):
    """Batches of changed paths under ``folder``, from watchfiles (a burst of saves is one batch).
    The watcher is set up before this returns (it has answered once), so no save is missed."""
    import watchfiles

    stream = watchfiles.watch(folder, watch_filter=wanted, debounce=DEBOUNCE_MS, step=STEP_MS,
                              rust_timeout=WAKE_MS, yield_on_timeout=True, raise_interrupt=True)
    first = next(stream)

    def batches():
        for changes in itertools.chain([first], stream):
            if changes:  # an empty batch: the watcher woke up with nothing to say
                yield {path for _, path in changes}

    return batches()
