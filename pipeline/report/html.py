"""The report page: `render_html(data)` turns the dict of `build_report` into one self-contained HTML
file (inline CSS, inline SVG charts, a few lines of inline script; nothing is fetched)."""

from __future__ import annotations

from html import escape
from typing import Any, Sequence

from ..core.escape import json_for_script
from .fates import Fate
from .tree import subagents_section
from .svg import Bar, Chart, Series, before_after_bars, compact_number, line_chart, percent

# Colours of the fates, in `Fate` order: kept is quiet so that what changed stands out.
FATE_COLOURS: dict[str, str] = {
    Fate.KEPT: "#cfd8dc", Fate.BUDGETED: "#e69f00", Fate.SNIPPED: "#cc79a7", Fate.CLEARED: "#56b4e9",
    Fate.COLLAPSED: "#009e73", Fate.SUMMARIZED: "#0072b2", Fate.DROPPED: "#555555", Fate.SUMMARY: "#d55e00",
    Fate.REINJECTED: "#f0e442", Fate.STATUS: "#8e6bbf", Fate.MARKER: "#8c564b",
}
FATE_INDEX = {f.value: i for i, f in enumerate(Fate)}
# The map's width in pixels and about how many rows the whole transcript should fill: a cell's width
# is its tokens over tokens-per-pixel, so area follows tokens.
MAP_WIDTH = 960
MAP_ROWS = 36
MIN_CELL = 3
# Cell fields, in the order the page's JSON arrays carry them (arrays, not objects: 10,000 cells
# would otherwise repeat every key 10,000 times).
CELL_FIELDS = ("id", "source", "role", "tool", "tokens", "tokens_after", "fate", "stage", "reason", "before",
               "after", "artifact", "fetch", "history")
