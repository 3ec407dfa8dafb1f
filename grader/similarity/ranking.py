"""Which pairs of a class's submissions are unusually alike, exercise by exercise.

Measures, for each pair of students on one exercise, two scores from 0 to 1 and their mean:

* ``source_score``: the source fingerprints (:mod:`grader.similarity.source`) the two share, none
  that the exercise's stubs hold (the lines every student was given);
* ``trace_score``: the features of their canonical traces (:mod:`grader.similarity.traced`) they share:
  None when either could not be traced (or its text could not be read), and the pair is scored by its
  source alone.

Each score is a Dice coefficient weighted by rarity: a feature that ``df`` of the ``n`` students with
that exercise hold weighs ``r = log(n / df) / log(n / 2)`` (1 when the pair alone holds it, 0 when all
do); the score is ``2 * sum(r of the shared) / (size of one + size of the other)``, a side's size the sum
over its features of ``FLOOR + (1 - FLOOR) * r``. What most of the class wrote (the obvious correct
``jnp.where(x > 0, x, 0)``) counts for little in the shared part and a quarter in the sizes: a pair
sharing only that scores near 0, and a copy of one rare function among common ones still scores high
(a third of each side rare and shared: 0.67), so a high score says "unusually alike", not "alike".
Measured on ex02: with the plain size (``FLOOR = 1``), a disguised copy of a student's own
``clip_by_norm`` beside the reference's two other functions scored 0.28 and came third in a class of
11; with 0.25 it comes first. A pair whose canonical traces both equal the reference solution's is
flagged ``equals_reference``, and its trace's likeness is the reference's, not each other's: its combined
score is its source score alone, so an identical correct program is never reported as a copy.

Fast: every score of an exercise at once, as one product of a student-by-feature matrix by its
weighted transpose (NumPy), the features indexed once; fingerprints and canonical forms are computed
once per distinct text.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from grader.similarity.source import Print, fingerprints
from grader.similarity.traced import Canonical, canonical

#: a pair is reported when its combined score reaches this
THRESHOLD = 0.5
#: the least a feature weighs in the size of the side that holds it, however common it is
FLOOR = 0.25


class Submission(TypedDict):
    """One student's exercise: its source, and its printed jaxpr (None: it could not be traced)."""
    source: str
    jaxpr: str | None


#: ``{student: {exercise: submission}}``
ClassData = Mapping[str, Mapping[str, Submission]]


@dataclass(frozen=True)
class Baseline:
    """What no pair is blamed for: each exercise's stub texts (their fingerprints never count) and its
    reference solution (a pair whose traces both equal it is flagged)."""
    #: each exercise's stub texts: their fingerprints never count
    stubs: Mapping[str, Sequence[str]]
    #: each exercise's reference solution: a pair whose traces both equal it is flagged
    reference: Mapping[str, Submission] = field(default_factory=dict)


#: lines of a source, first and last (1-based)
Span = tuple[int, int]


@dataclass(frozen=True)
class Match:
    """Lines of the first student's source that match lines of the second's (rarity: the rarest
    fingerprint in them, 0 to 1)."""
    #: the first student's lines
    first: Span
    #: the second student's lines
    second: Span
    #: the rarest fingerprint in them (0 to 1)
    rarity: float


@dataclass(frozen=True)
class Pair:
    """Two students (in order of name) alike on one exercise: the scores (``trace_score`` None when either
    was not traced), their mean (the source score alone when not traced or when ``equals_reference``), the
    lines that match, whether both traces equal the reference solution's, and whether both trace to one
    program (their canonical forms equal: renamed, reordered, ``where`` as ``select``, a helper inlined)."""
    #: the exercise's id
    exercise: str
    #: the two students, in order of name
    students: tuple[str, str]
    #: their sources' rarity-weighted likeness (0 to 1)
    source_score: float
    #: their traced programs' (0 to 1); ``None`` where either was not traced
    trace_score: float | None
    #: the two scores' mean (the source score alone when not traced or when ``equals_reference``)
    score: float
    #: the lines that match, on each side
    why: tuple[Match, ...]
    #: both traces equal the reference solution's
    equals_reference: bool
    #: both trace to one program (their canonical forms equal)
    same_program: bool = False


@dataclass
class _Side:
    """One exercise's students and their measures."""
    #: the students who have the exercise, in order of name
    students: list[str]
    #: each one's fingerprints not in the stubs, with the lines each spans
    prints: list[dict[int, Span]]
    #: each one's canonical trace (``None``: not traced, or not read)
    traces: list[Canonical | None]


def rank(class_data: ClassData, baseline: Baseline, *, threshold: float = THRESHOLD) -> list[Pair]:
    """Every pair of students whose combined score on an exercise reaches ``threshold``, highest first."""
    exercises = sorted({exercise for work in class_data.values() for exercise in work})
    measures = _Measures()
    pairs = [pair for exercise in exercises for pair in _ranked(exercise, class_data, baseline, threshold, measures)]
    return sorted(pairs, key=lambda p: (-p.score, p.exercise, p.students))


@dataclass
class _Measures:
    """Each distinct text measured once: fingerprints by source, canonical form by jaxpr text (None: unread)."""
    #: fingerprints by source text
    prints: dict[str, list[Print]] = field(default_factory=dict)
    #: canonical forms by jaxpr text
    traces: dict[str, Canonical | None] = field(default_factory=dict)

    def source(self, text: str) -> list[Print]:
        if text not in self.prints:
            self.prints[text] = fingerprints(text)
        return self.prints[text]

    def trace(self, text: str | None) -> Canonical | None:
        if not text:
            return None
        if text not in self.traces:
            try:
                self.traces[text] = canonical(text)
            except ValueError:
                self.traces[text] = None
        return self.traces[text]


