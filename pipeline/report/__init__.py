"""`worksurface report`: one self-contained HTML page of what compaction did to a transcript.

`build_report(...)` gathers the data (a JSON-able dict), `render_html(data)` makes the page;
`fates.compute_cells` says what happened to each message and `svg` draws the charts.
"""

from __future__ import annotations

from .data import build_report
from .fates import Cell, Fate, compute_cells
from .html import render_html

__all__ = ["Cell", "Fate", "build_report", "compute_cells", "render_html"]
