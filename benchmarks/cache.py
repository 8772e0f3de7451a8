"""Section 4: prompt-cache stability over a replay.

For every call after the first, the share of the view's tokens that equal the previous call's view
prefix (what a provider's prompt cache would serve). Compared: worksurface with each status strategy,
a sliding window that trims to the post-compact target on every call, a harness that summarizes only
when over the threshold, and the unmanaged transcript (append-only, for reference: it outgrows the
window, which is why harnesses manage it).
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from worksurface import Config, Session
from worksurface.core.model import Message, Origin
from worksurface.engine.pricing import common_prefix_tokens
from worksurface.core.tokens import TokenCounter
from worksurface.core.view import live_slice

from . import replay
from .harnesses import SummarizeAtThreshold, sliding_window
from .plan import Plan
from .report import table

NAME = "cache"
STRATEGIES = ("append", "replace", "delta")


def run(plan: Plan) -> dict[str, Any]:
    config = Config()
    rows = []
    for source in plan.sources:
        messages = replay.load(source).messages
        calls = list(replay.calls(messages))
        for name, views in _methods(messages, calls, config):
            rows.append({"transcript": source.name, "method": name, **_stability(views)})
    same = _strategies_identical(rows)
    notes = list(plan.notes)
    if same:
        notes.append("The three status strategies gave identical shares on every transcript.")
    return {"rows": rows, "post_compact_target": config.post_compact_target, "threshold": config.threshold,
            "status_strategies_identical": same, "notes": notes}


def _methods(messages: Sequence[Message], calls: list[replay.Call],
             config: Config) -> Iterator[tuple[str, Iterator[tuple[list[Message], dict]]]]:
    for strategy in STRATEGIES:
        yield f"worksurface ({strategy})", _worksurface_views(messages, calls, strategy)
    counter = TokenCounter()

    def window(live: list[Message]) -> list[Message]:
        return sliding_window(live, config.post_compact_target, counter)
    yield f"sliding window (last {config.post_compact_target:,} tokens)", _harness_views(messages, calls, window)
    naive = SummarizeAtThreshold(config.threshold, counter)
    yield "summarize at threshold", _summarizing_views(messages, calls, naive)
    yield "unmanaged transcript (reference)", _harness_views(messages, calls, lambda live: live)


def _worksurface_views(messages, calls, strategy: str):
    with Session.open(None, status_strategy=strategy) as session:
        for call in calls:
            prepared = session.prepare(messages[:call.size], now=call.now)
            yield prepared.messages, {"compacted": prepared.report.boundary is not None}


def _harness_views(messages, calls, make_view):
    for call in calls:
        yield make_view(live_slice(messages[:call.size])), {}


def _summarizing_views(messages, calls, harness: SummarizeAtThreshold):
    for call in calls:
        before = harness.summaries
        view = harness.view(live_slice(messages[:call.size]))
        yield view, {"compacted": harness.summaries > before}


def _stability(views: Iterator[tuple[list[Message], dict]]) -> dict[str, Any]:
    """Token-weighted cached share over calls 2..n, how often the previous view was not kept whole as a
    prefix (a cache break), tokens sent, tokens outside the cached prefix, and compactions."""
    counter = TokenCounter()
    previous: list[Message] | None = None
    previous_tokens = 0
    sent = cached = breaks = compactions = calls = status_messages = 0
    for view, info in views:
        calls += 1
        tokens = counter.messages(view)
        compactions += int(info.get("compacted", False))
        status_messages = sum(1 for m in view if m.origin is Origin.STATUS)
        if previous is not None:
            common = common_prefix_tokens(previous, view, counter)
            sent += tokens
            cached += common
            breaks += int(common < previous_tokens)
        previous, previous_tokens = view, tokens
    return {"calls": calls, "cached_share": round(cached / sent, 4) if sent else float("nan"),
            "breaks": breaks, "tokens_sent": sent, "uncached_tokens": sent - cached,
            "mean_view_tokens": round(sent / max(1, calls - 1)), "compactions": compactions,
            "final_status_messages": status_messages}


def _strategies_identical(rows: list[dict[str, Any]]) -> bool:
    by_source: dict[str, set] = {}
    for r in rows:
        if r["method"].startswith("worksurface ("):
            by_source.setdefault(r["transcript"], set()).add((r["cached_share"], r["tokens_sent"]))
    return all(len(v) == 1 for v in by_source.values())


def render(result: dict[str, Any], caption: str) -> str:
    rows = [[r["transcript"], r["method"], f"{r['cached_share']:.1%}" if r["cached_share"] == r["cached_share"]
             else "n/a", r["breaks"], r["calls"], r["mean_view_tokens"], round(r["uncached_tokens"] / 1000),
             r["compactions"] or "", r["final_status_messages"] or ""] for r in result["rows"]]
    headers = ["transcript", "method", "cached share", "cache breaks", "calls", "mean view tokens",
               "uncached k-tokens", "compactions", "status msgs at end"]
    parts = ["## Prompt-cache stability", caption,
             "Cached share = sum over calls 2..n of the longest common prefix (in tokens, messages compared "
             "by content) of consecutive views, divided by the tokens sent on those calls. A cache break is a "
             "call whose view does not start with the whole previous view. Uncached tokens are those a "
             "provider would bill at the full input price. One deterministic replay per method (no timing).",
             table(headers, rows)]
    parts += [f"- {n}" for n in result["notes"]]
    return "\n\n".join(parts)
