"""The working surface rebuilt for a harness that compacted on its own (the Claude Code and Codex hooks).

The harness wrote its own summary; worksurface's ledger of the whole transcript (every message, the
history before the harness's boundaries included) still holds the standing constraints, the excluded
approaches, the plan, the files, the tools announced mid-session and the status. The same reinjectors
that run after worksurface's own compaction render them, each skipping what `shown` (what the harness
now sends: its boundary, its summary, the messages it kept, the files it re-attached) already shows.
Nothing is written to the session's log or edits: only the ledger and the token cache are saved, so
the next call folds only what is new.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from ..core.model import Message
from ..core.view import live_slice
from ..engine.state import StageContext, StageInputs, StageReport, StatusInputs
from ..formats.base import Transcript
from ..graph.compose import run_reinjectors
from ..status.events import SECTIONS
from ..status.signals import compute_signals
from ..status.snapshot import Snapshot

if TYPE_CHECKING:
    from .session import Session

# Context-size fields of the status bar: after the harness's compaction only the harness knows the new
# size (its next request measures it), so the rebuilt baseline leaves them out rather than quote the
# size before the compaction.
CONTEXT_SIZE_FIELDS = ("tokens_used", "tokens_left")


@dataclass
class Surface:
    """The rebuilt working surface: one message per reinjected part (the status baseline last), the
    reinjectors' reports, and its size in worksurface's tokens."""

    messages: list[Message]
    reports: list[StageReport]
    tokens: int

    def text(self) -> str:
        return "\n\n".join(m.text for m in self.messages)


def rebuild_surface(session: "Session", transcript: Transcript, shown: Sequence[Message], budget: int,
                    now: float | None = None) -> Surface:
    """The surface for the harness's next model call, from the session's ledger of `transcript`
    (folded incrementally and saved), within `budget` tokens, skipping what `shown` shows."""
    now = time.time() if now is None else now
    store, ledger = session.store, session.ledger
    with store.lock():
        session.status_bar.exclude(frozenset())  # the bar reads the transcript as it is here (no recovery)
        full = _fold(session, transcript)
        live = live_slice(full)
        inputs, _ = session.status_bar.begin(live, 0, store.get_meta("status_events", []), None, now,
                                             history=full[:len(full) - len(live)])
        snapshot = _without_context_size(inputs.snapshot)
        publisher = inputs.publisher
        if shown and live and shown[0] is live[0]:
            # The transcript already holds the harness's new boundary, and its epoch counts it: the
            # baseline the status reinjector starts belongs to that epoch, not to one after it.
            publisher = dataclasses.replace(publisher, epoch=max(1, publisher.epoch - 1))
        status = StatusInputs(snapshot, publisher, lambda tokens: snapshot)
        ctx = StageContext(config=session.config, counter=session.counter, artifacts=store, now=now,
                           transcript=live, queued_inputs=transcript.queued_inputs, ledger=ledger,
                           epoch=publisher.epoch, inputs=StageInputs(status))
        rebuilt = run_reinjectors(session.reinjectors, list(shown), budget, ctx)
        _save(session)
    return Surface(rebuilt.messages, rebuilt.reports, session.counter.messages(rebuilt.messages))


def fold_ledger(session: "Session", transcript: Transcript) -> None:
    """Bring the session's ledger up to date with `transcript` and save it (only what is new is read)."""
    with session.store.lock():
        _fold(session, transcript)
        _save(session)


def _fold(session: "Session", transcript: Transcript) -> list[Message]:
    session.ledger.update(transcript.messages, queued=transcript.queued_inputs, extras=transcript.extras)
    session.ledger.settle()  # what is saved next is the ledger of the whole transcript
    return transcript.messages


def _save(session: "Session") -> None:
    """The ledger's changed parts and the new token counts, in one transaction."""
    store = session.store
    with store.transaction():
        save = session.ledger.write(store.set_meta)
        store.update_token_cache(session.counter.take_unsaved())
    if save is not None:
        session.ledger.saved(save)


def _without_context_size(snapshot: Snapshot) -> Snapshot:
    """The snapshot without the context-size fields, and its signals computed again without them."""
    sections = {name: dict(fields) for name, fields in snapshot.sections.items() if name != "signals"}
    resources = {n: f for n, f in sections.get("resources", {}).items() if n not in CONTEXT_SIZE_FIELDS}
    sections["resources"] = resources
    sections["signals"] = compute_signals(sections)
    return Snapshot({name: sections[name] for name in SECTIONS if sections.get(name)})
