"""Section 5: the billed cost of a session, worksurface against the baseline harnesses.

Every method replays the same transcripts on the same call points and clock (message timestamps, so
real idle gaps expire the cache) and is billed by the same provider cache model
(`worksurface.engine.pricing.PromptCache`, Anthropic prices by default): per call the prefix still cached is
read, the rest written. Transcripts: the two long Claude Code sessions, the long fixture, and a
generated session long enough to compact at least three times at the threshold. Writes one plot per
transcript (cost per call and cumulative cost) next to RESULTS.md.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any, Sequence

from worksurface import Config, Session
from fixturegen import write_session
from worksurface.core.errors import WorksurfaceError
from worksurface.formats import Transcript
from worksurface.offline.replay import replay as offline_replay
from worksurface.offline.sizing import SizeFlags
from worksurface.probes import Probe, ProbeSet, derive, score
from worksurface.probes.harnesses import default_harnesses
from worksurface.engine.pricing import PER_MILLION, BilledCall, PriceModel, PromptCache, price_model, summarize_bill
from worksurface.core.tokens import TokenCounter
from worksurface.core.view import live_slice

from . import replay
from .plan import Plan
from .report import table

NAME = "cost"
# A generated session of this size compacts three times or more at the default 200k window when the
# view grows to the threshold (167k) and each compaction brings it to about 40k, as the summarize-at-
# threshold baseline does; worksurface's batched clearing may keep it under the threshold throughout.
GENERATED_TOKENS = 560_000
GENERATED_SEED = 11
WORKSURFACE = "worksurface"
# A call that writes more than this rewrote an edited prefix (an agent step appends far less): the
# table counts such calls, the events where a method pays for its own edits.
BIG_REWRITE_TOKENS = 20_000


def run(plan: Plan, out_dir: Path | None = None, prices: PriceModel | None = None,
        generated_tokens: int = GENERATED_TOKENS) -> dict[str, Any]:
    """Bill every method on the plan's transcripts, on the field sessions that have hand probes (when
    the plan says so), and on one generated session of `generated_tokens` (0: none), and score every
    method's view at each point where worksurface compacted (hand probes where the session has them)."""
    field = plan.labeled_field
    config = Config()
    prices = prices or price_model(config.pricing)
    rows: list[dict[str, Any]] = []
    points: list[dict[str, Any]] = []
    series: dict[str, dict[str, list[float]]] = {}
    labeled, label_notes = replay.labeled_sources()
    notes = list(plan.notes) + (label_notes if field else [])
    with tempfile.TemporaryDirectory(prefix="worksurface-cost-") as tmp:
        sources = list(plan.sources)
        if field:
            known = {s.path.resolve() for s in sources}
            sources += [replay.Source(_field_name(path), path) for path in labeled
                        if path not in known and "field" in path.parts]
        if generated_tokens:
            generated = Path(tmp) / f"generated-{generated_tokens // 1000}k.jsonl"
            write_session(generated, generated_tokens, seed=GENERATED_SEED)
            sources.append(replay.Source(f"generated {generated_tokens // 1000}k (seed {GENERATED_SEED})", generated))
        for source in sources:
            try:
                transcript = replay.load(source)
            except WorksurfaceError as exc:
                notes.append(f"{source.name}: skipped, {exc}")
                continue
            probe_file = labeled.get(source.path.resolve())
            probes = ProbeSet.load(probe_file) if probe_file else derive(
                transcript.messages, source.path.name, transcript.queued_inputs)
            kind = "hand" if probe_file else "derived"
            sized = SizeFlags().config(transcript, config)
            per_method, scored = price_methods(transcript, sized, prices, list(probes))
            series[source.name] = {name: r["costs"] for name, r in per_method.items()}
            points += [{"transcript": source.name, "probes": kind, **p} for p in scored]
            base = per_method[WORKSURFACE]["total"]
            for name, r in per_method.items():
                kept = [p["methods"][name] for p in scored]
                rows.append({"transcript": source.name, "method": name, "calls": len(r["costs"]),
                             "cost_usd": round(r["total"], 4),
                             "token_equivalents_m": round(r["total"] / prices.input, 3),
                             "cached_share": r["cached_share"], "max_view_tokens": r["max_view"],
                             "mean_view_tokens": r["mean_view"], "read_usd": round(r["read_usd"], 4),
                             "write_usd": round(r["write_usd"], 4), "big_rewrites": r["big_rewrites"],
                             "within_window": r["max_view"] <= sized.window,
                             "compactions": r.get("compactions"), "probes": kind,
                             "retention_mean": round(sum(kept) / len(kept), 4) if kept else None,
                             "retention_min": round(min(kept), 4) if kept else None,
                             "vs_worksurface": round(r["total"] / base - 1, 4) if base else None})
    plots = _plot(series, out_dir) if out_dir is not None else []
    return {"prices": prices.to_json(), "rows": rows, "points": points, "plots": plots,
            "notes": list(dict.fromkeys(notes)), "window": config.window, "threshold": config.threshold}


