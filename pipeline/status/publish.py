"""Publish the status into the view: `append`, `replace` or `delta` (baseline + deltas, default).

Publications go at the tail of the view. `append` and `delta` never touch an earlier status
message, so the view's prefix stays byte-stable for the provider's prompt cache; `replace` keeps
only the newest one. An unchanged status publishes nothing; a status that became empty publishes
an explicit cleared marker; a compaction starts a new epoch with a full baseline. Pure: the clock
comes in as `now`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..core.errors import ConfigError
from ..core.model import Message, Origin, Text
from .diff import diff
from .events import StatusError
from .render import render, render_cleared, render_delta
from .snapshot import Snapshot

STRATEGIES = ("append", "replace", "delta")
DEFAULT_STRATEGY = "delta"
# Kinds of status message (meta["kind"]): the first full status of an epoch, a later full one
# (append, replace), a change set (delta), and the marker for a status that became empty.
KINDS = ("baseline", "full", "delta", "cleared")


@dataclass(frozen=True)
class PublisherState:
    """What has been published: `seq` of the latest status message (0: none yet), the snapshot the
    model currently has in view (None: nothing published this epoch), and the ids of this epoch's
    status messages that are still in the view."""

    strategy: str = DEFAULT_STRATEGY
    epoch: int = 1
    seq: int = 0
    last: Snapshot | None = None
    published_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "epoch": self.epoch, "seq": self.seq,
                "last": self.last.to_json() if self.last is not None else None,
                "published_ids": list(self.published_ids)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "PublisherState":
        try:
            strategy, epoch, seq = data["strategy"], data["epoch"], data["seq"]
            ids = tuple(data["published_ids"])
            last = Snapshot.from_json(data["last"]) if data.get("last") is not None else None
        except (KeyError, TypeError) as exc:
            raise StatusError(f"publisher state record: malformed ({exc!r})") from None
        if strategy not in STRATEGIES or not all(isinstance(n, int) and n >= 0 for n in (epoch, seq)) \
                or not all(isinstance(i, str) for i in ids):
            raise StatusError("publisher state record: bad strategy, epoch, seq or published_ids")
        return cls(strategy, epoch, seq, last, ids)


@dataclass(frozen=True)
class Publication:
    """New status messages for the tail of the view, earlier ones to delete, and their size."""

    messages: tuple[Message, ...] = ()
    remove_ids: tuple[str, ...] = ()
    bytes: int = 0

    @property
    def empty(self) -> bool:
        return not self.messages and not self.remove_ids


def status_message(text: str, *, epoch: int, seq: int, kind: str) -> Message:
    return Message(f"status-{epoch}-{seq}", "user", (Text(text),), Origin.STATUS,
                   {"epoch": epoch, "seq": seq, "kind": kind})


def _text(state: PublisherState, last: Snapshot | None, snapshot: Snapshot, strategy: str,
          epoch: int, seq: int, now: float) -> tuple[str, str] | None:
    """(kind, text) of the message to publish, or None when the model's view is already right."""
    shown = last is not None and not last.is_empty
    if snapshot.is_empty:
        return ("cleared", render_cleared(epoch=epoch, seq=seq, now=now)) if shown else None
    if not shown:
        return "baseline", render(snapshot, epoch=epoch, seq=seq, now=now, kind="baseline")
    changes = diff(last, snapshot)
    if changes.empty:
        return None
    if strategy == "delta":
        return "delta", render_delta(changes, epoch=epoch, seq=seq, since=state.seq, now=now)
    return "full", render(snapshot, epoch=epoch, seq=seq, now=now, kind="full")


def publish(state: PublisherState, snapshot: Snapshot, *, strategy: str = DEFAULT_STRATEGY,
            now: float, new_epoch: bool = False) -> tuple[PublisherState, Publication]:
    """Decide what to publish for `snapshot` given what `state` says was published before.

    `new_epoch` (after a compaction): epoch + 1, every status message of the old epoch removed,
    and a full baseline. The strategy may change between calls: deltas build on whatever full
    status is in view, and `replace` removes every status message still in view.
    """
    if strategy not in STRATEGIES:
        raise ConfigError(f"status strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    epoch = state.epoch + 1 if new_epoch else state.epoch
    last = None if new_epoch else state.last
    in_view = () if new_epoch else state.published_ids
    dropped = state.published_ids if new_epoch else ()
    seq = state.seq + 1
    made = _text(state, last, snapshot, strategy, epoch, seq, now)
    if made is None:
        if not new_epoch:
            return state, Publication()
        return (PublisherState(strategy, epoch, state.seq, None, ()),
                Publication(remove_ids=dropped))
    kind, text = made
    message = status_message(text, epoch=epoch, seq=seq, kind=kind)
    replaced = in_view if strategy == "replace" else ()
    kept = () if strategy == "replace" else in_view
    new_state = PublisherState(strategy, epoch, seq, snapshot, kept + (message.id,))
    return new_state, Publication((message,), dropped + replaced, len(text.encode("utf-8")))
