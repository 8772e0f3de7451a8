"""Writing calls one turn at a time, for log formats that answer a call in the very next message.

SWE-agent text actions and mini-swe-agent run one command per model response and show its output in
the next message. A view may hold several calls in one message (another harness's parallel calls)
and their results later or together in one message; such formats get each call followed by its own
result, so reading the file back pairs them again.
"""

from __future__ import annotations

from typing import Sequence

from .validate import check_pairing
from ..core.model import Message, ToolResult


class Results:
    """Each call's result, found wherever it is in the view; each is handed out once."""

    def __init__(self, messages: Sequence[Message], path: str | None) -> None:
        check_pairing(messages, path)  # every result follows its call, no call id used twice
        self._by_call: dict[str, tuple[ToolResult, Message]] = {}
        for m in messages:
            for r in m.tool_results:
                self._by_call.setdefault(r.call_id, (r, m))
        self._given: set[str] = set()

    def take(self, call_id: str) -> ToolResult | None:
        """The call's result, unless it has no result or was already taken."""
        if call_id in self._given or call_id not in self._by_call:
            return None
        self._given.add(call_id)
        return self._by_call[call_id][0]

    def result_of(self, call_id: str) -> ToolResult | None:
        """The call's result, without handing it out."""
        found = self._by_call.get(call_id)
        return found[0] if found is not None else None

    def has(self, call_id: str) -> bool:
        """True when the call has a result somewhere in the view."""
        return call_id in self._by_call

    def message_of(self, result: ToolResult) -> Message:
        """The message that holds `result`."""
        return self._by_call[result.call_id][1]

    def given(self, result: ToolResult) -> bool:
        """True when `result` was already written right after its call."""
        return result.call_id in self._given
