"""Anthropic Messages (`/v1/messages`): requests, prompt-cache breakpoints, usage.

Breakpoints: a message the view shows exactly as the client sent it is sent as the client's own
(with the `cache_control` it carries now); every other message carries none (an earlier request's
breakpoint on a message that has since scrolled back would otherwise stay, one more on every call).
A breakpoint the client put on a message the view no longer shows as sent moves to the nearest
earlier message the view does show, so it still marks the end of a prefix that will be sent again.
The system prompt and tools are the client's, untouched; at most four breakpoints remain (the
API's limit), the earliest message ones dropped first.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Mapping, Sequence

from ..core.model import Message
from ..formats import anthropic_messages
from ..formats.base import Transcript
from ..formats.reuse import Memo, made
from .apis import FETCH_DESCRIPTION, FETCH_SCHEMA, FETCH_TOOL, Api, Usage, Watch, int_field
from . import relay
from .fetch import Answered, Round
from .sse import Event
from .upstream import UpstreamResponse

MAX_BREAKPOINTS = 4


class AnthropicMessages(Api):
    NAME = "anthropic"
    adapter = anthropic_messages

    def build(self, transcript: Transcript, view: Sequence[Message], body: Mapping[str, Any],
              offer_fetch: bool, memo: Memo | None = None) -> dict[str, Any]:
        placed = place_breakpoints(transcript.messages, view, body, memo)
        return super().build(transcript, placed, body, offer_fetch, memo)

    def add_fetch_tool(self, doc: dict[str, Any]) -> None:
        tools = list(doc.get("tools") or [])
        if not any(isinstance(t, dict) and t.get("name") == FETCH_TOOL for t in tools):
            tools.append({"name": FETCH_TOOL, "description": FETCH_DESCRIPTION, "input_schema": FETCH_SCHEMA})
        doc["tools"] = tools

    def fetch_round(self, doc: Any) -> Round | None:
        return relay.anthropic_round(doc)

    def follow_up(self, doc: dict[str, Any], answered: Answered) -> bytes:
        return relay.anthropic_follow_up(doc, answered)

    def rewrite_body(self, doc: Any, rewrite: relay.Rewrite) -> Any:
        return relay.anthropic_body(self, doc, rewrite)

    def rewrite_stream(self, response: UpstreamResponse, rewrite: relay.Rewrite,
                       on_usage: Watch) -> AsyncIterator[bytes]:
        return relay.anthropic_stream(self, response, rewrite, on_usage)

    def usage_of(self, doc: Any) -> Usage | None:
        usage = doc.get("usage") if isinstance(doc, dict) else None
        return _usage(usage) if isinstance(usage, dict) else None

    def usage_of_event(self, event: Event) -> Usage | None:
        if event.name != "message_start":
            return None
        data = event.data()
        message = data.get("message") if isinstance(data, dict) else None
        usage = message.get("usage") if isinstance(message, dict) else None
        return _usage(usage) if isinstance(usage, dict) else None


def _usage(usage: Mapping[str, Any]) -> Usage:
    cached = int_field(usage, "cache_read_input_tokens")
    total = int_field(usage, "input_tokens") + cached + int_field(usage, "cache_creation_input_tokens")
    return Usage(total, cached)


def place_breakpoints(sent: Sequence[Message], view: Sequence[Message], body: Mapping[str, Any],
                      memo: Memo | None = None) -> list[Message]:
    """The view with the client's prompt-cache breakpoints placed as described in the module doc."""
    current = {m.id: (i, m) for i, m in enumerate(sent)}
    out: list[Message] = []
    position: list[int] = []        # each view message's place in what the client sent
    shown: set[str] = set()         # client messages the view shows exactly as sent
    last = -1
    for m in view:
        found = current.get(m.id)
        if found is not None and found[1].digest == m.digest and m.origin == found[1].origin:
            out.append(found[1])
            shown.add(m.id)
            last = found[0]
        else:
            out.append(made(memo, "unmarked", m, _unmarked) if m.meta else m)
            if found is not None:
                last = found[0]
        position.append(last)
    marks = [(i, m) for i, m in enumerate(sent) if m.role != "system" or m.meta.get(anthropic_messages.IN_MESSAGES)
             if anthropic_messages.cache_controls(m)]
    for index, m in marks:
        if m.id in shown:
            continue
        target = max((k for k, p in enumerate(position) if p <= index and p >= 0), default=None)
        if target is not None and not anthropic_messages.cache_controls(out[target]):
            out[target] = anthropic_messages.with_cache_control(out[target], anthropic_messages.cache_controls(m)[-1])
    return _at_most(out, MAX_BREAKPOINTS - _fixed_breakpoints(body))


def _unmarked(m: Message) -> Message:
    return anthropic_messages.with_cache_control(m, None)


def _fixed_breakpoints(body: Mapping[str, Any]) -> int:
    """Breakpoints on the tools and the system prompt (never moved)."""
    count = 0
    for key in ("tools", "system"):
        value = body.get(key)
        if isinstance(value, list):
            count += sum(1 for b in value if isinstance(b, dict) and b.get("cache_control") is not None)
    return count


def _at_most(view: list[Message], allowed: int) -> list[Message]:
    marked = [i for i, m in enumerate(view) if m.role != "system" or m.meta.get(anthropic_messages.IN_MESSAGES)
              if anthropic_messages.cache_controls(m)]
    counts = {i: len(anthropic_messages.cache_controls(view[i])) for i in marked}
    total = sum(counts.values())
    for i in marked:                 # the earliest go first: the newest mark the longest prefix
        if total <= max(0, allowed):
            break
        total -= counts[i]
        view[i] = anthropic_messages.with_cache_control(view[i], None)
    return view
