"""Line charts for the benchmarks, drawn with matplotlib (Agg backend: no display needed).

`line_chart(panels, path)` draws one or more panels side by side. A panel has a title, axis labels and
series of (x, y) points; each series gets a colour, lines between its points, square markers and a
legend entry shared by all panels.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from worksurface.core.lazy import require_extra

require_extra("bench", "the benchmark plots", "matplotlib")

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # before pyplot: benchmarks run headless (CI, ssh)

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, PercentFormatter  # noqa: E402

from worksurface.core.fileio import atomic_write  # noqa: E402

PANEL_INCHES = (5.2, 3.8)
DPI = 100
# Distinct colours (Okabe-Ito, readable by colour-blind readers).
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#f0e442")
LINE_WIDTH_FIRST = 3.5


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


def _thousands(x: float, _pos: int) -> str:
    return f"{x / 1000:g}K" if x >= 1000 else f"{x:g}"


def line_chart(panels: Sequence[Panel], path: Path) -> None:
    """Draw `panels` side by side with a shared legend underneath, and write the PNG atomically."""
    labels = list(dict.fromkeys(s.label for p in panels for s in p.series))
    colour = {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}
    fig, axes = plt.subplots(1, max(1, len(panels)), squeeze=False,
                             figsize=(PANEL_INCHES[0] * max(1, len(panels)), PANEL_INCHES[1]), dpi=DPI)
    try:
        for ax, panel in zip(axes[0], panels):
            for k, s in enumerate(panel.series):
                pts = sorted(s.points)
                xs, ys = [x for x, _ in pts], [y for _, y in pts]
                # Earlier series are drawn thicker, so a later one lying on top of it leaves it visible.
                width = max(1.2, LINE_WIDTH_FIRST - 0.5 * k)
                ax.plot(xs, ys, linestyle="none" if s.markers_only else "-", marker="s", markersize=5,
                        linewidth=width, color=colour[s.label], label=s.label)
            lo, hi = panel.y_range
            ax.set_ylim(lo, hi)
            if hi <= 1:
                ax.yaxis.set_major_formatter(PercentFormatter(1.0))
            ticks = sorted({x for s in panel.series if not s.markers_only for x, _ in s.points})
            if ticks:  # x ticks at the data's x values (not at lone markers')
                ax.set_xticks(ticks)
            ax.xaxis.set_major_formatter(FuncFormatter(_thousands))
            ax.set_title(panel.title)
            ax.set_xlabel(panel.x_label)
            ax.set_ylabel(panel.y_label)
            ax.grid(axis="y", color="#dddddd")
        handles = [plt.Line2D([], [], color=colour[label], marker="s", label=label) for label in labels]
        if handles:
            fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), frameon=False)
        fig.tight_layout(rect=(0, 0.12 if handles else 0, 1, 1))
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
    finally:
        plt.close(fig)
    atomic_write(path, buffer.getvalue())
