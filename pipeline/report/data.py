"""The report's data: one plain JSON-able dict that the HTML renders and `--json` prints.

`build_report` runs the transcript through a session (one `prepare`, or with `replay=True` one per
model call as a harness would), works out each message's fate, and gathers the stage reports, the
surface the view carries, the replay's token sawtooth and cache share, and probe retention.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any, Sequence

from ..core.config import Config
from ..formats.base import Transcript
from ..core.model import Message, Origin, message_text
from ..offline.replay import cached_prefix_tokens, call_points, replay_clock
from ..offline.sizing import prepare_once
from ..session.locations import describe
from ..subagents.sidechains import sidechain_tree
from .fates import FATE_LABELS, Fate, clip, compute_cells
from .tree import tree_data

REPORT_VERSION = 1
# Text kept per message (before and after, each): enough to recognise the message; the original is
# one click away through its id. A transcript's whole text budget caps it further (see `text_chars`).
TEXT_CHARS = 400
# Floor for transcripts of tens of thousands of tiny messages: the page then keeps a short head of
# each text (the budget still bounds the total for any realistic message count).
MIN_TEXT_CHARS = 24
# All message texts of one page together: ~2.4 MB of characters keeps a 1M-token transcript's page
# under 5 MB with the markup, the charts and the JSON escaping.
TEXT_BUDGET_CHARS = 2_400_000
# The summary and each reinjected message are shown whole up to this size.
SURFACE_CHARS = 20_000
# Post-compact targets of the retention curve (the configured or --target one is added).
RETENTION_TARGETS = (4_000, 10_000, 20_000, 40_000)
NEEDLE_CHARS = 160


def text_chars(messages: int) -> int:
    """Characters kept per text (before or after) so that the page stays small for any length."""
    share = TEXT_BUDGET_CHARS // max(1, 2 * messages)
    return max(MIN_TEXT_CHARS, min(TEXT_CHARS, share))


def build_report(transcript: Transcript, *, source: str, at: str | int | None = None,
                 config: Config | None = None, force: bool = False, replay: bool = False,
                 probes: Any = None, session: str | os.PathLike[str] | None = None,
                 session_id: str | None = None, use_usage: bool = True) -> dict[str, Any]:
    """Run the transcript (cut at `at`) through a session (kept at `session`, as `Session.open` takes
    it, or in memory), as `compact` (one prepare) or `replay` (one per model call) do, sized on its
    recorded usage unless `use_usage` is off, and gather everything the page shows. `probes` is a
    `ProbeSet` or None."""
    from ..probes.cut import cut, cut_transcript
    from ..session.session import Session  # LangGraph is slow to import; load it when a report is built

    cfg = config or Config.load()
    original = transcript
    if at is not None:
        cut_to = cut_transcript(transcript, cut(transcript.messages, at).before)
        transcript = cut_to if isinstance(cut_to, Transcript) else transcript
    messages = transcript.messages
    started = time.perf_counter()
    calls: list[dict[str, Any]] = []
    with Session.open(session, session_id=session_id, config=cfg) as kept:
        if replay:
            view, report, last_compaction, calls = _replay(messages, kept, use_usage)
        else:
            prepared = prepare_once(kept, transcript, use_usage=use_usage, force=force)
            view, report, last_compaction = prepared.messages, prepared.report.to_json(), None
        edits = kept.edits
        cells = compute_cells(messages, edits, view, kept.counter, text_chars(len(messages)))
        surface = _surface(view, kept)
        counter = kept.counter
        transcript_tokens = counter.messages(messages)
        view_tokens = counter.messages(view)
    built_ms = (time.perf_counter() - started) * 1000
    counts = Counter(c.fate.value for c in cells)
    data: dict[str, Any] = {
        "version": REPORT_VERSION,
        "source": {"path": source, "format": transcript.format, "messages": len(messages),
                   "tokens": transcript_tokens, "at": at, "cut_from": len(original.messages)},
        "config": {"window": cfg.window, "threshold": cfg.threshold,
                   "post_compact_target": cfg.post_compact_target, "force": force, "replay": replay,
                   "use_usage": use_usage,
                   "session": describe(session, session_id) if session else None},
        "view": {"messages": len(view), "tokens": view_tokens},
        "fates": [{"fate": f.value, "label": FATE_LABELS[f], "count": counts.get(f.value, 0)} for f in Fate],
        "counts": {f.value: counts.get(f.value, 0) for f in Fate},
        "cells": [c.to_json() for c in cells],
        "prepare": report,
        "last_compaction": last_compaction,
        "surface": surface,
        "replay": _replay_section(calls, cfg) if replay else None,
        "probes": _probe_section(original, probes, at, cfg, use_usage) if probes is not None else None,
        "subagents": tree_data(sidechain_tree(transcript, counter).to_json()),
        "built_ms": round(built_ms, 1),
    }
    _trim_boundary(data["prepare"])
    if last_compaction:
        _trim_boundary(last_compaction["report"])
    return data


def _trim_boundary(report: dict[str, Any]) -> None:
    """The boundary's covered ids are the cells' business; the report keeps their number."""
    boundary = report.get("boundary")
    if boundary and "covered_ids" in boundary:
        boundary["covered"] = len(boundary.pop("covered_ids"))
    for stage in report.get("stages", []):
        details = stage.get("details")
        if isinstance(details, dict) and "covered_ids" in details:
            details["covered"] = len(details.pop("covered_ids"))


def _replay(messages: Sequence[Message], session: Any, use_usage: bool
            ) -> tuple[list[Message], dict[str, Any], dict[str, Any] | None, list[dict[str, Any]]]:
    """One `prepare` per model call, as `worksurface replay` makes them (`offline.replay`: the same call
    points, clock, usage anchoring and bill), keeping each call's figures and the last compaction's full
    report. A call whose view stays over the threshold is recorded as an overflow and the replay goes on."""
    from ..offline.replay import replay

    last: dict[str, Any] = {}

    def keep(n: int, end: int, prepared: Any, overflow: bool) -> None:
        last.update(view=prepared.messages, report=prepared.report.to_json())
        if prepared.report.boundary is not None:
            last["compaction"] = {"call": n, "report": last["report"]}

    result = replay(messages, session, use_usage=use_usage, on_call=keep)
    ends = [0, *(c.messages for c in result.calls)]
    calls = [{"call": c.call, "messages": c.messages, "view_tokens": c.view_tokens,
              "measured_tokens": c.measured_tokens, "cached_tokens": c.cached_tokens, "fired": c.fired,
              "compacted": c.compaction is not None,
              # The harness's own compaction (a boundary record it wrote, as the formats read one:
              # meta compact_boundary on a conversation message; worksurface's own are Origin.BOUNDARY)
              # since the last call.
              "harness_compaction": any(m.meta.get("compact_boundary") and m.origin is Origin.CONVERSATION
                                        for m in messages[start:c.messages]),
              "overflow": "over the threshold after compaction" if c.overflow else None,
              "ms": c.ms, "cost": c.cost} for c, start in zip(result.calls, ends)]
    if "report" not in last:  # no call point: one plain prepare says why
        prepared = session.prepare(messages)
        last.update(view=prepared.messages, report=prepared.report.to_json())
    return last["view"], last["report"], last.get("compaction"), calls


def _replay_section(calls: list[dict[str, Any]], cfg: Config) -> dict[str, Any]:
    later = calls[1:]
    total = sum(c["view_tokens"] for c in later)
    share = sum(c["cached_tokens"] for c in later) / total if total else 1.0
    costs = [c["cost"] for c in calls if "cost" in c]
    priced = bool(calls) and len(costs) == len(calls)
    return {"calls": calls, "threshold": cfg.threshold,
            "summary": {"calls": len(calls), "compactions": sum(c["compacted"] for c in calls),
                        "overflows": sum(c["overflow"] is not None for c in calls),
                        "cache_share": round(share, 4),
                        "total_cost": round(sum(costs), 6) if priced else None},
            "pricing": _pricing_note(cfg)}


def _pricing_note(cfg: Config) -> str:
    try:
        from ..engine.pricing import price_model
    except ImportError:
        return "no price model in this version (worksurface.engine.pricing): costs not shown"
    prices = price_model(cfg.pricing)
    return (f"{prices.name} prices, USD per million tokens: input {prices.input:g}, cache read "
            f"{prices.cache_read:g}, cache write {prices.cache_write:g}, cache TTL {prices.cache_ttl_seconds:g} s "
            "(set them under [tool.worksurface.pricing])")


def _surface(view: Sequence[Message], session: Any) -> dict[str, Any]:
    """What the view carries besides the conversation: boundary, summary, reinjections by kind,
    status, and the ledger's entries when the session keeps one."""
    boundary = next((m for m in view if m.origin is Origin.BOUNDARY), None)
    summary = next((m for m in view if m.origin is Origin.SUMMARY), None)
    groups: dict[str, list[dict[str, Any]]] = {}
    for m in view:
        if m.origin is Origin.REINJECTION:
            kind = str(m.meta.get("reinjector", "other"))
            groups.setdefault(kind, []).append(_entry(m, session))
    status = [_entry(m, session) for m in view if m.origin is Origin.STATUS]
    return {
        "boundary": message_text(boundary) if boundary is not None else None,
        "summary": clip(message_text(summary), SURFACE_CHARS) if summary is not None else None,
        "summary_id": summary.id if summary is not None else None,
        "reinjected": groups,
        "status": status,
        "ledger": ledger_entries(session),
        "ledger_counts": ledger_counts(session),
    }


