"""Replay a saved transcript through the status publisher, as a harness would have run it.

Before every model call (each assistant turn) the status is reduced from the events of the
messages so far and published; a compaction in the transcript starts a new epoch. The result
says what each strategy would have cost and what would be in view at the end.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..core.model import Message, Origin
from ..core.model import message_time
from .derive import EventDeriver
from .publish import PublisherState, publish
from .reducer import StatusReducer
from .snapshot import Snapshot


@dataclass
class Replay:
    snapshot: Snapshot
    state: PublisherState
    kinds: dict[str, int] = field(default_factory=dict)  # publications by kind
    bytes_published: int = 0
    visible_bytes: int = 0  # status bytes still in the view at the end
    now: float = 0.0  # the clock at the last publication point

    @property
    def publications(self) -> int:
        return sum(self.kinds.values())

    def to_json(self) -> dict[str, Any]:
        return {"strategy": self.state.strategy, "publications": self.publications, "kinds": self.kinds,
                "epochs": self.state.epoch, "bytes_published": self.bytes_published,
                "visible_messages": len(self.state.published_ids), "visible_bytes": self.visible_bytes}


def _is_compaction(message: Message) -> bool:
    return message.origin is Origin.BOUNDARY or bool(message.meta.get("compact_boundary"))


def epoch_after(message: Message, epoch: int) -> int:
    """The status epoch once `message` is read: a worksurface boundary names its epoch (meta
    `epoch`); any other compaction (Claude Code's compact_boundary) starts the next one."""
    if not _is_compaction(message):
        return epoch
    named = message.meta.get("epoch") if message.origin is Origin.BOUNDARY else None
    return named if isinstance(named, int) and not isinstance(named, bool) and named > epoch else epoch + 1


def transcript_epoch(messages: Sequence[Message]) -> int:
    """The epoch the transcript's compact boundaries reached (1 when it holds none)."""
    epoch = 1
    for m in messages:
        epoch = epoch_after(m, epoch)
    return epoch


def replay(messages: Sequence[Message], *, strategy: str, window: int | None = None) -> Replay:
    """Publish before each assistant turn and once after the last message; deterministic (the
    clock is the messages' own timestamps)."""
    reducer, deriver = StatusReducer(), EventDeriver(window)
    state = PublisherState(strategy=strategy)
    out = Replay(reducer.snapshot(), state)
    sizes: dict[str, int] = {}
    new_epoch, epoch, now = False, 1, 0.0

    def point() -> None:
        nonlocal state, new_epoch
        if new_epoch:
            # publish() starts epoch + 1: land on the epoch the boundaries named.
            state = dataclasses.replace(state, epoch=epoch - 1)
        state, pub = publish(state, reducer.snapshot(), strategy=strategy, now=now, new_epoch=new_epoch)
        new_epoch = False
        for m in pub.messages:
            out.kinds[m.meta["kind"]] = out.kinds.get(m.meta["kind"], 0) + 1
            sizes[m.id] = len(m.text.encode("utf-8"))
        out.bytes_published += pub.bytes

    previous: Message | None = None
    for m in messages:
        if m.role == "assistant" and (previous is None or previous.role != "assistant"):
            point()
        if _is_compaction(m):
            new_epoch, epoch = True, epoch_after(m, epoch)
        now = message_time(m) or now
        for event in deriver.derive(m):
            reducer.apply(event)
        previous = m
    point()
    out.snapshot, out.state, out.now = reducer.snapshot(), state, now
    out.visible_bytes = sum(sizes[i] for i in state.published_ids)
    return out
