"""What a transcript is made of: tokens by role, by tool and by kind of content, the largest tool
results, and the compaction markers in it. Backs `worksurface inspect`.

The report is a plain JSON-able dict with stable key names (documented on `inspect_transcript`),
so scripts can rely on `worksurface inspect --json`.
"""

from __future__ import annotations

from typing import Any

from .edits import stable_prefix_length
from .formats.base import Transcript
from .model import ROLES, Message, Origin, Text, Thinking, ToolCall, ToolResult, orphans
from .tokens import PER_MESSAGE_OVERHEAD, TokenCounter
from .toolkinds import call_target
from .view import live_slice

# How many of the largest tool results the report lists.
LARGEST_RESULTS = 10
# Results whose call is not in the transcript (cut off by the file's start) are grouped under this name.
UNKNOWN_TOOL = "(unknown)"


def inspect_transcript(transcript: Transcript, counter: TokenCounter) -> dict[str, Any]:
    """Analyse a transcript. Keys of the result:

    - `path`, `format`, `messages` (count), `tokens` (all messages, as `counter` counts them)
    - `by_role`: {role: {messages, tokens}} for system, user, assistant, tool
    - `by_category`: {stable_prefix, dialogue, tool_calls, observations, other} tokens; they add up to
      `tokens`. stable_prefix = leading system messages; dialogue = text and thinking of the other
      messages; tool_calls = call blocks; observations = tool results; other = per-message framing,
      images and opaque blocks
    - `by_tool`: {tool name: {calls, call_tokens, results, result_tokens}}, largest first
    - `largest_results`: up to 10 of {call_id, message_id, tool, target, tokens, is_error}
    - `compaction`: {boundaries: [{message_id, index, by, trigger, pre_tokens}], compact_summaries:
      [message ids], worksurface: {origin: count}}
    - `live`: {from_message, messages, tokens}: what the model still sees, from the last compact
      boundary on (the whole transcript when there is none)
    - `unanswered_calls`, `orphan_results`, `queued_inputs` (counts)
    """
    messages = transcript.messages
    prefix = stable_prefix_length(messages)
    calls = {c.id: c for m in messages for c in m.tool_calls}
    by_role = {role: {"messages": 0, "tokens": 0} for role in ROLES}
    categories = {"stable_prefix": 0, "dialogue": 0, "tool_calls": 0, "observations": 0, "other": 0}
    by_tool: dict[str, dict[str, int]] = {}
    results: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        tokens = counter.message(message)
        by_role[message.role]["messages"] += 1
        by_role[message.role]["tokens"] += tokens
        if index < prefix:
            categories["stable_prefix"] += tokens
            continue
        categories["other"] += PER_MESSAGE_OVERHEAD
        for block in message.blocks:
            n = counter.block(block)
            if isinstance(block, (Text, Thinking)):
                categories["dialogue"] += n
            elif isinstance(block, ToolCall):
                categories["tool_calls"] += n
                _tool(by_tool, block.name)["calls"] += 1
                _tool(by_tool, block.name)["call_tokens"] += n
            elif isinstance(block, ToolResult):
                categories["observations"] += n
                call = calls.get(block.call_id)
                name = call.name if call is not None else UNKNOWN_TOOL
                _tool(by_tool, name)["results"] += 1
                _tool(by_tool, name)["result_tokens"] += n
                results.append({"call_id": block.call_id, "message_id": message.id, "tool": name,
                                "target": call_target(call) if call is not None else "", "tokens": n,
                                "is_error": block.is_error})
            else:
                categories["other"] += n
    total = sum(v["tokens"] for v in by_role.values())
    live = live_slice(messages)
    unanswered, orphan_results = orphans(messages)
    return {
        "path": transcript.path,
        "format": transcript.format,
        "messages": len(messages),
        "tokens": total,
        "by_role": by_role,
        "by_category": categories,
        "by_tool": dict(sorted(by_tool.items(), key=lambda kv: (-(kv[1]["call_tokens"] + kv[1]["result_tokens"]),
                                                                kv[0]))),
        "largest_results": sorted(results, key=lambda r: -r["tokens"])[:LARGEST_RESULTS],
        "compaction": _compaction(messages),
        "live": {"from_message": live[0].id if live and len(live) < len(messages) else None,
                 "messages": len(live), "tokens": counter.messages(live)},
        "unanswered_calls": len(unanswered),
        "orphan_results": len(orphan_results),
        "queued_inputs": len(transcript.queued_inputs),
    }


def _tool(by_tool: dict[str, dict[str, int]], name: str) -> dict[str, int]:
    return by_tool.setdefault(name, {"calls": 0, "call_tokens": 0, "results": 0, "result_tokens": 0})


def _compaction(messages: list[Message]) -> dict[str, Any]:
    """Harness compact boundaries and summaries (metadata set by the adapters) and worksurface's own
    messages (by origin; never inferred from text)."""
    boundaries = [{"message_id": m.id, "index": i, "by": "worksurface" if m.is_worksurface else "harness",
                   "trigger": m.meta.get("trigger"), "pre_tokens": m.meta.get("pre_tokens")}
                  for i, m in enumerate(messages) if m.meta.get("compact_boundary") or m.origin is Origin.BOUNDARY]
    origins: dict[str, int] = {}
    for m in messages:
        if m.origin is not Origin.CONVERSATION:
            origins[m.origin.value] = origins.get(m.origin.value, 0) + 1
    return {"boundaries": boundaries,
            "compact_summaries": [m.id for m in messages if m.meta.get("is_compact_summary")],
            "worksurface": dict(sorted(origins.items()))}
