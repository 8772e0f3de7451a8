"""Replay a saved transcript as a harness would run it: one `prepare` per model call.

A model call happens where an assistant turn starts; the harness prepares the transcript up to
(not including) that turn. Each call reports the view's size, how much of it a provider's prompt
cache would serve (the longest common prefix with the previous view, in tokens), the stages that
fired, the status bytes published and the time taken.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import datetime
from statistics import median
from typing import TYPE_CHECKING, Any, Sequence

from .model import Message
from .tokens import TokenCounter

if TYPE_CHECKING:  # the session pulls in LangGraph; the probes import this module without it
    from .session import Session

# A call whose message has no timestamp comes this long after the previous one: well under the
# 5-minute cache TTL, so a missing timestamp never fakes an idle gap.
DEFAULT_GAP_SECONDS = 1.0


def call_points(messages: Sequence[Message]) -> list[int]:
    """Prefix lengths at which a harness calls the model: before each assistant turn (the later
    records of one turn are not separate calls), and at the end."""
    points = [i for i in range(1, len(messages))
              if messages[i].role == "assistant" and messages[i - 1].role != "assistant"]
    return points + [len(messages)] if messages else points


def message_time(message: Message) -> float | None:
    """The message's own timestamp (Claude Code records one), as epoch seconds."""
    stamp = message.meta.get("timestamp")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def replay_clock(message: Message, previous: float) -> float:
    """A replayed call's time: the message's own timestamp (so idle gaps, and cold-cache triggers,
    are the real ones), else `DEFAULT_GAP_SECONDS` after the previous call; never earlier than
    `previous` and never the wall clock, so a replay is deterministic."""
    t = message_time(message)
    return t if t is not None and t >= previous else previous + DEFAULT_GAP_SECONDS


def cached_prefix_tokens(previous: Sequence[Message], current: Sequence[Message], counter: TokenCounter) -> int:
    """Tokens of the longest common message prefix: what a provider's cache would serve."""
    n = 0
    for a, b in zip(previous, current):
        if a != b:
            break
        n += counter.message(b)
    return n


@dataclass
class CallRecord:
    call: int
    messages: int
    view_tokens: int
    cached_tokens: int
    fired: list[str]
    status_bytes: int
    ms: float


@dataclass
class ReplayResult:
    calls: list[CallRecord]

    @property
    def cache_share(self) -> float:
        """Share of view tokens (over all calls after the first) served from the previous prefix."""
        total = sum(c.view_tokens for c in self.calls[1:])
        return sum(c.cached_tokens for c in self.calls[1:]) / total if total else 1.0

    def to_json(self) -> dict[str, Any]:
        ms = [c.ms for c in self.calls]
        return {"calls": [asdict(c) for c in self.calls], "summary": {
            "calls": len(self.calls), "cache_share": round(self.cache_share, 4),
            "median_ms": round(median(ms), 3) if ms else 0.0,
            "status_bytes": sum(c.status_bytes for c in self.calls),
            "compactions": sum("autocompact" in c.fired for c in self.calls)}}


def replay(messages: Sequence[Message], session: "Session") -> ReplayResult:
    previous: list[Message] = []
    clock = 0.0
    records = []
    for n, end in enumerate(call_points(messages)):
        clock = replay_clock(messages[end - 1], clock)
        started = time.perf_counter()
        prepared = session.prepare(messages[:end], now=clock)
        ms = (time.perf_counter() - started) * 1000
        view = prepared.messages
        fired = [s.name for s in prepared.report.stages if s.items and not s.skipped]
        status = prepared.report.status or {}
        records.append(CallRecord(n, end, prepared.report.tokens_after,
                                  cached_prefix_tokens(previous, view, session.counter), fired,
                                  int(status.get("bytes", 0) or 0), round(ms, 3)))
        previous = view
    return ReplayResult(records)
