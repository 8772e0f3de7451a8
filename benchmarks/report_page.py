"""Section: the `worksurface report` page. For each benchmark transcript (the long fixture among them)
and for a generated ~1M-token session: how long the report takes to build, how large the page is, and
how long headless Chromium takes to open it (median of a few opens in new tabs). Measured and printed, never
asserted: the targets (open under 2 s, under 5 MB for 1M tokens) are read off the table.
"""

from __future__ import annotations

import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from statistics import median
from typing import Any, Iterator

from worksurface.core.fileio import atomic_write
from fixturegen import write_session
from worksurface.report import build_report, render_html

from . import replay
from .plan import SCALE_SEED, Plan
from .report import table

NAME = "report"
# The size the page must stay small for; a plan whose scale series stops earlier (the smoke test)
# uses its own largest size instead.
GENERATED_TOKENS = 1_000_000
OPENS = 3  # a browser's first open pays for its start-up caches; the median of three is typical
TARGET_OPEN_S = 2.0
TARGET_BYTES = 5 * 1024 * 1024


def run(plan: Plan) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    browser = _browser_reason()
    if browser:
        notes.append(f"open times not measured: {browser}")
    with tempfile.TemporaryDirectory(prefix="worksurface-report-bench-") as tmp, _browser(browser) as chromium:
        work = Path(tmp)
        for source in plan.sources:
            rows.append(_measure(source.name, source.path, work, chromium))
        tokens = min(GENERATED_TOKENS, max(plan.scale_sizes, default=GENERATED_TOKENS))
        generated = write_session(work / f"generated-{tokens}.jsonl", tokens, seed=SCALE_SEED)
        rows.append(_measure(f"generated {tokens:,} tokens", generated, work, chromium))
    return {"rows": rows, "notes": notes, "targets": {"open_s": TARGET_OPEN_S, "bytes": TARGET_BYTES}}


def _browser_reason() -> str | None:
    from worksurface.report.browser import BrowserUnavailable, find_chromium

    try:
        find_chromium()
        import playwright.sync_api  # noqa: F401
    except (BrowserUnavailable, ImportError) as exc:
        return str(exc)
    return None


@contextmanager
def _browser(unavailable: str | None) -> Iterator[Any]:
    """One browser for every open (its start-up is not part of a page's open time), or None."""
    if unavailable:
        yield None
        return
    from worksurface.report.browser import Chromium

    with Chromium() as chromium:
        yield chromium


def _measure(name: str, path: Path, work: Path, chromium: Any) -> dict[str, Any]:
    transcript = replay.read_transcript(path)
    started = time.perf_counter()
    data = build_report(transcript, source=path.name)
    page = render_html(data)
    build_s = time.perf_counter() - started
    out = work / f"{path.stem}.report.html"
    atomic_write(out, page)
    row: dict[str, Any] = {"transcript": name, "messages": data["source"]["messages"],
                           "tokens": data["source"]["tokens"], "cells": len(data["cells"]),
                           "build_s": round(build_s, 3), "bytes": out.stat().st_size,
                           "under_5mb": out.stat().st_size < TARGET_BYTES, "open_s": None}
    if chromium is not None:
        row.update(_open_times(chromium, out, len(data["cells"])))
    return row


def _open_times(chromium: Any, path: Path, cells: int) -> dict[str, Any]:
    """Seconds from navigation to the load event (the map drawn and the script run), over OPENS new
    tabs; checks the page drew every cell and neither logged an error nor requested anything."""
    times = []
    drawn = 0
    errors: list[str] = []
    for _ in range(OPENS):
        with chromium.open(path) as opened:
            times.append(opened.open_seconds)
            drawn = opened.page.locator("#map > i").count()
            errors = opened.console_errors + opened.foreign_requests
    return {"open_s": round(median(times), 3), "open_s_runs": [round(t, 3) for t in times],
            "cells_drawn": drawn, "all_cells_drawn": drawn == cells, "console_errors_or_requests": len(errors)}


def render(result: dict[str, Any], caption: str) -> str:
    rows = [[r["transcript"], r["messages"], r["tokens"], r["cells"], r["build_s"],
             round(r["bytes"] / 1024 / 1024, 2), r["open_s"], r.get("all_cells_drawn")]
            for r in result["rows"]]
    parts = ["## Report page", caption,
             "`worksurface report` (one prepare) per transcript: build = data + HTML in seconds; page size "
             f"in MB (target under {TARGET_BYTES // 1024 // 1024} MB for a 1M-token transcript); open = headless "
             f"Chromium, navigation to load event, median of {OPENS} new tabs of one browser (target under "
             f"{TARGET_OPEN_S:g} s for the long fixture).",
             table(["transcript", "messages", "tokens", "cells", "build s", "MB", "open s", "every cell drawn"], rows)]
    parts += [f"- {n}" for n in result.get("notes", [])]
    return "\n\n".join(parts)


if __name__ == "__main__":  # `python -m benchmarks.report_page`: this section alone, printed
    import json

    from .plan import quick_plan

    print(json.dumps(run(quick_plan()), indent=2))