def _entry(m: Message, session: Any) -> dict[str, Any]:
    meta = {k: v for k, v in m.meta.items() if isinstance(v, (str, int, float, bool)) and k != "reinjector"}
    return {"id": m.id, "tokens": session.counter.message(m), "text": clip(message_text(m), SURFACE_CHARS),
            "meta": meta}


def ledger_counts(session: Any) -> dict[str, int]:
    """How many records of each kind the session's ledger holds (empty without a ledger)."""
    counts = getattr(getattr(session, "ledger", None), "entry_counts", None)
    return {str(k): int(v) for k, v in counts().items()} if callable(counts) else {}


def ledger_entries(session: Any) -> list[dict[str, Any]]:
    """The session's ledger as `{kind, text, source_id}` entries (empty when it keeps none)."""
    entries = getattr(getattr(session, "ledger", None), "entries", None)
    if entries is None:
        return []
    if callable(entries):
        entries = entries()
    out = []
    for e in entries or ():
        get = e.get if isinstance(e, dict) else (lambda k, _e=e: getattr(_e, k, None))
        kind, text = get("kind"), get("text")
        if kind is None or text is None:
            continue
        out.append({"kind": str(kind), "text": clip(str(text), SURFACE_CHARS),
                    "source_id": get("source_id")})
    return out


