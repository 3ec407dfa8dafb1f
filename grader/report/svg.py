"""Small charts as inline SVG (no script, no network): bars, bars side by side, a histogram.

Every function returns one ``<svg>`` element as text, sized in pixels, with a
``<title>`` for screen readers and a text label on every bar, so the numbers can be
read without the picture.
"""
from __future__ import annotations

import math
from typing import Sequence

from grader.report.html_parts import escape

COLORS = ("#0969da", "#8c959f", "#1a7f37", "#cf222e", "#9a6700")


def _number(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def bars(items: Sequence[tuple[str, float]], *, title: str, unit: str = "", width: int = 560,
         bar_height: int = 18, label_width: int = 180, color: str = COLORS[0]) -> str:
    """Horizontal bars, one per ``(label, value)``, scaled to the largest value."""
    top = max((v for _, v in items), default=0) or 1
    height = len(items) * (bar_height + 6) + 8
    room = width - label_width - 70
    rows = []
    for i, (label, value) in enumerate(items):
        y = 4 + i * (bar_height + 6)
        length = max(1.0, room * max(value, 0) / top)
        rows.append(f'<text x="{label_width - 6}" y="{y + bar_height - 5}" text-anchor="end">{escape(label)}</text>'
                    f'<rect x="{label_width}" y="{y}" width="{length:.1f}" height="{bar_height}" fill="{color}"/>'
                    f'<text x="{label_width + length + 4:.1f}" y="{y + bar_height - 5}">{_number(value)}'
                    f'{escape(unit)}</text>')
    return (f'<svg class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>{"".join(rows)}</svg>')


def paired_bars(labels: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]], *, title: str,
                unit: str = "", width: int = 560, bar_height: int = 14, label_width: int = 180) -> str:
    """For each label, one bar per series (e.g. yours and the reference's), side by side, with a legend."""
    values = [v for _, vs in series for v in vs if v is not None]
    top = max(values, default=0) or 1
    group = len(series) * (bar_height + 2) + 8
    height = 22 + len(labels) * group
    room = width - label_width - 70
    parts = []
    for j, (name, _) in enumerate(series):  # the legend
        x = label_width + j * 150
        parts.append(f'<rect x="{x}" y="4" width="12" height="12" fill="{COLORS[j % len(COLORS)]}"/>'
                     f'<text x="{x + 16}" y="14">{escape(name)}</text>')
    for i, label in enumerate(labels):
        y0 = 22 + i * group
        parts.append(f'<text x="{label_width - 6}" y="{y0 + group / 2:.1f}" text-anchor="end">{escape(label)}</text>')
        for j, (_, vs) in enumerate(series):
            value = vs[i] if i < len(vs) else None
            y = y0 + j * (bar_height + 2)
            if value is None:
                parts.append(f'<text x="{label_width}" y="{y + bar_height - 3}">–</text>')
                continue
            length = max(1.0, room * max(value, 0) / top)
            parts.append(f'<rect x="{label_width}" y="{y}" width="{length:.1f}" height="{bar_height}" '
                         f'fill="{COLORS[j % len(COLORS)]}"/><text x="{label_width + length + 4:.1f}" '
                         f'y="{y + bar_height - 3}">{_number(value)}{escape(unit)}</text>')
    return (f'<svg class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>{"".join(parts)}</svg>')


