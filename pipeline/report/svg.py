"""Inline SVG charts written as strings: line charts (with threshold lines and event marks) and
horizontal before/after bars. No JavaScript library and nothing fetched, so a page that embeds them
opens offline; the batch page reuses these helpers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Callable, Sequence

# Okabe-Ito: distinct for colour-blind readers; a series takes the next colour unless given one.
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#999999")
FONT = "font-family:system-ui,sans-serif;font-size:11px"
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 64, 16, 16, 40
# A series with more points than this is drawn as one path without per-point markers (a 5,000-call
# replay would otherwise add 5,000 circles to the page).
MAX_MARKERS = 60
TICKS = 5


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]
    colour: str | None = None
    markers_only: bool = False
    dashed: bool = False


@dataclass
class Chart:
    """A line chart: series, optional horizontal reference lines (value, label) and vertical marks
    (x, label) such as compactions."""

    series: list[Series]
    x_label: str = ""
    y_label: str = ""
    width: int = 720
    height: int = 260
    y_min: float | None = None
    y_max: float | None = None
    hlines: list[tuple[float, str]] = field(default_factory=list)
    vmarks: list[tuple[float, str]] = field(default_factory=list)
    x_format: Callable[[float], str] = lambda v: compact_number(v)
    y_format: Callable[[float], str] = lambda v: compact_number(v)
    title: str = ""


def compact_number(v: float) -> str:
    """12,345 -> 12.3k; 2,500,000 -> 2.5M; small values as they are."""
    a = abs(v)
    if a >= 1_000_000:
        return f"{v / 1_000_000:.3g}M"
    if a >= 1_000:
        return f"{v / 1_000:.3g}k"
    return f"{v:.3g}" if a < 10 and v != int(v) else f"{v:.0f}"


def percent(v: float) -> str:
    return f"{v:.0%}"


def nice_ticks(lo: float, hi: float, n: int = TICKS) -> list[float]:
    """About `n` round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    v = start
    while v <= hi + step * 1e-9:
        if v >= lo - step * 1e-9:
            ticks.append(round(v, 10))
        v += step
    return ticks


def line_chart(chart: Chart) -> str:
    """The chart as an `<svg>` element string (legend included under the plot area)."""
    xs = [x for s in chart.series for x, _ in s.points] + [x for x, _ in chart.vmarks]
    ys = [y for s in chart.series for _, y in s.points] + [y for y, _ in chart.hlines]
    lo_x, hi_x = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if hi_x == lo_x:
        lo_x, hi_x = lo_x - 1, hi_x + 1
    lo_y = chart.y_min if chart.y_min is not None else min(0.0, min(ys, default=0.0))
    hi_y = chart.y_max if chart.y_max is not None else max(ys, default=1.0) * 1.05 or 1.0
    if hi_y <= lo_y:
        hi_y = lo_y + 1
    labels = [s.label for s in chart.series]
    legend_rows = max(1, math.ceil(sum(len(lb) * 7 + 40 for lb in labels) / max(1, chart.width - MARGIN_L)))
    height = chart.height + 12 + legend_rows * 16
    x0, x1 = MARGIN_L, chart.width - MARGIN_R
    y0, y1 = MARGIN_T, chart.height - MARGIN_B

    def px(x: float) -> float:
        return x0 + (x - lo_x) / (hi_x - lo_x) * (x1 - x0)

    def py(y: float) -> float:
        return y1 - (y - lo_y) / (hi_y - lo_y) * (y1 - y0)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{chart.width}" '
           f'height="{height}" viewBox="0 0 {chart.width} {height}" style="{FONT}">']
    if chart.title:
        out.append(f"<title>{escape(chart.title)}</title>")
    for t in nice_ticks(lo_y, hi_y):
        y = py(t)
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>'
                   f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(chart.y_format(t))}</text>')
    for t in nice_ticks(lo_x, hi_x, 7):
        x = px(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y1}" y2="{y1 + 4}" stroke="#333"/>'
                   f'<text x="{x:.1f}" y="{y1 + 16}" text-anchor="middle">{escape(chart.x_format(t))}</text>')
    out.append(f'<line x1="{x0}" x2="{x1}" y1="{y1}" y2="{y1}" stroke="#333"/>'
               f'<line x1="{x0}" x2="{x0}" y1="{y0}" y2="{y1}" stroke="#333"/>')
    out.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{y1 + 32}" text-anchor="middle">{escape(chart.x_label)}</text>')
    out.append(f'<text transform="translate(12 {(y0 + y1) / 2:.0f}) rotate(-90)" text-anchor="middle">'
               f"{escape(chart.y_label)}</text>")
    for x, label in chart.vmarks:
        out.append(f'<line class="vmark" x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{y0}" y2="{y1}" stroke="#d55e00" '
                   f'stroke-dasharray="3 3"><title>{escape(label)}</title></line>')
    for y, label in chart.hlines:
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#c00" '
                   f'stroke-width="1.5" stroke-dasharray="6 4"/>'
                   f'<text x="{x1 - 4}" y="{py(y) - 4:.1f}" text-anchor="end" fill="#c00">{escape(label)}</text>')
    for k, s in enumerate(chart.series):
        colour = s.colour or PALETTE[k % len(PALETTE)]
        pts = sorted(s.points)
        if not s.markers_only and len(pts) > 1:
            d = " ".join(f"{'M' if i == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for i, (x, y) in enumerate(pts))
            dash = ' stroke-dasharray="5 3"' if s.dashed else ""
            out.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="{max(1.5, 3 - k * 0.4):.1f}"'
                       f'{dash}/>')
        if s.markers_only or len(pts) <= MAX_MARKERS:
            for x, y in pts:
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{colour}">'
                           f"<title>{escape(s.label)}: {escape(chart.x_format(x))}, "
                           f"{escape(chart.y_format(y))}</title></circle>")
    out.append(_legend([(s.label, s.colour or PALETTE[k % len(PALETTE)]) for k, s in enumerate(chart.series)],
                       x0, chart.height + 12, chart.width - MARGIN_R))
    out.append("</svg>")
    return "".join(out)


