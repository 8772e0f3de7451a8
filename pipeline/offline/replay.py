"""Replay a saved transcript as a harness would run it: one `prepare` per model call.

A model call happens where an assistant turn starts; the harness prepares the transcript up to
(not including) that turn. Each call reports the view's size, how much of it a provider's prompt
cache would serve (the longest common prefix with the previous view, in tokens), the stages that
fired, the status bytes published and the time taken.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from ..core import progress
from ..core.calibration import measurements
from ..core.errors import ContextOverflowError
from ..core.model import Message, message_time
from ..core.sizes import MEASURED, call_usage, measured_usage
from ..engine.pricing import PriceModel, PromptCache, price_model
from ..core.tokens import TokenCounter
from ..core.view import live_slice

if TYPE_CHECKING:
    from ..core.config import Config
    from ..engine.state import StageReport

# A call whose message has no timestamp comes this long after the previous one: well under the
# 5-minute cache TTL, so a missing timestamp never fakes an idle gap.
DEFAULT_GAP_SECONDS = 1.0


class Harness(Protocol):
    """A baseline's view of the live transcript before one model call."""

    name: str

    def view(self, live: Sequence[Message]) -> list[Message]: ...


class PreparedReport(Protocol):
    """The parts of a `PrepareReport` a replay records."""

    @property
    def tokens_before(self) -> int: ...
    @property
    def tokens_after(self) -> int: ...
    @property
    def stages(self) -> Sequence[StageReport]: ...
    @property
    def status(self) -> dict[str, Any] | None: ...
    @property
    def boundary(self) -> dict[str, Any] | None: ...
    @property
    def sizes(self) -> dict[str, Any] | None: ...


class PreparedView(Protocol):
    """The parts of a `Prepared` a replay records: the view and its report."""

    @property
    def messages(self) -> list[Message]: ...
    @property
    def report(self) -> PreparedReport: ...


class Preparer(Protocol):
    """What a replay drives: a `Session` fits. A Protocol rather than the class itself, so this module
    (which the probes and the status replay import) stays below the session, which pulls in LangGraph."""

    @property
    def config(self) -> Config: ...
    @property
    def counter(self) -> TokenCounter: ...
    def prepare(self, transcript: Sequence[Message], usage: int | tuple[str, int] | None = None,
                now: float | None = None) -> PreparedView: ...


def call_points(messages: Sequence[Message]) -> list[int]:
    """Prefix lengths at which a harness calls the model: before each assistant turn (the later
    records of one turn are not separate calls), and at the end."""
    points = [i for i in range(1, len(messages))
              if messages[i].role == "assistant" and messages[i - 1].role != "assistant"]
    return points + [len(messages)] if messages else points


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
    # The provider's bill for this call (worksurface.engine.pricing: cache TTL and minimum applied), USD.
    cost: float = 0.0
    total: float = 0.0
    # The same call's cost for each baseline harness, by name, when the replay priced them.
    baselines: dict[str, float] = field(default_factory=dict)
    # view_tokens as the provider measures them (anchored on the usage the transcript records, or its
    # calibration after a compaction: worksurface.core.sizes); = view_tokens when the replay counts text only.
    measured_tokens: int = 0
    # The compaction this call made: its reason and size before (the unit the stages acted on), the
    # summary's tokens; None on a call that did not compact.
    compaction: dict[str, Any] | None = None
    # The view stayed over the threshold after autocompact had its chance (the replay goes on).
    overflow: bool = False


@dataclass
class ReplayResult:
    calls: list[CallRecord]
    prices: PriceModel | None = None
    # Running totals per baseline (USD) and each baseline's largest view (tokens).
    baseline_totals: dict[str, float] = field(default_factory=dict)
    baseline_max_view: dict[str, int] = field(default_factory=dict)
    # The unit the stages acted on: "measured" (anchored on the recorded usage) or "counted".
    unit: str = "counted"
    # Recorded measurements refused as implausible (not the whole request), when there are any.
    notices: list[str] = field(default_factory=list)

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
            "compactions": sum(c.compaction is not None for c in self.calls),
            "unit": self.unit, "notices": list(self.notices), "cost": self.cost_summary()}}

    def cost_summary(self) -> dict[str, Any]:
        """Billed cost (USD) of worksurface and of each baseline over the whole replay."""
        if self.prices is None:
            return {}
        worksurface = self.calls[-1].total if self.calls else 0.0
        return {"prices": self.prices.to_json(), "worksurface": round(worksurface, 6),
                "baselines": {name: {"cost": round(total, 6), "max_view_tokens": self.baseline_max_view.get(name, 0)}
                              for name, total in self.baseline_totals.items()}}


