"""The batch page: `render_batch_page(data)` turns a batch's rows and summary into one self-contained
HTML file (inline CSS and SVG, nothing fetched), for `worksurface report --batch DIR`.

`data` is `{"rows": [...], "summary": summarize(rows), "run": run.json's content}`; `load_page_data`
builds it from a results folder.
"""

from __future__ import annotations

import os
from html import escape
from typing import Any, Sequence

from ..report.svg import Chart, Series, line_chart, percent
from .results import load, methods, summarize, summary_layout

# Transcripts listed one per line on the page; past this the table is in the results file.
MAX_TRANSCRIPT_ROWS = 500
# Failed transcripts listed with their error.
MAX_FAILURES = 200
ERROR_CHARS = 300

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:16px 20px;color:#222}
h1{font-size:20px;margin:4px 0}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.muted{color:#666}.num{text-align:right;font-variant-numeric:tabular-nums}
table{border-collapse:collapse;margin:6px 0;font-size:13px}td,th{border-bottom:1px solid #eee;padding:3px 8px;
vertical-align:top;text-align:left}th{background:#f6f6f6}td.err{color:#a00;word-break:break-word}
td.path{word-break:break-all;max-width:480px}
"""


def load_page_data(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The page's data from a results folder (raises ResultsError when it holds no results)."""
    store, rows = load(directory)
    return {"rows": rows, "summary": summarize(rows), "run": store.read_run() or {},
            "source": str(store.table_path)}


def render_batch_page(data: dict[str, Any]) -> str:
    """The whole page as a string."""
    rows: list[dict[str, Any]] = data.get("rows", [])
    summary: list[dict[str, Any]] = data.get("summary") or summarize(rows)
    run: dict[str, Any] = data.get("run", {})
    task = run.get("options", {}).get("task") or (rows[0].get("task") if rows else "?")
    names = methods(rows)
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>worksurface batch: {escape(str(task))}"
             f"</title><style>{CSS}</style></head><body>",
             f"<h1>worksurface batch: {escape(str(task))}</h1>", _overview(rows, run, data.get("source"))]
    parts.append("<h2>Summary by format and target</h2>" + _summary_table(summary, names, str(task)))
    chart = _chart(summary, names, str(task))
    if chart:
        parts.append(chart)
    parts.append(_failures(rows))
    parts.append(_transcripts(rows, names, str(task)))
    parts.append("</body></html>")
    return "\n".join(p for p in parts if p)


def _overview(rows: Sequence[dict[str, Any]], run: dict[str, Any], source: Any) -> str:
    paths = {r.get("path") for r in rows}
    failed = {r.get("path") for r in rows if r.get("error")}
    options = run.get("options", {})
    bits = [f"{len(paths):,} transcripts, {len(rows):,} rows, {len(failed):,} with errors"]
    if options.get("targets"):
        bits.append("targets " + ", ".join(f"{t:,}" for t in options["targets"]))
    if options.get("probes_from"):
        bits.append(f"probes: {options['probes_from']}")
    runs = run.get("runs", [])
    if runs:
        last = runs[-1]
        bits.append(f"{len(runs)} run(s); last on {last.get('scheduler', '?')} with {last.get('workers', '?')} "
                    f"workers, {last.get('seconds', '?')} s" + (", interrupted" if last.get("interrupted") else ""))
    if source:
        bits.append(f"table: {source}")
    return "<p class='muted'>" + escape("; ".join(bits)) + "</p>"


def _num(v: Any) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _pct(v: Any) -> str:
    return "-" if v is None else f"{v:.0%}"


def _summary_table(summary: Sequence[dict[str, Any]], names: Sequence[str], task: str) -> str:
    head, body = summary_layout(summary, task, names)
    out = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for cells in body:
        out.append("<tr><td>" + escape(cells[0]) + "</td>" + "".join(f"<td class='num'>{c}</td>" for c in cells[1:])
                   + "</tr>")
    return "".join(out) + "</table>"


def _chart(summary: Sequence[dict[str, Any]], names: Sequence[str], task: str) -> str:
    """Mean retention per method against the target (probe), or mean view tokens per format against
    the target (compact), over all formats."""
    lines = [s for s in summary if isinstance(s["target"], int)]
    if not lines:
        return ""
    if task == "probe" and names:
        series = []
        for m in names:
            by_target: dict[int, list[tuple[float, int]]] = {}
            for s in lines:
                value = s["retention"].get(m)
                if value is not None:
                    by_target.setdefault(s["target"], []).append((value, s["transcripts"] - s["failed"]))
            points = [(float(t), sum(v * n for v, n in vals) / max(1, sum(n for _, n in vals)))
                      for t, vals in sorted(by_target.items())]
            if points:
                series.append(Series(m, points))
        chart = Chart(series, x_label="post-compact target (tokens)", y_label="probes retained",
                      y_min=0.0, y_max=1.0, y_format=percent)
        return "<h2>Retention by target</h2>" + line_chart(chart)
    if task == "compact":
        formats = sorted({s["format"] for s in lines})
        series = [Series(f, [(float(s["target"]), float(s["view_tokens"])) for s in lines
                             if s["format"] == f and s["view_tokens"] is not None]) for f in formats]
        chart = Chart([s for s in series if s.points], x_label="post-compact target (tokens)",
                      y_label="mean view tokens")
        return "<h2>View size by target</h2>" + line_chart(chart)
    return ""


def _failures(rows: Sequence[dict[str, Any]]) -> str:
    failed: dict[str, str] = {}
    for r in rows:
        if r.get("error") and r.get("path") not in failed:
            failed[str(r.get("path"))] = f"{r.get('error_kind') or 'error'}: {r['error']}"
    if not failed:
        return "<h2>Failures</h2><p class='muted'>none</p>"
    out = ["<h2>Failures</h2><table><tr><th>transcript</th><th>error</th></tr>"]
    for path, error in list(failed.items())[:MAX_FAILURES]:
        out.append(f"<tr><td class='path'>{escape(path)}</td><td class='err'>{escape(error[:ERROR_CHARS])}</td></tr>")
    out.append("</table>")
    if len(failed) > MAX_FAILURES:
        out.append(f"<p class='muted'>and {len(failed) - MAX_FAILURES:,} more (rows with an error in the table)</p>")
    return "".join(out)


def _transcripts(rows: Sequence[dict[str, Any]], names: Sequence[str], task: str) -> str:
    figure = {"compact": ("view_tokens", _num), "replay": ("input_tokens", _num)}.get(task)
    head = ["transcript", "format", "target", "tokens"]
    if figure:
        head.append(figure[0].replace("_", " "))
    head += [f"retention: {m}" for m in names]
    ok = [r for r in rows if not r.get("error")]
    ok.sort(key=lambda r: (str(r.get("path")), r.get("target") or 0))
    out = ["<h2>Transcripts</h2><table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for r in ok[:MAX_TRANSCRIPT_ROWS]:
        cells = [_num(r.get("target")), _num(r.get("tokens"))]
        if figure:
            cells.append(figure[1](r.get(figure[0])))
        cells += [_pct(r.get(f"retention_{m}")) for m in names]
        out.append(f"<tr><td class='path'>{escape(str(r.get('path')))}</td><td>{escape(str(r.get('format')))}</td>"
                   + "".join(f"<td class='num'>{c}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    if len(ok) > MAX_TRANSCRIPT_ROWS:
        out.append(f"<p class='muted'>first {MAX_TRANSCRIPT_ROWS:,} of {len(ok):,} rows; the rest are in the "
                   "results table</p>")
    return "".join(out)


__all__ = ["load_page_data", "render_batch_page"]
