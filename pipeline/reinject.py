"""Shared by the reinjectors: where the kept tail starts, what it shows, and how to make a message.

A reinjector is a module with `NAME` and `run(view, config, ctx, budget) -> (messages, report)`;
`ctx.extras["transcript"]` is the full live transcript (original content, before any clearing).
"""

from __future__ import annotations

from typing import Sequence

from .edits import edited_stage
from .model import Message, Origin, Text, message_text
from .state import StageReport


def tail_of(view: Sequence[Message]) -> list[Message]:
    """The kept tail: what follows the newest summary (the whole view when there is none)."""
    for i in range(len(view) - 1, -1, -1):
        if view[i].origin is Origin.SUMMARY:
            return list(view[i + 1:])
    return list(view)


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


def uncleared_results(messages: Sequence[Message]):
    """(message, result) pairs of the tail whose content no stage has replaced."""
    for m in messages:
        for r in m.tool_results:
            if edited_stage(m, r.call_id) is None:
                yield m, r


def reinjected(name: str, key: str, text: str, **meta) -> Message:
    return Message(f"reinject-{name}-{key}", "user", (Text(text),), Origin.REINJECTION,
                   {"reinjector": name, **meta})


def report(name: str, before: int, added: int, restored: list, skipped: list, dropped: list,
           why_empty: str = "nothing to restore") -> StageReport:
    return StageReport(name, before, before + added, items=len(restored),
                       skipped=None if restored else why_empty,
                       details={"restored": restored, "skipped_visible": skipped, "dropped_budget": dropped,
                                "tokens": added})
