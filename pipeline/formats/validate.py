"""Tool call / result pairing checks shared by the adapters."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..errors import FormatError
from ..model import Message

# Meta flag on a message whose tool call(s) never got a result in the source (the run ended, was
# cut off, or the call was terminal like `submit` / `finish`); the calls are listed under it.
INTERRUPTED = "interrupted"


def check_pairing(messages: Sequence[Message], path: str | None = None) -> None:
    """Raise FormatError naming the message for a result without an earlier call, or a reused call id."""
    seen: set[str] = set()
    for i, m in enumerate(messages):
        for r in m.tool_results:
            if r.call_id not in seen:
                raise FormatError(f"tool result for call {r.call_id!r} has no tool call before it",
                                  path=path, record=f"{m.id} (message {i})")
        for c in m.tool_calls:
            if c.id in seen:
                raise FormatError(f"tool call id {c.id!r} is used twice", path=path,
                                  record=f"{m.id} (message {i})")
            seen.add(c.id)


def mark_unanswered(messages: list[Message]) -> list[Message]:
    """Flag (meta `interrupted`: [call ids]) each message holding calls that never got a result."""
    answered = {r.call_id for m in messages for r in m.tool_results}
    out = []
    for m in messages:
        missing = [c.id for c in m.tool_calls if c.id not in answered]
        out.append(replace(m, meta={**m.meta, INTERRUPTED: missing}) if missing else m)
    return out
