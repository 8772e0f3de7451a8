"""What a transcript is made of: tokens by role, by tool and by kind of content, the largest tool
results, and the compaction markers in it. Backs `worksurface inspect`.

The report is a plain JSON-able dict with stable key names (documented on `inspect_transcript`),
so scripts can rely on `worksurface inspect --json`.
"""

from __future__ import annotations

import heapq
import os
from dataclasses import replace
from typing import Any

from ..core.clearing import clearing_edits, clearing_of, harness_view
from ..core.edits import stable_prefix_length
from ..formats import stream_transcript
from ..formats.base import Transcript
from ..formats.claude_code_records import PRESERVED_BY
from ..formats.damaged import damaged_lines
from ..core.model import ROLES, Block, Message, Origin, Text, Thinking, ToolCall, ToolResult, orphans
from ..core.tokens import PER_MESSAGE_OVERHEAD, TokenCounter
from ..core.toolkinds import call_target
from ..subagents.sidechains import sidechain_tree
from .sizing import recorded_window
from ..core.view import live_slice

# How many of the largest tool results the report lists.
LARGEST_RESULTS = 10
# A report's token figures need not be exact for huge blocks: a text longer than this (about 250k
# tokens) is counted on a sample of SAMPLE_CHARS from its start and end and extrapolated, so one 50 MB
# line costs what a 1 MB one does instead of minutes and gigabytes of BPE work.
MAX_EXACT_CHARS = 1_000_000
SAMPLE_CHARS = 200_000
# Results whose call is not in the transcript (cut off by the file's start) are grouped under this name.
UNKNOWN_TOOL = "(unknown)"


class Sampled(str):
    """A huge text as a report keeps it: its first and last SAMPLE_CHARS // 2 characters (what
    BoundedCounter counts of it) and its length in characters (`chars`), not the text itself."""

    chars: int

    def __new__(cls, text: str) -> "Sampled":
        half = SAMPLE_CHARS // 2
        kept = super().__new__(cls, text[:half] + text[-half:])
        kept.chars = text.chars if isinstance(text, Sampled) else len(text)
        return kept


class BoundedCounter(TokenCounter):
    """A TokenCounter for reports: texts over MAX_EXACT_CHARS (and `Sampled` ones) are estimated from
    a sample (start and end, SAMPLE_CHARS in all) at the sample's tokens per character; `estimated`
    counts them."""

    def __init__(self) -> None:
        super().__init__()
        self.estimated = 0

    def message(self, message: Message) -> int:
        # A report reads each message once or twice: summing its (memoized) blocks costs less than the
        # digest that would key the message's own count, which only a session uses again.
        return self.from_blocks(message)

    def text(self, text: str) -> int:
        if len(text) <= MAX_EXACT_CHARS and not isinstance(text, Sampled):
            return super().text(text)
        self.estimated += 1
        half = SAMPLE_CHARS // 2
        sampled = super().text(text[:half]) + super().text(text[-half:])
        chars = text.chars if isinstance(text, Sampled) else len(text)
        return round(sampled * chars / SAMPLE_CHARS)


def keep_sampled(message: Message) -> Message:
    """What a report keeps of a message read from a file (formats.base.Keep): its texts and tool
    results over MAX_EXACT_CHARS as `Sampled`, and its source record with such strings sampled too
    (the record's meta object is kept, updated in place), so a 200 MB result costs the reader one
    line's memory, not the file's. BoundedCounter counts the sample as it counts the whole text.
    The record is walked only for a message with a huge block (a harness's structured copy of an
    output is as long as the output), so a normal message costs a look at its blocks."""
    blocks = tuple(_sampled_block(b) for b in message.blocks)
    if all(a is b for a, b in zip(blocks, message.blocks)):
        return message
    if isinstance(message.meta, dict) and "raw" in message.meta:
        raw = _sampled_strings(message.meta["raw"])
        if raw is not None:
            message.meta["raw"] = raw
    return replace(message, blocks=blocks)


def _sampled_block(block: Block) -> Block:
    if isinstance(block, ToolResult) and len(block.content) > MAX_EXACT_CHARS:
        return replace(block, content=Sampled(block.content))
    if isinstance(block, (Text, Thinking)) and len(block.text) > MAX_EXACT_CHARS:
        return replace(block, text=Sampled(block.text))
    return block


def _sampled_strings(value: Any) -> Any:
    """A copy of a JSON value with its strings over MAX_EXACT_CHARS sampled, or None when it has none
    (the walk allocates nothing for the records of a normal session)."""
    if isinstance(value, str):
        return Sampled(value) if len(value) > MAX_EXACT_CHARS else None
    if isinstance(value, dict):
        changed = {k: v for k, v in ((k, _sampled_strings(v)) for k, v in value.items()) if v is not None}
        return {**value, **changed} if changed else None
    if isinstance(value, list):
        parts = [_sampled_strings(v) for v in value]
        return [v if p is None else p for v, p in zip(value, parts)] if any(p is not None for p in parts) else None
    return None