def _field_name(path: Path) -> str:
    """A short table name for a field session: its owner and the hash prefix of its file."""
    rel = path.relative_to(replay.SHARED / "transcripts" / "field")
    owner = rel.parts[0]
    return f"field {owner} {rel.stem[:8]}" if len(rel.parts) == 2 else f"field {owner} {''.join(rel.parts[1:3])[:8]}"


def price_methods(transcript: Transcript, config: Config, prices: PriceModel,
                  probes: Sequence[Probe] = ()) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Bill worksurface and every baseline on the same replay (worksurface as `worksurface replay` runs
    it: anchored on the recorded usage), and at each call where worksurface compacted, score every
    method's view on the probes established by then. Per method: the per-call costs, total, cached
    share and largest view; per compaction point: where, why, worksurface's sizes, each method's
    retained share."""
    messages = transcript.messages
    counter = TokenCounter()
    position = {m.id: i for i, m in enumerate(messages)}
    views: list[list[Any]] = []
    compacted: dict[int, dict[str, Any]] = {}

    def keep(n: int, end: int, prepared: Any, overflow: bool) -> None:
        views.append(prepared.messages)
        boundary = prepared.report.boundary
        if boundary is not None:
            established = [p for p in probes if position.get(p.established_at or "", -1) < end]
            compacted[n] = {"call": n, "messages": end, "reason": boundary.get("reason"),
                            "summary_tokens": boundary.get("summary_tokens"), "sizes": prepared.report.sizes,
                            "established": established, "methods": {}}

    with Session.open(None, config=config) as session:
        result = offline_replay(messages, session, prices, use_usage=True, on_call=keep)
    calls = list(replay.calls(messages))
    out: dict[str, dict[str, Any]] = {}
    cache = PromptCache(prices, counter)
    billed = [cache.send(view, call.now) for view, call in zip(views, calls)]
    out[WORKSURFACE] = _summary(billed, max(b.tokens for b in billed), prices) | {
        "compactions": sum(c.compaction is not None for c in result.calls)}
    for n, point in compacted.items():
        point["methods"][WORKSURFACE] = _retained(views[n], point["established"])
    for harness in default_harnesses(config.threshold, config.post_compact_target, counter):
        cache = PromptCache(prices, counter)
        billed, max_view = [], 0
        for call in calls:
            view = harness.view(live_slice(messages[:call.size]))
            billed.append(cache.send(view, call.now))
            max_view = max(max_view, billed[-1].tokens)
            if call.index in compacted:
                compacted[call.index]["methods"][harness.name] = _retained(view, compacted[call.index]["established"])
        out[harness.name] = _summary(billed, max_view, prices) | {"compactions": getattr(harness, "summaries", None)}
    points = []
    for point in compacted.values():
        established = point.pop("established")
        points.append({**point, "established": len(established)})
    return out, points


def _retained(view: Sequence[Any], established: Sequence[Probe]) -> float:
    """The share of the established probes a view still shows (1.0 when none was established yet)."""
    return score(list(view), list(established)).fraction if established else 1.0


def _summary(billed: list[BilledCall], max_view: int, prices: PriceModel) -> dict[str, Any]:
    """Totals of one method's bill, split into what reading the cached prefix and writing the rest
    cost (where the money goes: a large view read on every call, or rewrites of an edited prefix)."""
    totals = summarize_bill(billed)
    return {"costs": [b.cost for b in billed], "total": billed[-1].total if billed else 0.0,
            "cached_share": totals["cached_share"],
            "max_view": max_view, "mean_view": round(totals["tokens"] / len(billed)) if billed else 0,
            "read_usd": totals["cached"] * prices.cache_read / PER_MILLION,
            "write_usd": totals["written"] * prices.cache_write / PER_MILLION,
            "big_rewrites": sum(1 for b in billed if b.written > BIG_REWRITE_TOKENS)}


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _plot(series: dict[str, dict[str, list[float]]], out_dir: Path) -> list[str]:
    """One PNG per transcript: cost per call (left) and cumulative cost (right), one line per method."""
    from worksurface.core.lazy import require_extra
    require_extra("bench", "the cost plots", "matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for transcript, methods in series.items():
        fig, (per_call, cumulative) = plt.subplots(1, 2, figsize=(13, 4.5))
        for name, costs in methods.items():
            width = 2.2 if name == WORKSURFACE else 1.0
            running, acc = [], 0.0
            for c in costs:
                acc += c
                running.append(acc)
            per_call.plot(range(len(costs)), costs, label=name, linewidth=width)
            cumulative.plot(range(len(costs)), running, label=name, linewidth=width)
        per_call.set(title=f"{transcript}: cost per call", xlabel="call", ylabel="USD")
        cumulative.set(title=f"{transcript}: cumulative cost", xlabel="call", ylabel="USD")
        cumulative.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        path = out_dir / f"cost-{_slug(transcript)}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path.name)
    return written


def render(result: dict[str, Any], caption: str) -> str:
    p = result["prices"]
    rows = [[r["transcript"], r["method"], r["calls"], r["cost_usd"], r["read_usd"], r["write_usd"],
             r["token_equivalents_m"], f"{r['cached_share']:.1%}", r["mean_view_tokens"], r["max_view_tokens"],
             r["big_rewrites"], "yes" if r["within_window"] else "no",
             "" if r["compactions"] is None else str(r["compactions"]), _share(r.get("retention_mean")),
             _share(r.get("retention_min")),
             "" if r["method"] == WORKSURFACE else f"{r['vs_worksurface']:+.1%}"] for r in result["rows"]]
    headers = ["transcript", "method", "calls", "billed USD", "reads USD", "writes USD", "M token-equivalents",
               "cached share", "mean view tokens", "max view tokens", f"writes > {BIG_REWRITE_TOKENS // 1000}k",
               "within window", "compactions", "retained (mean)", "retained (min)", "vs worksurface"]
    parts = ["## Billed cost per session", caption,
             f"Prices: `{p['name']}` preset, USD per million tokens: input {p['input']}, cache read "
             f"{p['cache_read']}, cache write {p['cache_write']}, TTL {p['cache_ttl_seconds']:.0f} s, minimum "
             f"{p['min_cache_tokens']} tokens. Each call reads the longest prefix still cached (TTL from the "
             "messages' own timestamps) and writes the rest. Token-equivalents = billed USD / input price; "
             "reads and writes split the bill (plain input below the cache minimum is neither). "
             "`vs worksurface` > 0: the baseline costs more. Same replay, call points and clock for every "
             "method; input tokens only (replays carry no output counts), billed on the counted views. "
             "worksurface is replayed as `worksurface replay` runs it: anchored on the usage each transcript "
             "records, so it compacts where the measured size says (the baselines use their own counted "
             "triggers). A saving bought by forgetting is not a saving: `retained` is the share of the probes "
             "established by then that each method's view still shows at every call where worksurface "
             "compacted (hand-labeled probes where the session has them, else derived ones; mean and worst "
             "point; empty when worksurface never compacted).",
             table(headers, rows)]
    if result.get("points"):
        methods = list(dict.fromkeys(m for point in result["points"] for m in point["methods"]))
        point_rows = [[q["transcript"], q["probes"], q["call"], q["messages"], q["reason"],
                       _size(q["sizes"], "before"), _size(q["sizes"], "after"), q["summary_tokens"], q["established"],
                       *(_share(q["methods"].get(m)) for m in methods)] for q in result["points"]]
        parts += ["Retention at each compaction point (sizes: counted / as the provider measures; the "
                  "compaction acted on the measured size when the transcript records usage):",
                  table(["transcript", "probes", "call", "messages", "reason", "view before", "view after",
                         "summary tokens", "probes established", *methods], point_rows)]
    parts += [f"![cost {name}]({name})" for name in result.get("plots", [])]
    parts += [f"- {n}" for n in result["notes"]]
    return "\n\n".join(parts)


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def _size(sizes: dict[str, Any] | None, part: str) -> str:
    figures = (sizes or {}).get(part) or {}
    return f"{figures.get('counted', 0):,} / {figures.get('measured', 0):,}"