DETAIL_CHARS = 400

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1000px;padding:16px 20px;color:#222}
h1{font-size:20px;margin:4px 0}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:14px;margin:14px 0 6px}.muted{color:#666}.num{text-align:right;font-variant-numeric:tabular-nums}
table{border-collapse:collapse;margin:6px 0;font-size:13px}td,th{border-bottom:1px solid #eee;padding:3px 8px;
vertical-align:top;text-align:left}th{background:#f6f6f6}pre{white-space:pre-wrap;word-break:break-word;
background:#f8f8f8;padding:8px;max-height:420px;overflow:auto;font-size:12px;margin:4px 0}
#legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:8px 0}
#legend>span{display:inline-flex;align-items:center;gap:5px}
.sw{display:inline-block;width:14px;height:12px;border:1px solid #0003}
#map{display:flex;flex-wrap:wrap;gap:1px;width:%(w)spx;border:1px solid #ddd;padding:2px;line-height:0}
#map i{display:block;height:14px;cursor:pointer;box-sizing:border-box}
#map i.s{outline:1px dashed #000;outline-offset:-1px}#map i.sel{outline:2px solid #d00;outline-offset:-2px}
#detail{margin-top:10px;border:1px solid #ccc;padding:8px 10px;min-height:60px;background:#fcfcfc}
#detail dt{font-weight:600;float:left;clear:left;width:110px}#detail dd{margin:0 0 2px 118px}
td ul{margin:0;padding-left:16px}tr.noted>td{border-bottom:none}
tr.rownote>td{color:#555;font-size:12px;padding-top:0}
details>summary{cursor:pointer}.note{background:#fff8e1;border-left:3px solid #e69f00;padding:4px 8px}
""" % {"w": MAP_WIDTH}

SCRIPT = """
(function(){
  var F=JSON.parse(document.getElementById('cell-fields').textContent);
  var C=JSON.parse(document.getElementById('cell-data').textContent);
  var L=JSON.parse(document.getElementById('fate-labels').textContent);
  var map=document.getElementById('map'),det=document.getElementById('detail'),sel=null;
  function row(dl,k,v){if(v===null||v===undefined||v==='')return;var dt=document.createElement('dt');
    dt.textContent=k;var dd=document.createElement('dd');
    if(k==='before'||k==='after'){var p=document.createElement('pre');
    p.textContent=v;dd.appendChild(p);}else{dd.textContent=v;}dl.appendChild(dt);dl.appendChild(dd);}
  function show(i){var c=C[i],o={};F.forEach(function(f,k){o[f]=c[k];});
    det.textContent='';var dl=document.createElement('dl');
    row(dl,'message',o.id+' ('+(i+1)+' of '+C.length+', '+o.source+')');row(dl,'role',o.role);row(dl,'tool',o.tool);
    row(dl,'tokens',o.tokens+(o.source==='transcript'?' -> '+o.tokens_after+' in the view':''));
    row(dl,'fate',L[o.fate]);row(dl,'stage',o.stage);row(dl,'reason',o.reason);
    row(dl,'history',o.history.length?o.history.join(' -> '):'');
    row(dl,'artifact',o.artifact);row(dl,'fetch original',o.fetch);row(dl,'before',o.before);row(dl,'after',o.after);
    det.appendChild(dl);det.setAttribute('data-cell',i);}
  map.addEventListener('click',function(e){var t=e.target.closest('i[data-i]');if(!t)return;
    if(sel)sel.classList.remove('sel');sel=t;t.classList.add('sel');show(+t.getAttribute('data-i'));});
})();
"""


def _json_script(element_id: str, value: Any) -> str:
    """JSON inside a script element, written so that no text can close the element or open a comment
    in it and JSON.parse still reads it (core.escape.json_for_script)."""
    text = json_for_script(value)
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = (),
           notes: Sequence[str] = ()) -> str:
    """A table whose columns size to their content; a row's note (`notes[i]`, a sentence) goes on a line
    of its own under the row, across the other columns, so it never squeezes to a word per line."""
    out = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for index, r in enumerate(rows):
        note = notes[index] if index < len(notes) else ""
        cells = (f'<td class="num">{escape(str(v))}</td>' if i in numeric
                 else f"<td>{v if isinstance(v, _Raw) else escape(str(v))}</td>" for i, v in enumerate(r))
        out.append(('<tr class="noted">' if note else "<tr>") + "".join(cells) + "</tr>")
        if note:
            out.append(f'<tr class="rownote"><td></td><td colspan="{max(1, len(head) - 1)}">{escape(note)}</td></tr>')
    out.append("</table>")
    return "".join(out)


class _Raw(str):
    """Markup already escaped (a table cell that holds a list)."""


def _fmt(n: Any) -> str:
    return f"{n:,}" if isinstance(n, int) else str(n)


def render_html(data: dict[str, Any]) -> str:
    """The whole page for a report dict (see `build_report`)."""
    src = data["source"]
    title = f"worksurface report: {src['path']}"
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        # The page must open offline and never call out: a CSP that forbids every fetch enforces it.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">",
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        _header(data),
        map_section(data),
        waterfall_section(data),
        surface_section(data["surface"]),
        subagents_section(data.get("subagents")),
    ]
    if data.get("replay"):
        parts.append(replay_section(data["replay"]))
    if data.get("probes"):
        parts.append(probes_section(data["probes"]))
    parts.append('<p class="muted">Made by <code>worksurface report</code>: one self-contained file, no network. '
                 "Every replaced content can be fetched back from the session by the id shown "
                 "(<code>--session DIR</code> keeps the session on disk).</p>")
    parts.append(_json_script("cell-fields", list(CELL_FIELDS)))
    parts.append(_json_script("fate-labels", {f["fate"]: f["label"] for f in data["fates"]}))
    parts.append(_json_script("cell-data", [[c[k] for k in CELL_FIELDS] for c in data["cells"]]))
    parts.append(f"<script>{SCRIPT}</script></body></html>")
    return "\n".join(parts)


def _header(data: dict[str, Any]) -> str:
    src, cfg, view = data["source"], data["config"], data["view"]
    at = f", cut at {src['at']} ({src['messages']} of {src['cut_from']} messages)" if src.get("at") is not None else ""
    mode = "replayed call by call" if cfg["replay"] else ("one forced compaction" if cfg["force"] else "one prepare")
    return (f"<p>Transcript: {src['messages']:,} messages, {src['tokens']:,} tokens "
            f"({escape(str(src['format']))}{escape(at)})"
            f" &rarr; view: {view['messages']:,} messages, {view['tokens']:,} tokens; {mode}. "
            f'<span class="muted">Window {cfg["window"]:,}, autocompact threshold {cfg["threshold"]:,}, '
            f"post-compact target {cfg['post_compact_target']:,}, "
            + ("applied to the size as the provider measures it (anchored on the recorded usage); "
               if cfg.get("use_usage", True) else "applied to the counted text (--no-usage); ")
            + "token figures are counted (worksurface's cl100k count) unless marked measured.</span></p>")


def map_section(data: dict[str, Any]) -> str:
    """The message map: one cell per message, coloured by fate, width by tokens, with a legend."""
    cells = data["cells"]
    total = sum(c["tokens"] for c in cells) or 1
    per_px = max(1.0, total / (MAP_WIDTH * MAP_ROWS))
    legend = "".join(
        f'<span data-fate="{f["fate"]}"><i class="sw f{FATE_INDEX[f["fate"]]}"></i>'
        f'<span>{escape(f["label"])} (<b class="n">{f["count"]:,}</b>)</span></span>' for f in data["fates"])
    styles = "".join(f".f{i}{{background:{FATE_COLOURS[f]}}}" for i, f in enumerate(Fate))
    out = []
    for i, c in enumerate(cells):
        width = min(MAP_WIDTH - 6, max(MIN_CELL, round(c["tokens"] / per_px)))
        surface = " s" if c["source"] == "surface" else ""
        out.append(f'<i class="f{FATE_INDEX[c["fate"]]}{surface}" data-i="{i}" style="width:{width}px"></i>')
    return (f"<h2>Message map</h2><style>{styles}</style>"
            f'<p class="muted">Every transcript message in order, coloured by its fate in the view; width follows '
            f"tokens (1 px = {per_px:,.0f} tokens, at least {MIN_CELL} px). Cells with a dashed outline are messages "
            "worksurface added to the view, placed where the view puts them. Click a cell for its details.</p>"
            f'<div id="legend">{legend}</div><div id="map">{"".join(out)}</div>'
            '<div id="detail"><span class="muted">Click a cell.</span></div>')


def waterfall_section(data: dict[str, Any]) -> str:
    out = ["<h2>Stage waterfall</h2>", _waterfall(data["prepare"], "The last prepare")]
    last = data.get("last_compaction")
    if last and last["report"] != data["prepare"]:
        out.append(_waterfall(last["report"], f"The last compaction (call {last['call']})"))
    return "".join(out)


def _waterfall(report: dict[str, Any], title: str) -> str:
    stages = report["stages"]
    bars = [Bar(s["name"], s["tokens_before"], s["tokens_after"]) for s in stages]
    bars += [Bar(f"+ {r['name']}", r["tokens_before"], r["tokens_after"]) for r in report.get("reinjected", [])]
    rows = [[s["name"], _fmt(s["tokens_before"]), _fmt(s["tokens_after"]), s["items"], f"{s['ms']:.1f}"]
            for s in stages]
    out = [f"<h3>{escape(title)}: {report['view_tokens_before']:,} &rarr; {report['tokens_after']:,} tokens "
           f"in {report['ms']:.0f} ms</h3>",
           before_after_bars(bars, scale_max=report["view_tokens_before"]),
           _table(["stage", "tokens before", "tokens after", "items", "ms"], rows, numeric=(1, 2, 3, 4),
                  notes=[s["skipped"] or "" for s in stages])]
    boundary = report.get("boundary")
    if boundary:
        out.append(f"<p>Compact boundary: {escape(str(boundary.get('trigger')))}, epoch {boundary.get('epoch')}, "
                   f"{_fmt(boundary.get('pre_tokens'))} &rarr; {_fmt(boundary.get('post_tokens'))} tokens, "
                   f"{_fmt(boundary.get('covered'))} messages summarized by "
                   f"{escape(str(boundary.get('summarizer')))}.</p>")
    reinjected = report.get("reinjected", [])
    if reinjected:
        rrows = []
        for r in reinjected:
            d = r.get("details") or {}
            rrows.append([r["name"], _fmt(r["tokens_after"] - r["tokens_before"]), f"{r['ms']:.1f}",
                          _list(d.get("restored", [])), _list(d.get("skipped_visible", [])),
                          _list(d.get("dropped_budget", []))])
        out.append("<h3>Reinjectors</h3>")
        out.append(_table(["reinjector", "tokens", "ms", "restored", "skipped: the view already shows it",
                           "dropped: over budget"], rrows, numeric=(1, 2),
                          notes=[r.get("skipped") or "" for r in reinjected]))
    return "".join(out)


def _list(items: Sequence[Any]) -> _Raw:
    if not items:
        return _Raw("")
    texts = [escape(_item(i)) for i in items]
    body = "".join(f"<li>{t}</li>" for t in texts)
    if len(texts) <= 3:
        return _Raw(f"<ul>{body}</ul>")
    return _Raw(f"<details><summary>{len(texts)} items</summary><ul>{body}</ul></details>")


def _item(item: Any) -> str:
    if isinstance(item, dict):
        return ", ".join(f"{k}: {v}" for k, v in item.items())
    return str(item)


def surface_section(surface: dict[str, Any]) -> str:
    """The summary, the reinjected messages by kind, the status, and the ledger entries by kind."""
    out = ["<h2>The surface</h2>"]
    if surface.get("boundary"):
        out.append(f"<p>{escape(surface['boundary'])}</p>")
    if surface.get("summary"):
        out.append(f"<details open><summary><b>Summary</b> ({escape(surface['summary_id'] or '')})</summary>"
                   f"<pre>{escape(surface['summary'])}</pre></details>")
    else:
        out.append('<p class="muted">No summary in the view: no compaction happened (under the threshold; '
                   "<code>--force</code> compacts anyway, <code>--replay</code> replays every call).</p>")
    groups = surface.get("reinjected") or {}
    if groups:
        out.append("<h3>Reinjected, by kind</h3>")
        for kind, entries in groups.items():
            out.append(f"<p><b>{escape(kind)}</b> ({len(entries)})</p>")
            out.extend(_entry(e) for e in entries)
    if surface.get("status"):
        out.append("<h3>Status</h3>")
        out.extend(_entry(e) for e in surface["status"])
    out.append(ledger_section(surface.get("ledger") or [], surface.get("ledger_counts") or {}))
    return "".join(out)


def ledger_section(entries: Sequence[dict[str, Any]], counts: dict[str, int] | None = None) -> str:
    """Ledger entries (`kind`, `text`, `source_id`) grouped by kind, after the records held per kind."""
    held = {k: v for k, v in (counts or {}).items() if v}
    summary = ("<p>Records held, by kind: " + ", ".join(f"{escape(k)} {v:,}" for k, v in held.items()) + ".</p>"
               if held else "")
    if not entries:
        return ('<h3>Ledger</h3>' + summary + '<p class="muted">No ledger entries to list; when the session '
                "exposes them, they are listed by kind with the message each came from.</p>")
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        by_kind.setdefault(e["kind"], []).append(e)
    out = [f"<h3>Ledger ({len(entries)} entries)</h3>", summary]
    for kind, items in by_kind.items():
        out.append(f"<p><b>{escape(kind)}</b> ({len(items)})</p>")
        out.append(_table(["text", "source"], [[e["text"], e.get("source_id") or ""] for e in items]))
    return "".join(out)


def _entry(e: dict[str, Any]) -> str:
    meta = ", ".join(f"{k}={v}" for k, v in e.get("meta", {}).items())
    return (f"<details><summary>{escape(e['id'])} &middot; {e['tokens']:,} tokens"
            f"{' &middot; ' + escape(meta) if meta else ''}</summary><pre>{escape(e['text'])}</pre></details>")


def replay_section(replay: dict[str, Any]) -> str:
    """The token sawtooth over every call (threshold, compactions marked), the share served from the
    previous prefix, and the billed cost per call when a price model exists."""
    calls = replay["calls"]
    s = replay["summary"]
    marks = [(c["call"], f"call {c['call']}: compaction") for c in calls if c["compacted"]]
    # The threshold applies to the measured size: the sawtooth shows that one, the counted one beside it.
    measured = [(c["call"], c.get("measured_tokens", c["view_tokens"])) for c in calls]
    series = [Series("view tokens, measured", measured),
              Series("view tokens, counted", [(c["call"], c["view_tokens"]) for c in calls], colour="#999")]
    harness = [(c["call"], c.get("measured_tokens", c["view_tokens"])) for c in calls if c.get("harness_compaction")]
    if harness:     # the harness compacted on its own (its boundary is in the transcript)
        series.append(Series("the harness's own compaction", harness, colour="#0072b2", markers_only=True))
    overflows = [(c["call"], c.get("measured_tokens", c["view_tokens"])) for c in calls if c.get("overflow")]
    if overflows:
        series.append(Series("over the threshold after compaction", overflows, colour="#c00", markers_only=True))
    saw = line_chart(Chart(series,
                           x_label="model call", y_label="tokens", hlines=[(replay["threshold"], "threshold")],
                           vmarks=marks, title="view tokens per call (measured: as the provider measures)"))
    shares = [(c["call"], c["cached_tokens"] / c["view_tokens"] if c["view_tokens"] else 1.0) for c in calls[1:]]
    share = line_chart(Chart([Series("share served from the previous prefix", shares, colour="#009e73")],
                             x_label="model call", y_label="share", y_min=0, y_max=1, y_format=percent,
                             vmarks=marks, height=200, title="prompt-cache share per call"))
    out = ["<h2>Replay</h2>",
           f"<p>{s['calls']:,} model calls, {s['compactions']} compactions (dashed orange lines); "
           f"{s['cache_share']:.1%} of the view tokens after the first call were the previous view's prefix "
           "(what a provider's prompt cache serves)."
           + (f" {len(overflows)} calls stayed over the threshold (red marks)." if overflows else "")
           + (f" The harness compacted on its own before {len(harness)} calls (blue marks)." if harness else "")
           + "</p>", saw, share]
    if s.get("total_cost") is not None:
        cost = line_chart(Chart([Series("billed cost", [(c["call"], c.get("cost", 0.0)) for c in calls],
                                        colour="#cc79a7")], x_label="model call", y_label="USD per call",
                                y_format=lambda v: f"${v:.3g}", vmarks=marks, height=200, title="cost per call"))
        out += [f"<p>Billed cost: ${s['total_cost']:,.4f} over {s['calls']:,} calls; the provider cache model "
                f"serves the longest prefix still cached and bills the rest as cache writes "
                f"({escape(replay['pricing'])}).</p>", cost]
    else:
        out.append(f'<p class="note">{escape(replay["pricing"])}</p>')
    return "".join(out)


def probes_section(probes: dict[str, Any]) -> str:
    """Retention versus budget for worksurface and each baseline, and the probes each forgot."""
    series = []
    for method, points in probes["curve"].items():
        pts = [(p["tokens"], p["fraction"]) for p in points]
        # Claude Code's real summary has one size whatever the target: a single marker.
        series.append(Series(method, pts[:1] if method == "claude-code" else pts,
                             markers_only=method == "claude-code"))
    chart = line_chart(Chart(series, x_label="view tokens (the budget every method gets)", y_label="retained",
                             y_min=0, y_max=1, y_format=percent, title="retention versus budget"))
    out = ["<h2>Forgetting probes</h2>",
           f"<p>{probes['probes']} probes, scored at post-compact targets "
           f"{', '.join(compact_number(t) for t in probes['targets'])}: a forced compaction at the cut, as "
           "<code>worksurface probe check</code> makes it, and every baseline gets as many tokens as "
           "worksurface's view.</p>", chart]
    at = probes["at_target"]
    cats = list(dict.fromkeys(c for m in at.values() for c in m["by_category"]))
    rows = []
    for method, m in at.items():
        rows.append([method, _fmt(m["tokens"]), f"{m['retained']}/{m['total']}"]
                    + [("{}/{}".format(*m["by_category"][c]) if c in m["by_category"] else "-") for c in cats])
    out.append(f"<h3>At the target of {probes['main_target']:,} tokens</h3>")
    out.append(_table(["method", "tokens", "retained", *cats], rows, numeric=tuple(range(1, 3 + len(cats)))))
    for method, m in at.items():
        if m["forgotten"]:
            out.append(f"<details{' open' if method == 'worksurface' else ''}><summary><b>{escape(method)}</b> forgot "
                       f"{len(m['forgotten'])}</summary>")
            out.append(_table(["probe", "category", "needles"],
                              [[p["id"], p["category"], " | ".join(p["needles"])] for p in m["forgotten"]]))
            out.append("</details>")
    out.extend(f'<p class="note">{escape(n)}</p>' for n in probes.get("notes", []))
    return "".join(out)
