"""Status: a fresh full status baseline after a compaction, starting a new epoch.

The session's status publisher owns the bar; this reinjector asks it for the new epoch's baseline so
that the bar's cost is counted first in the post-compact budget. The graph places the message last
(boundary, summary, tail, attachments, status), where later deltas will follow it.
"""

from __future__ import annotations

from worksurface.core.config import ReinjectConfig
from worksurface.core.model import Message
from worksurface.engine.reinject import report
from worksurface.engine.state import Reinjection, Reinjector, StageContext, StatusInputs, StatusUpdate, view_offset
from worksurface.status import PublisherState, publish

NAME = "status"


def run(view: list[Message], config: ReinjectConfig, ctx: StageContext, budget: int) -> Reinjection:
    before = ctx.counter.messages(view)
    status = ctx.inputs.get(StatusInputs)
    if status is None:
        return Reinjection([], report(NAME, before, 0, [], [], [], "status bar not available in this session"))
    # The baseline reports the compacted view's size, not the usage measured before the compaction.
    tokens = before + view_offset(ctx, before, compacted=True)
    snapshot, state = status.resized(tokens), status.publisher
    new_state, publication = publish(state, snapshot, strategy=state.strategy, now=ctx.now, new_epoch=True)
    cost = ctx.counter.messages(publication.messages)
    if cost > min(budget, config.status_tokens):
        # Keep the epoch change (old status messages go) but publish the baseline on the next call.
        deferred = StatusUpdate(PublisherState(state.strategy, new_state.epoch, state.seq, None, ()),
                                tuple(publication.remove_ids), tokens)
        return Reinjection([], report(NAME, before, 0, [], [], ["baseline"], "baseline over the status budget"),
                           deferred)
    restored = [f"baseline epoch {new_state.epoch}"] if publication.messages else []
    return Reinjection(list(publication.messages), report(NAME, before, cost, restored, [], [], "empty status"),
                       StatusUpdate(new_state, tuple(publication.remove_ids), tokens))


# The baseline reports the rebuilt view's size: it reserves its share first and runs last.
REINJECTOR = Reinjector(NAME, run, needs=(StatusInputs,), reserve=lambda config: config.status_tokens,
                        reads=frozenset({"counter", "now", "token_offset", "calibration", "anchor_counted", "inputs"}))
