"""What one `prepare` returns and reports: the view, the token figures of every stage, and the notices
a harness must read (a breaker that opened, a compaction over its target, a summarizer that failed)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..core.config import Config
from ..core.model import Message
from ..core.sizes import MEASURED
from ..core.view import RECOVERY_PREFIX
from ..engine.state import Compacted, PipelineState, SkipKind, Skipped, StageContext, StageReport, measured_size
from worksurface.stages.autocompact import CompactionInputs

log = logging.getLogger("worksurface")

# The reason a stage the graph did not visit reports (it was under its trigger).
NOT_RUN = "under target"


@dataclass
class PrepareReport:
    """What one `prepare` did: token figures, one report per stage and reinjector, the boundary."""

    tokens_before: int
    view_tokens_before: int
    tokens_after: int
    stages: list[StageReport]
    reinjected: list[StageReport] = field(default_factory=list)
    boundary: dict[str, Any] | None = None
    status: dict[str, Any] | None = None
    ms: float = 0.0
    rewound: int = 0
    # Things the harness should know that are not errors: a breaker that opened, a stage skipped.
    notices: list[str] = field(default_factory=list)
    # What the provider bills for sending this view (USD, the session's price model and its prompt
    # cache: the prefix still cached is read, the rest written), and the session's running total.
    cost: float = 0.0
    cost_total: float = 0.0
    # The view's sizes before and after in both units (counted; measured: as the provider measures,
    # from the usage anchor or the calibration), the unit the stages acted on, and the calibration.
    sizes: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cost": round(self.cost, 6),
            "cost_total": round(self.cost_total, 6),
            "tokens_before": self.tokens_before,
            "view_tokens_before": self.view_tokens_before,
            "tokens_after": self.tokens_after,
            "stages": [{"name": s.name, "tokens_before": s.tokens_before, "tokens_after": s.tokens_after,
                        "items": s.items, "ms": round(s.ms, 3), "skipped": s.skipped} for s in self.stages],
            "reinjected": [r.to_json() for r in self.reinjected],
            "boundary": self.boundary,
            "status": self.status,
            "ms": round(self.ms, 3),
            "rewound": self.rewound,
            "notices": list(self.notices),
            "sizes": self.sizes,
        }


@dataclass
class Prepared:
    """The view to send, the report, and the cleared call ids for providers that delete server-side."""

    messages: list[Message]
    report: PrepareReport
    cache_edits: list[str]


def build_report(final: PipelineState, stage_names: Sequence[str], tokens_after: int, raw: int, before: int,
                 started: float, rewound: int) -> PrepareReport:
    """The report of a graph run: every stage in order (one that did not run is "under target"), the
    reinjectors after them, and the boundary of the compaction made (the report whose outcome is `Compacted`)."""
    by_name = {r.name: r for r in final["reports"]}
    reinjected = [r for r in final["reports"] if r.name not in stage_names]
    stages, running = [], before
    for name in stage_names:
        r = by_name.get(name) or StageReport(name, running, running, outcome=Skipped(SkipKind.NOT_RUN, NOT_RUN))
        running = r.tokens_after
        stages.append(r)
    compacted = next((r for r in final["reports"] if isinstance(r.outcome, Compacted)), None)
    boundary = compacted.details if compacted is not None else None
    return PrepareReport(raw, before, tokens_after, stages, reinjected, boundary,
                         ms=(time.perf_counter() - started) * 1000, rewound=rewound)


def overflowed(report: PrepareReport, size: int, config: Config) -> bool:
    """Over the threshold (at `size`, the measured size the stages judged by) after autocompact had
    its chance (not when its breaker is open: then the report says it stopped trying, and the
    harness decides; nor when automatic compaction is off: the harness chose to compact itself)."""
    return size > config.threshold and not breaker_open(report) and config.autocompact.enabled


def breaker_open(report: PrepareReport) -> bool:
    """Whether a stage stopped trying on this call after consecutive failures (autocompact's breaker)."""
    return any(s.skipped_as(SkipKind.BREAKER_OPEN) for s in report.stages)


def add_notices(report: PrepareReport, ctx: StageContext, config: Config, get_meta: Callable[..., Any],
                counted_before: int) -> None:
    """Say what the harness must know in the report and the log, not only in the JSON details
    (`get_meta`: the session store's, for the breaker's retry size; `counted_before`: the view's count
    before the stages)."""
    measured = measured_size(ctx, report.tokens_after, bool(report.boundary), counted_before)
    if breaker_open(report) and measured > config.threshold:
        retry = get_meta("breaker_retry_tokens", 0)
        failures = ctx.inputs.get(CompactionInputs, CompactionInputs()).consecutive_failures
        report.notices.append(f"autocompact is paused after {failures} failed compactions: the "
                              f"view is {measured} tokens, over the threshold of "
                              f"{config.threshold}; it retries once the view reaches {retry} tokens")
    target = config.post_compact_target
    size = (report.sizes or {}).get("after", {}).get(MEASURED, report.tokens_after)
    floor = (report.boundary or {}).get("text_floor")
    if floor:
        report.notices.append(f"{floor['why']}: the compaction kept the floor, and the compacted view measures "
                              f"{size} tokens, {max(0, size - target)} over the target")
    elif report.boundary and size > target:
        over = size - target
        report.notices.append(f"the compacted view is {over} tokens over the post-compact target of {target}: "
                              "what must stay (the system prompt and tools the harness sends, the newest "
                              "user message, the last turn) is larger than the target")
    missed = ((report.boundary or {}).get("pins") or {}).get("missed")
    if missed:
        report.notices.append(f"{len(missed)} pinned snippet(s) could not be kept verbatim (over "
                              f"autocompact.pin_tokens): " + "; ".join(repr(m[:80]) for m in missed))
    fallback = (report.boundary or {}).get("fallback")
    if fallback:
        report.notices.append(f"summarizer {fallback['from']} failed ({fallback['error']}); "
                              "the structured summary was used instead")
    for notice in report.notices:
        if not notice.startswith(RECOVERY_PREFIX):
            log.warning("%s", notice)
