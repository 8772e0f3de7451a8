"""Tool call / result pairing checks shared by the adapters."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..core.errors import FormatError
from ..core.model import Message

# Meta flag on a message whose tool call(s) never got a result in the source (the run ended, was
# cut off, or the call was terminal like `submit` / `finish`); the calls are listed under it.
INTERRUPTED = "interrupted"
# What export answers such a call with when more messages follow it: both APIs reject a call left
# unanswered mid-conversation (Claude Code writes a similar synthetic result after an interrupt).
NO_RESULT = "[no result recorded for this tool call]"


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


def check_unique_ids(messages: Sequence[Message], path: str | None = None) -> None:
    """Raise FormatError naming a message id read twice (a worksurface mark naming an id again)."""
    seen: set[str] = set()
    for m in messages:
        if m.id in seen:
            raise FormatError(f"message id {m.id!r} is used twice (a worksurface mark names it again)",
                              path=path, record=m.id)
        seen.add(m.id)


class CallIds:
    """Unique call ids for logs that reuse them (hand-edited SWE-agent demos repeat provider ids).

    A reused id gets a `~n` suffix; a result refers to the latest call that had its id, which is the
    only one the model could mean at that point.
    """

    def __init__(self) -> None:
        self._latest: dict[str, str] = {}
        self._count: dict[str, int] = {}

    def call(self, raw_id: str) -> str:
        n = self._count[raw_id] = self._count.get(raw_id, 0) + 1
        self._latest[raw_id] = raw_id if n == 1 else f"{raw_id}~{n}"
        return self._latest[raw_id]

    def result(self, raw_id: str) -> str:
        return self._latest.get(raw_id, raw_id)


def mark_unanswered(messages: list[Message]) -> list[Message]:
    """Flag (meta `interrupted`: [call ids]) each message holding calls that never got a result."""
    answered = {r.call_id for m in messages for r in m.tool_results}
    out = []
    for m in messages:
        missing = [c.id for c in m.tool_calls if c.id not in answered]
        out.append(replace(m, meta={**m.meta, INTERRUPTED: missing}) if missing else m)
    return out
