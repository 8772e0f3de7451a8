"""Status: a fresh full status baseline after a compaction, starting a new epoch.

The session's status publisher owns the bar; this reinjector asks it for the new epoch's baseline so
that the bar's cost is counted first in the post-compact budget. The graph places the message last
(boundary, summary, tail, attachments, status), where later deltas will follow it.
"""

from __future__ import annotations

from worksurface.config import ReinjectConfig
from worksurface.model import Message
from worksurface.reinject import report
from worksurface.state import StageContext, StageReport
from worksurface.status import PublisherState, publish

NAME = "status"


def run(view: list[Message], config: ReinjectConfig, ctx: StageContext, budget: int) -> tuple[list[Message], StageReport]:
    before = ctx.counter.messages(view)
    snapshot = ctx.extras.get("status_snapshot")
    state: PublisherState | None = ctx.extras.get("status_state")
    if snapshot is None or state is None:
        return [], report(NAME, before, 0, [], [], [], "status bar not available in this session")
    new_state, publication = publish(state, snapshot, strategy=state.strategy, now=ctx.now, new_epoch=True)
    cost = ctx.counter.messages(publication.messages)
    if cost > min(budget, config.status_tokens):
        # Keep the epoch change (old status messages go) but publish the baseline on the next call.
        ctx.extras["status_result"] = (PublisherState(state.strategy, new_state.epoch, state.seq, None, ()),
                                       publication.remove_ids)
        return [], report(NAME, before, 0, [], [], ["baseline"], "baseline over the status budget")
    ctx.extras["status_result"] = (new_state, publication.remove_ids)
    restored = [f"baseline epoch {new_state.epoch}"] if publication.messages else []
    return list(publication.messages), report(NAME, before, cost, restored, [], [], "empty status")
