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
    """Bill every method on the plan's transcripts and on one generated session of
    `generated_tokens` (0: none)."""
    config = Config()
    prices = prices or price_model(config.pricing)
    rows: list[dict[str, Any]] = []
    series: dict[str, dict[str, list[float]]] = {}
    notes = list(plan.notes)
    with tempfile.TemporaryDirectory(prefix="worksurface-cost-") as tmp:
        sources = list(plan.sources)
        if generated_tokens:
            generated = Path(tmp) / f"generated-{generated_tokens // 1000}k.jsonl"
            write_session(generated, generated_tokens, seed=GENERATED_SEED)
            sources.append(replay.Source(f"generated {generated_tokens // 1000}k (seed {GENERATED_SEED})", generated))
        for source in sources:
            messages = replay.load(source).messages
            per_method = price_methods(messages, config, prices)
            series[source.name] = {name: r["costs"] for name, r in per_method.items()}
            base = per_method[WORKSURFACE]["total"]
            for name, r in per_method.items():
                rows.append({"transcript": source.name, "method": name, "calls": len(r["costs"]),
                             "cost_usd": round(r["total"], 4),
                             "token_equivalents_m": round(r["total"] / prices.input, 3),
                             "cached_share": r["cached_share"], "max_view_tokens": r["max_view"],
                             "mean_view_tokens": r["mean_view"], "read_usd": round(r["read_usd"], 4),
                             "write_usd": round(r["write_usd"], 4), "big_rewrites": r["big_rewrites"],
                             "within_window": r["max_view"] <= config.window,
                             "compactions": r.get("compactions"),
                             "vs_worksurface": round(r["total"] / base - 1, 4) if base else None})
    plots = _plot(series, out_dir) if out_dir is not None else []
    return {"prices": prices.to_json(), "rows": rows, "plots": plots, "notes": notes,
            "window": config.window, "threshold": config.threshold}


def price_methods(messages: Sequence[Any], config: Config, prices: PriceModel) -> dict[str, dict[str, Any]]:
    """Bill worksurface and every baseline on the same replay: per method the per-call costs, total,
    cached share and largest view."""
    counter = TokenCounter()
    calls = list(replay.calls(messages))
    out: dict[str, dict[str, Any]] = {}
    cache = PromptCache(prices, counter)
    compactions = 0
    with Session.open(None, config=config) as session:
        billed = []
        max_view = 0
        for call in calls:
            prepared = session.prepare(messages[:call.size], now=call.now)
            compactions += prepared.report.boundary is not None
            billed.append(cache.send(prepared.messages, call.now))
            max_view = max(max_view, billed[-1].tokens)
    out[WORKSURFACE] = _summary(billed, max_view, prices) | {"compactions": compactions}
    for harness in default_harnesses(config.threshold, config.post_compact_target, counter):
        cache = PromptCache(prices, counter)
        billed, max_view = [], 0
        for call in calls:
            view = harness.view(live_slice(messages[:call.size]))
            billed.append(cache.send(view, call.now))
            max_view = max(max_view, billed[-1].tokens)
        out[harness.name] = _summary(billed, max_view, prices) | {"compactions": getattr(harness, "summaries", None)}
    return out


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
             "" if r["compactions"] is None else str(r["compactions"]),
             "" if r["method"] == WORKSURFACE else f"{r['vs_worksurface']:+.1%}"] for r in result["rows"]]
    headers = ["transcript", "method", "calls", "billed USD", "reads USD", "writes USD", "M token-equivalents",
               "cached share", "mean view tokens", "max view tokens", f"writes > {BIG_REWRITE_TOKENS // 1000}k",
               "within window", "compactions", "vs worksurface"]
    parts = ["## Billed cost per session", caption,
             f"Prices: `{p['name']}` preset, USD per million tokens: input {p['input']}, cache read "
             f"{p['cache_read']}, cache write {p['cache_write']}, TTL {p['cache_ttl_seconds']:.0f} s, minimum "
             f"{p['min_cache_tokens']} tokens. Each call reads the longest prefix still cached (TTL from the "
             "messages' own timestamps) and writes the rest. Token-equivalents = billed USD / input price; "
             "reads and writes split the bill (plain input below the cache minimum is neither). "
             "`vs worksurface` > 0: the baseline costs more. Same replay, call points and clock for every "
             "method; input tokens only (replays carry no output counts).",
             table(headers, rows)]
    parts += [f"![cost {name}]({name})" for name in result.get("plots", [])]
    parts += [f"- {n}" for n in result["notes"]]
    return "\n\n".join(parts)
