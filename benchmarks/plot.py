"""A tiny pure-Python line chart written as PNG (zlib + struct): matplotlib is not a dependency.

`line_chart(panels, path)` draws one or more panels side by side. A panel has a title, axis labels and
series of (x, y) points; each series gets a colour, lines between its points, square markers and a
legend entry. Text uses a built-in 5x7 bitmap font (upper case, digits, a few signs).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from worksurface.fileio import atomic_write

PANEL_W, PANEL_H = 520, 380
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 70, 24, 34, 100
LINE_WIDTH_FIRST = 7
SCALE = 2  # font pixels per glyph pixel: 5x7 glyphs become 10x14
WHITE, BLACK, GREY = (255, 255, 255), (0, 0, 0), (210, 210, 210)
# Distinct colours (Okabe-Ito, readable by colour-blind readers).
PALETTE = ((0, 114, 178), (213, 94, 0), (0, 158, 115), (204, 121, 167), (230, 159, 0), (86, 180, 233),
           (0, 0, 0), (240, 228, 66))

# 5x7 glyphs: seven rows of five bits each, as hex bytes (bit 4 is the leftmost pixel).
_FONT = {
    "A": "0E 11 11 11 1F 11 11", "B": "1E 11 11 1E 11 11 1E", "C": "0E 11 10 10 10 11 0E",
    "D": "1C 12 11 11 11 12 1C", "E": "1F 10 10 1E 10 10 1F", "F": "1F 10 10 1E 10 10 10",
    "G": "0E 11 10 17 11 11 0F", "H": "11 11 11 1F 11 11 11", "I": "0E 04 04 04 04 04 0E",
    "J": "07 02 02 02 02 12 0C", "K": "11 12 14 18 14 12 11", "L": "10 10 10 10 10 10 1F",
    "M": "11 1B 15 15 11 11 11", "N": "11 11 19 15 13 11 11", "O": "0E 11 11 11 11 11 0E",
    "P": "1E 11 11 1E 10 10 10", "Q": "0E 11 11 11 15 12 0D", "R": "1E 11 11 1E 14 12 11",
    "S": "0F 10 10 0E 01 01 1E", "T": "1F 04 04 04 04 04 04", "U": "11 11 11 11 11 11 0E",
    "V": "11 11 11 11 11 0A 04", "W": "11 11 11 15 15 15 0A", "X": "11 11 0A 04 0A 11 11",
    "Y": "11 11 11 0A 04 04 04", "Z": "1F 01 02 04 08 10 1F", "0": "0E 11 13 15 19 11 0E",
    "1": "04 0C 04 04 04 04 0E", "2": "0E 11 01 02 04 08 1F", "3": "1F 02 04 02 01 11 0E",
    "4": "02 06 0A 12 1F 02 02", "5": "1F 10 1E 01 01 11 0E", "6": "06 08 10 1E 11 11 0E",
    "7": "1F 01 02 04 08 08 08", "8": "0E 11 11 0E 11 11 0E", "9": "0E 11 11 0F 01 02 0C",
    " ": "00 00 00 00 00 00 00", ".": "00 00 00 00 00 0C 0C", ",": "00 00 00 00 0C 04 08",
    "%": "18 19 02 04 08 13 03", "-": "00 00 00 1F 00 00 00", "(": "02 04 08 08 08 04 02",
    ")": "08 04 02 02 02 04 08", "/": "00 01 02 04 08 10 00", ":": "00 0C 0C 00 0C 0C 00",
    "=": "00 00 1F 00 1F 00 00", "+": "00 04 04 1F 04 04 00", "_": "00 00 00 00 00 00 1F",
}


def _rows(code: str) -> list[int]:
    return [int(b, 16) for b in code.split()]


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]
    markers_only: bool = False


@dataclass
class Panel:
    title: str
    x_label: str
    y_label: str
    series: list[Series] = field(default_factory=list)
    y_range: tuple[float, float] = (0.0, 1.0)


class Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.w, self.h = width, height
        self.px = bytearray(WHITE * (width * height))

    def set(self, x: int, y: int, colour: tuple[int, int, int]) -> None:
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i:i + 3] = bytes(colour)

    def rect(self, x0: int, y0: int, x1: int, y1: int, colour) -> None:
        for y in range(min(y0, y1), max(y0, y1) + 1):
            for x in range(min(x0, x1), max(x0, x1) + 1):
                self.set(x, y, colour)

    def line(self, x0: int, y0: int, x1: int, y1: int, colour, width: int = 2) -> None:
        """Bresenham, thickened to `width` pixels."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            self.rect(x0, y0, x0 + width - 1, y0 + width - 1, colour)
            if x0 == x1 and y0 == y1:
                break
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x: int, y: int, s: str, colour=BLACK) -> None:
        for ch in s.upper():
            rows = _rows(_FONT.get(ch, _FONT[" "]))
            for r, bits in enumerate(rows):
                for c in range(5):
                    if bits & (1 << (4 - c)):
                        self.rect(x + c * SCALE, y + r * SCALE, x + c * SCALE + SCALE - 1,
                                  y + r * SCALE + SCALE - 1, colour)
            x += 6 * SCALE

    def png(self) -> bytes:
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3]) for y in range(self.h))

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        header = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + \
            chunk(b"IEND", b"")