def _probe_section(transcript: Transcript, probes: Any, at: str | int | None, cfg: Config,
                   use_usage: bool) -> dict[str, Any]:
    """Retention versus budget (worksurface and each baseline at several post-compact targets) and,
    at the configured target, what each method forgot."""
    from ..probes.check import check

    main = cfg.post_compact_target
    targets = sorted({t for t in RETENTION_TARGETS if t < cfg.threshold} | {main})
    curve: dict[str, list[dict[str, Any]]] = {}
    notes: list[str] = []
    at_main = None
    for target in targets:
        result = check(transcript, probes, at=at, window=cfg.window, target=target, use_usage=use_usage, config=cfg)
        notes.extend(result.notes)
        for method, r in result.methods.items():
            curve.setdefault(method, []).append({"target": target, "tokens": r.tokens,
                                                 "fraction": round(r.score.fraction, 4),
                                                 "retained": len(r.score.retained), "total": r.score.total})
        if target == main:
            at_main = result
    methods = {}
    if at_main is not None:
        for method, r in at_main.methods.items():
            methods[method] = {
                "tokens": r.tokens, "retained": len(r.score.retained), "total": r.score.total,
                "by_category": {c: list(v) for c, v in r.score.by_category.items()},
                "forgotten": [{"id": p.id, "category": p.category,
                               "needles": [clip(n, NEEDLE_CHARS) for n in p.needles]} for p in r.score.forgotten]}
    return {"probes": len(list(probes)), "targets": targets, "main_target": main, "curve": curve,
            "at_target": methods, "notes": list(dict.fromkeys(notes))}

