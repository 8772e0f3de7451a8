"""Shared by the reinjectors: where the kept tail starts, what it shows, and how to make a message.

A reinjector (`worksurface.engine.state.Reinjector`, declared as `REINJECTOR` by its module) runs
`run(view, config, ctx, budget) -> Reinjection`; `ctx.transcript` is the full live transcript
(original content, before any clearing).
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterator, Sequence

from ..core.edits import edited_stage
from ..ledger import Ledger
from ..ledger.source import FactSource
from ..core.model import Message, Origin, Text, ToolResult, message_text
from .state import SkipKind, Skipped, StageContext, StageReport


# The context fields `facts_of` reads: a reinjector that restores from the facts reads them too.
FACTS_READS = frozenset({"ledger", "transcript", "queued_inputs"})
# The context fields `reinjected` reads: a reinjector that makes a message reads them too.
MESSAGE_READS = frozenset({"epoch"})


def facts_of(ctx: StageContext, view: Sequence[Message]) -> FactSource:
    """The working state a reinjector restores from: the session's ledger (everything folded so
    far, history before a harness's own compaction included), or a ledger folded over the transcript."""
    if ctx.ledger is not None:
        return ctx.ledger.upto()
    return Ledger.over(ctx.transcript or view, ctx.queued_inputs).upto()


def tail_of(view: Sequence[Message]) -> list[Message]:
    """The kept tail: what follows the newest summary (the whole view when there is none)."""
    for i in range(len(view) - 1, -1, -1):
        if view[i].origin is Origin.SUMMARY:
            return list(view[i + 1:])
    return list(view)


def summarized_span(ctx: StageContext, view: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """(the live transcript's messages the newest summary replaced, the kept tail): the first kept
    conversation message splits the transcript (the whole transcript is summarized when none is kept)."""
    tail = tail_of(view)
    transcript = list(ctx.transcript or view)
    first = next((m.id for m in tail if m.origin is Origin.CONVERSATION), None)
    at = next((i for i, m in enumerate(transcript) if m.id == first), len(transcript)) if first else len(transcript)
    return transcript[:at], tail


def shown_text(messages: Sequence[Message]) -> str:
    """The text the model sees in these messages, case- and whitespace-folded for `is_shown`
    (cleared results show only their marker)."""
    return _fold("\n".join(message_text(m) for m in messages))


def is_shown(needle: str, shown: str) -> bool:
    """Whether `needle` appears in `shown` (from `shown_text`) after the same folding. Exact on
    purpose: facts are reinjected verbatim, and the summary quotes them verbatim."""
    n = _fold(needle)
    return not n or n in shown


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def uncleared_results(messages: Sequence[Message]) -> Iterator[tuple[Message, ToolResult]]:
    """(message, result) pairs of the tail whose content no stage has replaced."""
    for m in messages:
        for r in m.tool_results:
            if edited_stage(m, r.call_id) is None:
                yield m, r


def reinjected(ctx: StageContext, name: str, key: str, text: str, **meta: Any) -> Message:
    """A reinjected message of the compaction this call makes (epoch `ctx.epoch + 1`). Its id names
    that epoch and carries a digest of its text, so ids stay unique across compactions even when a
    later one restores the very same text (a second manual compaction, a call repeated after a crash)."""
    epoch = ctx.epoch + 1
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
    return Message(f"reinject-{epoch}-{name}-{key}-{digest}", "user", (Text(text),), Origin.REINJECTION,
                   {"reinjector": name, "epoch": epoch, **meta})


def report(name: str, before: int, added: int, restored: list, skipped: list, dropped: list,
           why_empty: str = "nothing to restore") -> StageReport:
    return StageReport(name, before, before + added, items=len(restored),
                       outcome=None if restored else Skipped(SkipKind.NOTHING_TO_DO, why_empty),
                       details={"restored": restored, "skipped_visible": skipped, "dropped_budget": dropped,
                                "tokens": added})