def _legend(items: Sequence[tuple[str, str]], x_start: int, y: int, x_max: int) -> str:
    out = []
    x = x_start
    for label, colour in items:
        w = len(label) * 7 + 40
        if x + w > x_max and x > x_start:
            x, y = x_start, y + 16
        out.append(f'<rect x="{x}" y="{y - 9}" width="14" height="10" fill="{colour}"/>'
                   f'<text x="{x + 20}" y="{y}">{escape(label)}</text>')
        x += w
    return "".join(out)


@dataclass
class Bar:
    """One row of a before/after bar chart (a stage: tokens in, tokens out)."""

    label: str
    before: float
    after: float


def before_after_bars(bars: Sequence[Bar], *, width: int = 720, row: int = 26,
                      fmt: Callable[[float], str] = compact_number, scale_max: float | None = None) -> str:
    """Horizontal bars: a light bar for `before`, a dark one for `after`, the drop labelled."""
    label_w, right = 120, 170
    top = max((max(b.before, b.after) for b in bars), default=1.0)
    top = max(top, scale_max or 0.0, 1.0)
    height = row * len(bars) + 24
    span = width - label_w - right

    def w(v: float) -> float:
        return max(0.0, v / top * span)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart bars" role="img" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" style="{FONT}">']
    for i, b in enumerate(bars):
        y = 8 + i * row
        delta = b.after - b.before
        change = f"{fmt(b.before)} → {fmt(b.after)}" + (f" ({'+' if delta > 0 else '−'}{fmt(abs(delta))})"
                                                        if delta else "")
        out.append(f'<text x="{label_w - 8}" y="{y + 14}" text-anchor="end">{escape(b.label)}</text>'
                   f'<rect x="{label_w}" y="{y + 2}" width="{w(b.before):.1f}" height="16" fill="#cfd8dc">'
                   f"<title>before: {escape(fmt(b.before))}</title></rect>"
                   f'<rect x="{label_w}" y="{y + 6}" width="{w(b.after):.1f}" height="8" fill="#0072b2">'
                   f"<title>after: {escape(fmt(b.after))}</title></rect>"
                   f'<text x="{label_w + span + 6}" y="{y + 14}">{escape(change)}</text>')
    out.append("</svg>")
    return "".join(out)