def _largest(tokens: int, result: ToolResult, message_id: str, call: ToolCall | None) -> dict[str, Any]:
    """One of the largest results, described (only the few shown are: a target is parsed from its call)."""
    return {"call_id": result.call_id, "message_id": message_id,
            "tool": call.name if call is not None else UNKNOWN_TOOL,
            "target": call_target(call) if call is not None else "", "tokens": tokens, "is_error": result.is_error}


def inspect_file(path: str | os.PathLike[str], format: str = "auto", *, strict: bool = False) -> dict[str, Any]:
    """`inspect_transcript` of a transcript file, read line by line when it is JSON Lines (Claude
    Code, Codex) and counted with a BoundedCounter: huge texts are kept as samples as they are read,
    so memory stays near the largest line's, whatever the file's size."""
    counter = BoundedCounter()
    return inspect_transcript(stream_transcript(path, format, strict=strict, keep=keep_sampled), counter)


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
    - `compaction`: {count, boundaries: [{message_id, index, by ("harness" or "worksurface"), made_by
      (claude-code, codex, worksurface, ...), trigger, pre_tokens and post_tokens (the boundary's
      metadata, None when absent), counted_after (tokens the model was given at its first call after
      it), reported_after (that call's recorded input usage, None when absent), summary_id, kept (messages
      Claude Code kept verbatim across it), duration_ms, dropped_tokens (Claude Code 2.1.2xx metadata)}],
      compact_summaries: [message ids], worksurface: {origin: count}}
    - `live`: {from_message, messages, tokens}: what the model still sees, from the last compact
      boundary on (the whole transcript when there is none), after the harness's own clearings
    - `harness_clearings`: [{message_id, index, trigger, pre_tokens, tokens_saved (the harness's
      figures), cleared_results (results it cleared that the transcript holds), tokens_cleared (their
      counted tokens before -> the placeholders')}] (Claude Code's microcompact)
    - `damaged_lines`: [{line, problem, cut}]: lines of the file that are not records, read around
      and kept as they are on write-back (see formats/damaged.py)
    - `unanswered_calls`, `orphan_results`, `queued_inputs` (counts)
    - `subagents`: {folder, agents: [{call_id, message_id, index, agent_type, description, goal (the
      prompt, in full), state, mode (foreground or background), task_id, result (capped), reported_tokens,
      tool_uses, sidechain: {path, agent_id, goal, messages, tokens, started, ended, model, compaction,
      error} or None, matched_by (agent id, prompt, time)}], unlinked: [sidechain, ...]} (Claude Code
      sidechain files in `<session-id>/subagents/`; `agent-acompact-*` are its compaction calls)
    - `estimated_texts`: only when some huge text was counted on a sample (see BoundedCounter)
    - `window`: {window, model, reason}: the context window the transcript shows it ran in (None: it
      shows none, the configured window holds) and why (a Claude Code session's model, 1M beta or
      sizes; a Codex rollout's model_context_window)
    - `notices`: what the reader found in the file and went on without (e.g. kept messages a compact
      boundary names that no record holds)
    """
    messages = transcript.messages
    prefix = stable_prefix_length(messages)
    calls = {c.id: c for m in messages for c in m.tool_calls}
    by_role = {role: {"messages": 0, "tokens": 0} for role in ROLES}
    categories = {"stable_prefix": 0, "dialogue": 0, "tool_calls": 0, "observations": 0, "other": 0}
    by_tool: dict[str, dict[str, int]] = {}
    results: list[tuple[int, ToolResult, str, ToolCall | None]] = []  # (tokens, result, message id, call)
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
                results.append((n, block, message.id, call))
            else:
                categories["other"] += n
    total = sum(v["tokens"] for v in by_role.values())
    live = harness_view(live_slice(messages))
    unanswered, orphan_results = orphans(messages)
    report: dict[str, Any] = {
        "path": transcript.path,
        "format": transcript.format,
        "messages": len(messages),
        "tokens": total,
        "by_role": by_role,
        "by_category": categories,
        "by_tool": dict(sorted(by_tool.items(), key=lambda kv: (-(kv[1]["call_tokens"] + kv[1]["result_tokens"]),
                                                                kv[0]))),
        "largest_results": [_largest(*r) for r in heapq.nlargest(LARGEST_RESULTS, results, key=lambda r: r[0])],
        "compaction": _compaction(messages, counter, transcript.format),
        "live": {"from_message": live[0].id if live and len(live) < len(messages) else None,
                 "messages": len(live), "tokens": counter.messages(live)},
        "harness_clearings": _clearings(messages, counter),
        "damaged_lines": [d.to_json() for d in damaged_lines(transcript.extras)],
        "unanswered_calls": len(unanswered),
        "orphan_results": len(orphan_results),
        "queued_inputs": len(transcript.queued_inputs),
        "subagents": sidechain_tree(transcript, counter).to_json(),
        "window": _window(transcript),
        "notices": [n for n in transcript.meta.get("notices", ()) if isinstance(n, str)],
    }
    estimated = getattr(counter, "estimated", 0)
    if estimated:       # only then: figures are exact unless this key says otherwise
        report["estimated_texts"] = estimated
    return report


def _clearings(messages: list[Message], counter: TokenCounter) -> list[dict[str, Any]]:
    """The harness's own clearings: where, its figures, and what they cleared of this transcript."""
    out = []
    for index, message in enumerate(messages):
        mark = clearing_of(message)
        if mark is None:
            continue
        edits = clearing_edits(messages[:index + 1], index)
        before = {r.call_id: counter.block(r) for m in messages[:index + 1] for r in m.tool_results
                  if r.call_id in {e.call_id for e in edits}}
        after = sum(counter.text(e.content) for e in edits)
        out.append({"message_id": message.id, "index": index, "trigger": mark.get("trigger"),
                    "pre_tokens": mark.get("pre_tokens"), "tokens_saved": mark.get("tokens_saved"),
                    "cleared_results": len(edits), "tokens_cleared": sum(before.values()) - after})
    return out


def _window(transcript: Transcript) -> dict[str, Any]:
    """The window the transcript shows, as `window_inference` (Claude Code) or the recorded one."""
    inferred = transcript.meta.get("window_inference")
    if isinstance(inferred, dict):
        return dict(inferred)
    recorded = recorded_window(transcript)
    return {"window": recorded, "model": transcript.meta.get("model"),
            "reason": "recorded by the harness" if recorded is not None else "not recorded"}


def _tool(by_tool: dict[str, dict[str, int]], name: str) -> dict[str, int]:
    return by_tool.setdefault(name, {"calls": 0, "call_tokens": 0, "results": 0, "result_tokens": 0})


def _compaction(messages: list[Message], counter: TokenCounter, fmt: str) -> dict[str, Any]:
    """Harness compact boundaries and summaries (metadata set by the adapters) and worksurface's own
    messages (by origin; never inferred from text)."""
    boundaries, summaries = [], []
    origins: dict[str, int] = {}
    for i, m in enumerate(messages):  # one pass: a report of 100k messages reads each once
        meta = m.meta
        if meta.get("compact_boundary") or m.origin is Origin.BOUNDARY:
            boundaries.append(_boundary(messages, i, counter, fmt))
        if meta.get("is_compact_summary"):
            summaries.append(m.id)
        if m.origin is not Origin.CONVERSATION:
            origins[m.origin.value] = origins.get(m.origin.value, 0) + 1
    return {"count": len(boundaries),
            "boundaries": boundaries,
            "compact_summaries": summaries,
            "worksurface": dict(sorted(origins.items()))}


def _boundary(messages: list[Message], index: int, counter: TokenCounter, fmt: str) -> dict[str, Any]:
    """One compaction: where, who made it, and its size before and after.

    Before: what the boundary's metadata says (Claude Code compactMetadata.preTokens, Codex, worksurface).
    Kept: the messages Claude Code kept verbatim across it (preservedMessages, relinked after the
    summary); with the compaction's duration and the tokens it dropped in all (Claude Code 2.1.2xx).
    After: the metadata's figure when it has one, and always the counted tokens of what the model was
    given at its first call after the compaction (the boundary up to the next assistant message), plus
    what that call's usage reports when the format records it (system prompt and tools included).
    """
    m = messages[index]
    # The messages Claude Code kept verbatim (relinked after the summary) were given too.
    end = next((j for j in range(index + 1, len(messages)) if messages[j].role == "assistant"
                and messages[j].meta.get(PRESERVED_BY) != m.id), len(messages))
    given = messages[index:end]
    summary = next((g.id for g in given if g.meta.get("is_compact_summary") or g.origin is Origin.SUMMARY), None)
    made_by = m.meta.get("made_by") or ("worksurface" if m.is_worksurface else fmt)
    return {"message_id": m.id, "index": index, "by": "worksurface" if made_by == "worksurface" else "harness",
            "made_by": made_by, "trigger": m.meta.get("trigger"), "pre_tokens": _int(m.meta.get("pre_tokens")),
            "post_tokens": _int(m.meta.get("post_tokens")), "counted_after": counter.messages(given),
            "reported_after": _usage_input(messages[end]) if end < len(messages) else None,
            "summary_id": summary, "kept": sum(1 for g in given if g.meta.get(PRESERVED_BY) == m.id),
            "duration_ms": m.meta.get("duration_ms"), "dropped_tokens": _int(m.meta.get("dropped_tokens"))}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage_input(message: Message) -> int | None:
    """The input size an assistant message's recorded usage reports (Anthropic fields: input plus
    cache reads and writes; OpenAI/Codex: input_tokens), or None when there is none."""
    usage = message.meta.get("usage")
    if not isinstance(usage, dict):
        return None
    parts = [usage.get(k) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
    numbers = [p for p in parts if isinstance(p, int)]
    return sum(numbers) if numbers else None