def text_width(s: str) -> int:
    return len(s) * 6 * SCALE


def _draw_panel(canvas: Canvas, left: int, panel: Panel, labels: list[str]) -> None:
    x0, x1 = left + MARGIN_L, left + PANEL_W - MARGIN_R
    y0, y1 = MARGIN_T, PANEL_H - MARGIN_B
    xs = [x for s in panel.series for x, _ in s.points] or [0.0, 1.0]
    lo_x, hi_x = min(xs), max(xs)
    if hi_x == lo_x:
        lo_x, hi_x = lo_x - 1, hi_x + 1
    lo_y, hi_y = panel.y_range

    def px(x: float, y: float) -> tuple[int, int]:
        return (round(x0 + (x - lo_x) / (hi_x - lo_x) * (x1 - x0)),
                round(y1 - (y - lo_y) / (hi_y - lo_y) * (y1 - y0)))

    for k in range(5):  # horizontal grid lines with y labels
        v = lo_y + (hi_y - lo_y) * k / 4
        _, gy = px(lo_x, v)
        canvas.line(x0, gy, x1, gy, GREY, 1)
        canvas.text(left + 4, gy - 7, f"{v:.0%}" if hi_y <= 1 else f"{v:g}")
    ticks = {x for s in panel.series if not s.markers_only for x, _ in s.points} or set(xs)
    for x in sorted(ticks):  # x ticks at the data's x values (not at lone markers')
        gx, _ = px(x, lo_y)
        canvas.line(gx, y1, gx, y1 + 4, BLACK, 1)
        label = f"{x / 1000:g}K" if x >= 1000 else f"{x:g}"
        canvas.text(gx - text_width(label) // 2, y1 + 8, label)
    canvas.line(x0, y1, x1, y1, BLACK, 1)
    canvas.line(x0, y0, x0, y1, BLACK, 1)
    canvas.text(left + (PANEL_W - text_width(panel.title)) // 2, 8, panel.title)
    canvas.text(x0 + (x1 - x0 - text_width(panel.x_label)) // 2, y1 + 28, panel.x_label)
    for k, s in enumerate(panel.series):
        colour = PALETTE[labels.index(s.label) % len(PALETTE)]
        pts = [px(x, y) for x, y in sorted(s.points)]
        # Earlier series are drawn thicker, so a later one lying on top of it leaves it visible.
        width = max(2, LINE_WIDTH_FIRST - k)
        if not s.markers_only:
            for (ax, ay), (bx, by) in zip(pts, pts[1:]):
                canvas.line(ax, ay, bx, by, colour, width)
        for x, y in pts:
            canvas.rect(x - 3, y - 3, x + 3, y + 3, colour)


def line_chart(panels: Sequence[Panel], path: Path) -> None:
    """Draw `panels` side by side with a shared legend underneath, and write the PNG atomically."""
    labels = list(dict.fromkeys(s.label for p in panels for s in p.series))
    canvas = Canvas(PANEL_W * len(panels), PANEL_H)
    for i, panel in enumerate(panels):
        _draw_panel(canvas, i * PANEL_W, panel, labels)
    x, y = MARGIN_L, PANEL_H - MARGIN_B + 52
    for label in labels:
        width = 24 + text_width(label) + 16
        if x + width > canvas.w:
            x, y = MARGIN_L, y + 20
        colour = PALETTE[labels.index(label) % len(PALETTE)]
        canvas.rect(x, y + 3, x + 14, y + 10, colour)
        canvas.text(x + 20, y, label)
        x += width
    atomic_write(path, canvas.png())