def speedup_rows(labels: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]],
                 bars: Sequence[float | None], *, title: str, bar_name: str, width: int = 620, bar_height: int = 14,
                 label_width: int = 170) -> str:
    """Speed-ups on a logarithmic axis (1×, 10×, 100×, ...), so that 5× and 700× are both readable:
    for each label, one bar per series side by side, and the bar to pass (``bars``, one per label)
    drawn across them as a dashed line with its number. A speed-up below 1× is drawn at the axis's
    start, its number beside it."""
    values = [v for _, vs in series for v in vs if isinstance(v, (int, float)) and v > 0]
    values += [b for b in bars if isinstance(b, (int, float)) and b > 0]
    top = max(10.0, max(values, default=10) * 1.6)  # room for the largest bar's number
    room = width - label_width - 80
    to_x = lambda v: label_width + room * math.log10(min(max(v, 1.0), top)) / math.log10(top)  # noqa: E731
    group = len(series) * (bar_height + 2) + 22  # each row: the bar to pass's number, then the bars
    plot_top = 24
    height = plot_top + len(labels) * group + 20
    parts = []
    for j, (name, _) in enumerate(series):  # the legend, then the bar to pass
        x = label_width + j * 130
        parts.append(f'<rect x="{x}" y="4" width="12" height="12" fill="{COLORS[j % len(COLORS)]}"/>'
                     f'<text x="{x + 16}" y="14">{escape(name)}</text>')
    x = label_width + len(series) * 130
    parts.append(f'<line x1="{x}" y1="10" x2="{x + 14}" y2="10" class="pass-key" stroke="{COLORS[3]}" '
                 f'stroke-width="2" stroke-dasharray="4 2"/><text x="{x + 18}" y="14">{escape(bar_name)}</text>')
    tick = 1
    while tick <= top:  # the axis: a faint line and a number at every power of ten
        tx = to_x(tick)
        parts.append(f'<line x1="{tx:.1f}" y1="{plot_top - 2}" x2="{tx:.1f}" y2="{height - 16}" stroke="#d0d7de"/>'
                     f'<text x="{tx:.1f}" y="{height - 4}" text-anchor="middle">{tick:g}×</text>')
        tick *= 10
    for i, label in enumerate(labels):
        top_of_row = plot_top + i * group
        y0 = top_of_row + 12
        parts.append(f'<text x="{label_width - 6}" y="{y0 + (group - 12) / 2:.1f}" text-anchor="end">'
                     f'{escape(label)}</text>')
        for j, (name, vs) in enumerate(series):
            value = vs[i] if i < len(vs) else None
            y = y0 + j * (bar_height + 2)
            if not isinstance(value, (int, float)):
                parts.append(f'<text x="{label_width}" y="{y + bar_height - 3}">–</text>')
                continue
            end = max(to_x(value), label_width + 2.0)
            parts.append(f'<rect class="speedup" data-series="{escape(name)}" data-value="{value:.6g}" '
                         f'x="{label_width}" y="{y}" width="{end - label_width:.1f}" height="{bar_height}" '
                         f'fill="{COLORS[j % len(COLORS)]}"/><text x="{end + 4:.1f}" y="{y + bar_height - 3}">'
                         f'{_number(value)}×</text>')
        bar = bars[i] if i < len(bars) else None
        if isinstance(bar, (int, float)) and bar > 0:
            bx = to_x(bar)
            parts.append(f'<line class="pass" data-value="{bar:.6g}" x1="{bx:.1f}" y1="{y0 - 3}" x2="{bx:.1f}" '
                         f'y2="{y0 + group - 19}" stroke="{COLORS[3]}" stroke-width="2" stroke-dasharray="4 2">'
                         f'<title>{escape(bar_name)}: {_number(bar)}×</title></line>'
                         f'<text class="pass-label" x="{bx + 3:.1f}" y="{top_of_row + 9}" fill="{COLORS[3]}">'
                         f'{_number(bar)}×</text>')
    return (f'<svg class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>{"".join(parts)}</svg>')


def histogram(values: Sequence[float], *, lowest: float, highest: float, bins: int, title: str,
              width: int = 560, height: int = 180) -> str:
    """How many of ``values`` fall in each of ``bins`` equal ranges from ``lowest`` to ``highest``."""
    span = (highest - lowest) or 1
    counts = [0] * bins
    for value in values:
        index = min(bins - 1, max(0, int((value - lowest) / span * bins)))
        counts[index] += 1
    top = max(counts) or 1
    plot = height - 36
    step = (width - 20) / bins
    parts = []
    for i, count in enumerate(counts):
        x = 10 + i * step
        h = plot * count / top
        start = lowest + span * i / bins
        parts.append(f'<rect x="{x + 1:.1f}" y="{10 + plot - h:.1f}" width="{step - 2:.1f}" height="{h:.1f}" '
                     f'fill="{COLORS[0]}"/>')
        if count:
            parts.append(f'<text x="{x + step / 2:.1f}" y="{8 + plot - h:.1f}" text-anchor="middle">{count}</text>')
        parts.append(f'<text x="{x + step / 2:.1f}" y="{height - 10}" text-anchor="middle">{_number(start)}</text>')
    return (f'<svg class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>{"".join(parts)}</svg>')