def _side(exercise: str, class_data: ClassData, baseline: Baseline, measures: _Measures) -> _Side:
    stub = {p.hash for text in baseline.stubs.get(exercise, ()) for p in measures.source(text)}
    students = sorted(student for student, work in class_data.items() if exercise in work)
    prints, traces = [], []
    for student in students:
        submission = class_data[student][exercise]
        spans: dict[int, Span] = {}
        for p in measures.source(submission["source"]):
            if p.hash not in stub:
                spans.setdefault(p.hash, p.lines)
        prints.append(spans)
        traces.append(measures.trace(submission.get("jaxpr")))
    return _Side(students, prints, traces)


def rarity(holders: np.ndarray, n: int) -> np.ndarray:
    """A feature's weight from how many of ``n`` students hold it: 1 for two, 0 for all (no class: 1)."""
    if n <= 2:
        return np.ones_like(holders, dtype=np.float64)
    return np.clip(np.log(n / np.maximum(holders, 1)) / math.log(n / 2), 0.0, 1.0)


def scores(sets: Sequence[Sequence[object] | None]) -> tuple[np.ndarray, dict[object, float]]:
    """The rarity-weighted Dice coefficient of every two of ``sets`` (NaN where either is None), and
    each feature's weight."""
    rows = [i for i, s in enumerate(sets) if s is not None]
    index: dict[object, int] = {}
    for i in rows:
        for feature in sets[i]:  # type: ignore[union-attr]
            index.setdefault(feature, len(index))
    held = np.zeros((len(rows), max(len(index), 1)), dtype=np.float32)
    for row, i in enumerate(rows):
        held[row, [index[f] for f in sets[i]]] = 1.0  # type: ignore[union-attr]
    weights = rarity(held.sum(axis=0), len(rows)).astype(np.float32)
    shared = (held * weights) @ held.T
    sizes = held @ (FLOOR + (1 - FLOOR) * weights)
    total = sizes[:, None] + sizes[None, :]
    dice = np.divide(2 * shared, total, out=np.zeros_like(shared), where=total > 0)
    full = np.full((len(sets), len(sets)), np.nan, dtype=np.float32)
    full[np.ix_(rows, rows)] = np.clip(dice, 0.0, 1.0)
    return full, {feature: float(weights[column]) for feature, column in index.items()}


def _ranked(exercise: str, class_data: ClassData, baseline: Baseline, threshold: float,
            measures: _Measures) -> list[Pair]:
    side = _side(exercise, class_data, baseline, measures)
    source, source_weights = scores([list(spans) for spans in side.prints])
    trace, _ = scores([list(t.features) if t is not None else None for t in side.traces])
    reference = baseline.reference.get(exercise)
    expected = measures.trace(reference.get("jaxpr")) if reference else None
    at_reference = np.array([t is not None and expected is not None and t.digest == expected.digest
                             for t in side.traces])
    both_reference = at_reference[:, None] & at_reference[None, :]
    same, whole = _same_program(side.traces)
    trace = np.where(same & ~both_reference, np.fmax(trace, whole), trace)
    combined = np.where(np.isnan(trace) | both_reference, source, (source + np.nan_to_num(trace)) / 2)
    firsts, seconds = np.nonzero(np.triu(combined >= threshold, k=1))
    return [Pair(exercise, (side.students[i], side.students[j]), round(float(source[i, j]), 4),
                 None if np.isnan(trace[i, j]) else round(float(trace[i, j]), 4), round(float(combined[i, j]), 4),
                 why(side.prints[i], side.prints[j], source_weights), bool(both_reference[i, j]), bool(same[i, j]))
            for i, j in zip(firsts.tolist(), seconds.tolist())]


def _same_program(traces: Sequence[Canonical | None]) -> tuple[np.ndarray, np.ndarray]:
    """Which pairs trace to one program (equal digests), and that program's rarity as a whole: its features may
    each be common (every softmax has its exp and its sum) while the program they make is two students' alone,
    and then the pair's trace score is at least that rarity."""
    digests = [t.digest if t is not None else None for t in traces]
    counts: dict[str, int] = {}
    for d in digests:
        if d is not None:
            counts[d] = counts.get(d, 0) + 1
    n = sum(counts.values())
    same = np.array([[a is not None and a == b for b in digests] for a in digests], dtype=bool).reshape(
        len(digests), len(digests))
    held = np.array([counts.get(d, 0) if d is not None else 0 for d in digests], dtype=np.float64)
    whole = np.broadcast_to(rarity(held, n)[:, None], same.shape) if n else np.zeros(same.shape)
    return same, np.where(same, whole, 0.0).astype(np.float32)


def why(first: Mapping[int, Span], second: Mapping[int, Span], weights: Mapping[object, float]) -> tuple[Match, ...]:
    """The lines of two sources that share fingerprints, runs of matches that touch on both sides merged."""
    shared = sorted((first[h], second[h], round(weights.get(h, 1.0), 3)) for h in first.keys() & second.keys())
    merged: list[Match] = []
    for left, right, weight in shared:
        if merged and _touch(merged[-1].first, left) and _touch(merged[-1].second, right):
            last = merged[-1]
            merged[-1] = Match(_join(last.first, left), _join(last.second, right), max(last.rarity, weight))
        else:
            merged.append(Match(left, right, weight))
    return tuple(merged)


def _touch(a: Span, b: Span) -> bool:
    return a[0] <= b[1] + 1 and b[0] <= a[1] + 1


def _join(a: Span, b: Span) -> Span:
    return (min(a[0], b[0]), max(a[1], b[1]))