# Called after each replayed call: (call number, messages sent, the prepared view, overflowed).
OnCall = Callable[[int, int, PreparedView, bool], None]


def replay(messages: Sequence[Message], session: Preparer, prices: PriceModel | None = None,
           harnesses: Sequence[Harness] = (), *, use_usage: bool = True, on_call: OnCall | None = None,
           source: str | None = None, sent: Callable[[int], Any] | None = None) -> ReplayResult:
    """One `prepare` per call point. Each call is billed at `prices` (default: the session config's
    pricing); each of `harnesses` (see `worksurface.probes.harnesses`) is billed on the same calls and clock.
    With `use_usage` each call is anchored on the usage the transcript records (`sizes.call_usage`),
    so compactions fire where the measured size crosses the threshold. A call whose view stays over
    the threshold is recorded (`overflow`) and the replay goes on; `on_call` sees every call. `source`
    names the file in the notices about refused measurements; `sent(end)` is what the harness sends at
    the call after `end` messages (default: those messages; a probe curve adds the input queued by then)."""
    prices = prices or price_model(session.config.pricing)
    counter = session.counter
    cache = PromptCache(prices, counter)
    others = {h.name: PromptCache(prices, counter) for h in harnesses}
    max_view = {h.name: 0 for h in harnesses}
    found = measurements(messages, counter) if use_usage else []
    previous: list[Message] = []
    clock = 0.0
    records = []
    unit = "counted"
    points = call_points(messages)
    progress.phase("replaying model calls", len(points))
    for n, end in enumerate(points):
        clock = replay_clock(messages[end - 1], clock)
        started = time.perf_counter()
        usage = call_usage(messages[:end], previous, counter, measured_usage(messages[:end], counter, found)) \
            if use_usage else None
        overflow = False
        try:
            prepared: PreparedView = session.prepare(sent(end) if sent else messages[:end], usage=usage, now=clock)
        except ContextOverflowError as exc:
            if exc.prepared is None:
                raise
            prepared, overflow = exc.prepared, True
        ms = (time.perf_counter() - started) * 1000
        view = prepared.messages
        report = prepared.report
        fired = [s.name for s in report.stages if s.items and not s.skipped]
        status = report.status or {}
        billed = cache.send(view, clock)
        sizes = report.sizes or {}
        unit = sizes.get("unit", unit)
        record = CallRecord(n, end, report.tokens_after, cached_prefix_tokens(previous, view, counter), fired,
                            int(status.get("bytes", 0) or 0), round(ms, 3), round(billed.cost, 6),
                            round(billed.total, 6), overflow=overflow)
        record.measured_tokens = int(sizes.get("after", {}).get(MEASURED, report.tokens_after))
        if report.boundary is not None:
            b = report.boundary
            record.compaction = {"reason": b.get("reason"), "pre_tokens": b.get("pre_tokens"),
                                 "summary_tokens": b.get("summary_tokens"), "epoch": b.get("epoch"),
                                 "text_floor": b.get("text_floor") is not None}
        if harnesses:
            live = live_slice(messages[:end])
            for h in harnesses:
                other_view = h.view(live)
                max_view[h.name] = max(max_view[h.name], counter.messages(other_view))
                record.baselines[h.name] = round(others[h.name].send(other_view, clock).cost, 6)
        records.append(record)
        if on_call is not None:
            on_call(n, end, prepared, overflow)
        previous = view
        progress.advance(n + 1)
    notices = measured_usage(messages, counter, found).notices(source) if use_usage else []
    return ReplayResult(records, prices, {name: c.total for name, c in others.items()}, max_view, unit, notices)
