"""Clearing the harness did itself: old tool results it replaced by a placeholder mid-session.

Claude Code's microcompact (its `microcompact_boundary` record) clears the content of old tool
results and from then on sends each of them as a short placeholder. The reader marks the clearing
on the message the record follows (meta `HARNESS_CLEARING`, the placeholder under `CLEARED_TEXT`).
`clearing_edits` turns each mark into `ReplaceResult` edits of stage `HARNESS_STAGE`, which the
session applies and stores like any sticky edit: the live view, its counts and worksurface's own
stages see what the harness really sent from the mark on. The transcript itself keeps the original
content, so the ledger, the facts and the status bar still learn what the model saw before the
clearing, and a write-back emits the original records (the harness clears them again itself).
"""

from __future__ import annotations

from typing import Any, Sequence

from .edits import ReplaceResult, apply_edits, edited_stage
from .model import Block, Message, ToolResult

# Meta of the message a harness clearing follows:
# {"trigger": str|None, "pre_tokens": int|None, "tokens_saved": int|None, "cleared_call_ids": [str, ...]}.
# Usage measured on the messages after it describes the cleared view.
HARNESS_CLEARING = "harness_clearing"
# Meta beside it: the text the harness sends in place of each cleared result.
CLEARED_TEXT = "harness_cleared_text"
# The stage name of the edits that reproduce a harness clearing (not a worksurface stage).
HARNESS_STAGE = "harness"


def clearing_of(message: Message) -> dict[str, Any] | None:
    """The harness clearing marked on this message, if any."""
    mark = message.meta.get(HARNESS_CLEARING)
    return mark if isinstance(mark, dict) else None


def clearing_edits(messages: Sequence[Message], start: int = 0) -> list[ReplaceResult]:
    """The edits for the clearings marked on `messages[start:]`: each cleared result that stands
    before its mark in `messages` is replaced by the harness's placeholder."""
    marks = [(i, mark) for i in range(start, len(messages)) if (mark := clearing_of(messages[i])) is not None]
    if not marks:
        return []
    result_at = {r.call_id: i for i, m in enumerate(messages[:marks[-1][0] + 1]) for r in m.tool_results}
    edits: list[ReplaceResult] = []
    for i, mark in marks:
        text = messages[i].meta.get(CLEARED_TEXT)
        if not isinstance(text, str):
            continue
        for call_id in mark.get("cleared_call_ids") or ():
            if isinstance(call_id, str) and result_at.get(call_id, i + 1) <= i:
                edits.append(ReplaceResult(HARNESS_STAGE, call_id, text))
    return edits


def harness_view(messages: Sequence[Message]) -> list[Message]:
    """`messages` as the harness sends them after its own clearings."""
    edits = clearing_edits(messages)
    return apply_edits(messages, edits) if edits else list(messages)


def cleared_only(message: Message, original: Sequence[Block]) -> bool:
    """True when `message` differs from the `original` blocks only in results a harness clearing
    replaced (so the source record, which the harness clears itself, still stands for it)."""
    if len(message.blocks) != len(original):
        return False
    for now, before in zip(message.blocks, original):
        if now == before:
            continue
        if not (isinstance(now, ToolResult) and isinstance(before, ToolResult) and now.call_id == before.call_id
                and edited_stage(message, now.call_id) == HARNESS_STAGE):
            return False
    return True
