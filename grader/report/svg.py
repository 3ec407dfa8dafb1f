"""Small charts as inline SVG (no script, no network): bars, bars side by side, a histogram.

Every function returns one ``<svg>`` element as text, sized in pixels, with a
``<title>`` for screen readers and a text label on every bar, so the numbers can be
read without the picture.
"""
from __future__ import annotations

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
