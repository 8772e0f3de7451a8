"""The session's status bar: the status the transcript shows (folded on the session ledger's walk,
`DerivedStatus`), the harness's own events reduced over it, and what each call publishes at the
tail of the view.

It reads each message once, when the ledger does, and owns the publication rules:
a baseline per epoch, deltas after it, and folding accumulated status messages into one fresh
baseline when a stage is already breaking the prompt cache.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from ..core.config import Config
from ..core.edits import Edit, Insert, ReplaceMessages
from ..core.model import Message, Origin
from ..core.view import Recovered, insertion_point
from ..engine.state import StatusInputs, StatusUpdate
from ..status import PublisherState, event_from_json, publish
from ..status.derive import DerivedStatus
from ..status.events import ResourcesChanged
from ..status.publish import Publication
from ..status.replay import transcript_epoch
from ..status.snapshot import Snapshot

# Epoch numbers match the status bar's: the session before any compaction is epoch 1.
FIRST_EPOCH = 1
STAGE = "status"


class StatusBar:
    """One per Session. `begin` before the graph runs, `finish` after it."""

    def __init__(self, config: Config) -> None:
        self.config = config
        # What the transcript shows: the session's ledger feeds it (`Ledger.follow(bar.derived)`).
        self.derived = DerivedStatus(config.window)
        self._seen = 0
        self._read: tuple[int, int] | None = None  # (derived.resets, derived.seen) at the last call
        self.reset_pending = False  # a rewind dropped the status edits; the store follows at commit
        # The view's size after the last compaction: usage recorded in the transcript before it
        # describes a context the model no longer has, so this stands until newer usage arrives.
        self.tokens_override: int | None = None

    def exclude(self, ids: frozenset[str]) -> None:
        """Transcript messages the live view no longer holds (recovery removed them): the bar does not
        read them either. Call before the ledger's update."""
        self.derived.exclude(ids)

    def exclude_recovered(self, recovered: Recovered, live_start: int = 0) -> None:
        """`exclude` the messages recovery removed whole (left with no block). One excluded before that
        is now behind the live part (the harness compacted past it) stays excluded: the model never saw
        it, and reading it now would start the bar over for nothing."""
        derived = self.derived
        behind = frozenset(i for i in derived.skip if derived.skipped_at.get(i, live_start) < live_start)
        self.exclude(recovered.gone | behind)

    def reset(self) -> None:
        """After a rewind status publications may sit after removed messages: the session drops them
        all, and the next publication is a fresh baseline in the current epoch."""
        self.reset_pending = True

    def begin(self, live: Sequence[Message], keep: int, emitted: Sequence[dict[str, Any]],
              stored: PublisherState | dict[str, Any] | None, now: float,
              history: Sequence[Message] = ()) -> tuple[StatusInputs, tuple[PublisherState, Publication]]:
        """The status inputs for this call and the publication planned if no compaction happens.
        `history` is what the transcript holds before its last compact boundary: the model no longer
        sees it, but the goal, tool counts and todo list it established still stand (and each of its
        boundaries is an epoch), so `worksurface status` and the session agree on one file."""
        snapshot = self._snapshot(live, keep, emitted, history)
        publisher = self._publisher_state(live, snapshot, None if self.reset_pending else stored, history)
        if self.reset_pending and stored is not None:
            # After a rewind the status starts over, but its ids continue where the previous ones
            # stopped: a status a compaction reinjected may still be in the view under such an id.
            prior = _publisher(stored)
            publisher = dataclasses.replace(publisher, epoch=max(publisher.epoch, prior.epoch),
                                            seq=max(publisher.seq, prior.seq))
        planned = publish(publisher, snapshot, strategy=publisher.strategy, now=now)
        return StatusInputs(snapshot, publisher, lambda tokens: self._resized(emitted, tokens)), planned

    def finish(self, inputs: StatusInputs, planned: tuple[PublisherState, Publication], update: StatusUpdate | None,
               cache_breaks: bool, view: Sequence[Message], now: float) -> tuple[list[Edit], PublisherState, dict[str, Any]]:
        """Status edits for this call: after a compaction the status reinjector already made the new
        epoch's baseline; otherwise the planned publication (nothing when nothing changed)."""
        if update is not None:
            self.tokens_override = update.tokens
            edits: list[Edit] = [ReplaceMessages(STAGE, update.remove_ids, ())] if update.remove_ids else []
            return edits, update.publisher, {"epoch": update.publisher.epoch, "seq": update.publisher.seq,
                                             "published": "baseline"}
        state = inputs.publisher
        new_state, publication = planned
        if self._should_fold(state, cache_breaks):
            # One fresh baseline replaces the epoch's accumulated status messages (instead of the
            # planned publication, which is never made).
            folded, publication = publish(dataclasses.replace(state, last=None), inputs.snapshot,
                                          strategy="replace", now=now)
            new_state = dataclasses.replace(folded, strategy=state.strategy)
        if (publication.messages or publication.remove_ids) and insertion_point(view) < len(view):
            # The last turn still waits for a tool result: a status after it would sit between the
            # call and its result, and one before it would change what was sent. The next call says it.
            return [], state, {"epoch": state.epoch, "seq": state.seq, "published": None,
                               "deferred": "the last turn waits for a tool result"}
        edits = []
        if publication.remove_ids:
            edits.append(ReplaceMessages(STAGE, publication.remove_ids, ()))
        if publication.messages:
            anchor = view[-1].id if view else None
            ref = next((m.id for m in reversed(view) if m.origin is Origin.CONVERSATION), None)
            edits.append(Insert(STAGE, anchor, publication.messages, ref))
        kind = publication.messages[0].meta.get("kind") if publication.messages else None
        return edits, new_state, {"epoch": new_state.epoch, "seq": new_state.seq, "published": kind,
                                  "bytes": publication.bytes}

    # --- internals ------------------------------------------------------------------------------

    def _snapshot(self, live: Sequence[Message], keep: int, emitted: Sequence[dict[str, Any]],
                  history: Sequence[Message] = ()) -> Snapshot:
        """The transcript's status (the ledger fed it this call's new messages), the view's size after a
        compaction, then the harness's events."""
        derived = self.derived
        # The messages new to the bar: every live one when it starts over (a rewind, a new process),
        # else those the ledger read since the last call.
        fresh = self._read is None or keep < self._seen or self._read[0] != derived.resets
        if derived.tokens_at >= (len(history) if fresh or self._read is None else self._read[1]):
            self.tokens_override = None  # the provider measured the compacted context
        self._seen, self._read = len(live), (derived.resets, derived.seen)
        if self.tokens_override is not None:
            derived.reducer.apply(ResourcesChanged(tokens_used=self.tokens_override, token_limit=self.config.window))
        if not emitted:
            return derived.reducer.snapshot()
        # Harness events come last; apply them to a copy so the derived state stays incremental.
        reducer = derived.reducer.fork()
        for data in emitted:
            reducer.apply(event_from_json(data))
        return reducer.snapshot()

    def _resized(self, emitted: Sequence[dict[str, Any]], tokens: int) -> Snapshot:
        """The snapshot as it will be once the view is `tokens` long (the baseline after a compaction)."""
        reducer = self.derived.reducer.fork()
        reducer.apply(ResourcesChanged(tokens_used=tokens, token_limit=self.config.window))
        for data in emitted:
            reducer.apply(event_from_json(data))
        return reducer.snapshot()

    def _publisher_state(self, live: Sequence[Message], snapshot: Snapshot,
                         stored: PublisherState | dict[str, Any] | None,
                         history: Sequence[Message] = ()) -> PublisherState:
        known = _publisher(stored) if stored is not None else None
        if known is not None and known.strategy == self.config.status_strategy:
            return known
        fed_back = [m for m in live if m.origin is Origin.STATUS]
        if fed_back:
            # The harness sent back a view with our status in it: that status is what the model has,
            # so continue after it instead of publishing a second copy.
            last = fed_back[-1].meta
            return PublisherState(self.config.status_strategy, int(last.get("epoch", FIRST_EPOCH)),
                                  int(last.get("seq", 0)), snapshot, tuple(m.id for m in fed_back))
        # A transcript that already holds compactions starts in the epoch its boundaries reached.
        return PublisherState(strategy=self.config.status_strategy,
                              epoch=transcript_epoch(list(history) + list(live[:1])))

    def _should_fold(self, state: PublisherState, cache_breaks: bool) -> bool:
        if state.strategy == "replace":
            return False
        in_view = len(state.published_ids)
        return in_view >= self.config.status_fold_max or (cache_breaks and in_view >= self.config.status_fold_min)


def _publisher(stored: PublisherState | dict[str, Any]) -> PublisherState:
    """The stored publisher state: as the store's JSON, or the state itself when the session knows
    the store holds the one it committed (no decoding on every call)."""
    return stored if isinstance(stored, PublisherState) else PublisherState.from_json(stored)
