"""Anthropic's `context_management` request field, honoured by worksurface's own stages in front of any
upstream (the field is not forwarded, so an upstream that does not know it never sees it).

- `clear_tool_uses_20250919` is microcompact with the client's trigger (`input_tokens`, default
  100,000; or a number of `tool_uses`), `keep` (tool uses, default 3), `clear_at_least` and
  `exclude_tools`, fired on the trigger alone (no price rule: the client asked for this trigger).
  worksurface clears only results of tools whose output can be fetched again (reads, searches,
  shells ...), and keeps the calls' inputs (`clear_tool_inputs` is reported as not applied).
- `clear_thinking_20251015` drops thinking blocks of all but the newest `keep` assistant turns
  that have thinking (default 1; `"all"` keeps every one).
- `compact_20260112` is autocompact at the client's trigger (`input_tokens`, default 150,000) with
  its `instructions`; the summary is answered as a `compaction` block before the model's content
  (alone, with stop_reason "compaction", under `pause_after_compaction`).
What was applied is reported as `context_management.applied_edits`, in the API's shape.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..core.config import Config
from ..core.model import Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult
from ..core.tokens import TokenCounter

CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
COMPACT = "compact_20260112"
DEFAULT_CLEAR_TRIGGER = 100_000
DEFAULT_KEEP_TOOL_USES = 3
DEFAULT_COMPACT_TRIGGER = 150_000
DEFAULT_KEEP_THINKING_TURNS = 1
# The smallest post-compact target a low compact trigger gets (Config's own floor).
COMPACT_TARGET_FLOOR = 500
# A trigger never reached: the stage is on only when its own edit asks for it.
NEVER = 10**12


class ContextManagementError(ValueError):
    """A `context_management` field this gateway cannot read (the request is forwarded unchanged)."""


@dataclass(frozen=True)
class ClearToolUses:
    trigger_tokens: int | None = DEFAULT_CLEAR_TRIGGER
    trigger_tool_uses: int | None = None
    keep: int = DEFAULT_KEEP_TOOL_USES
    clear_at_least: int = 0
    exclude_tools: tuple[str, ...] = ()
    clear_tool_inputs: bool | tuple[str, ...] = False     # True: every cleared call's; names: those tools' only


@dataclass(frozen=True)
class Compact:
    trigger_tokens: int = DEFAULT_COMPACT_TRIGGER
    instructions: str | None = None
    pause: bool = False


@dataclass(frozen=True)
class ContextManagement:
    """The edits one request asks for (each None when not asked)."""

    clear_tool_uses: ClearToolUses | None = None
    keep_thinking_turns: int | None = None      # None: not asked; -1: "all"
    compact: Compact | None = None

    @property
    def empty(self) -> bool:
        return self.clear_tool_uses is None and self.keep_thinking_turns is None and self.compact is None


def parse(body: Mapping[str, Any]) -> ContextManagement | None:
    """The request's `context_management`, or None when it has none."""
    field_ = body.get("context_management")
    if field_ is None:
        return None
    edits = field_.get("edits") if isinstance(field_, dict) else None
    if not isinstance(edits, list):
        raise ContextManagementError("context_management.edits must be a list")
    out = ContextManagement()
    for i, edit in enumerate(edits):
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind == CLEAR_TOOL_USES:
            out = dataclasses.replace(out, clear_tool_uses=_clear_tool_uses(edit))
        elif kind == CLEAR_THINKING:
            out = dataclasses.replace(out, keep_thinking_turns=_keep_thinking(edit.get("keep")))
        elif kind == COMPACT:
            out = dataclasses.replace(out, compact=_compact(edit))
        else:
            raise ContextManagementError(f"context_management.edits[{i}]: unknown type {kind!r}")
    return out


def _value(spec: Any, kinds: Sequence[str], what: str) -> tuple[str, int] | None:
    if spec is None:
        return None
    if not (isinstance(spec, dict) and spec.get("type") in kinds and isinstance(spec.get("value"), int)):
        raise ContextManagementError(f"{what} must be {{\"type\": {' or '.join(kinds)}, \"value\": <int>}}")
    return str(spec["type"]), int(spec["value"])


def _clear_tool_uses(edit: Mapping[str, Any]) -> ClearToolUses:
    trigger = _value(edit.get("trigger"), ("input_tokens", "tool_uses"), "clear_tool_uses trigger")
    keep = _value(edit.get("keep"), ("tool_uses",), "clear_tool_uses keep")
    least = _value(edit.get("clear_at_least"), ("input_tokens",), "clear_tool_uses clear_at_least")
    exclude = edit.get("exclude_tools") or ()
    if not isinstance(exclude, (list, tuple)) or not all(isinstance(t, str) for t in exclude):
        raise ContextManagementError("clear_tool_uses exclude_tools must be a list of tool names")
    inputs = edit.get("clear_tool_inputs")
    if isinstance(inputs, list):
        if not all(isinstance(t, str) for t in inputs):
            raise ContextManagementError("clear_tool_uses clear_tool_inputs must be a boolean or a list of tool names")
        inputs = tuple(inputs)
    elif inputs is not None and not isinstance(inputs, bool):
        raise ContextManagementError("clear_tool_uses clear_tool_inputs must be a boolean or a list of tool names")
    return ClearToolUses(
        trigger_tokens=DEFAULT_CLEAR_TRIGGER if trigger is None else (trigger[1] if trigger[0] == "input_tokens" else None),
        trigger_tool_uses=trigger[1] if trigger is not None and trigger[0] == "tool_uses" else None,
        keep=DEFAULT_KEEP_TOOL_USES if keep is None else keep[1], clear_at_least=0 if least is None else least[1],
        exclude_tools=tuple(exclude), clear_tool_inputs=inputs or False)


def _keep_thinking(keep: Any) -> int:
    if keep is None:
        return DEFAULT_KEEP_THINKING_TURNS
    if keep == "all" or (isinstance(keep, dict) and keep.get("type") == "all"):
        return -1
    value = _value(keep, ("thinking_turns",), "clear_thinking keep")
    assert value is not None
    return value[1]


def _compact(edit: Mapping[str, Any]) -> Compact:
    trigger = _value(edit.get("trigger"), ("input_tokens",), "compact trigger")
    instructions = edit.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise ContextManagementError("compact instructions must be a string")
    return Compact(DEFAULT_COMPACT_TRIGGER if trigger is None else trigger[1], instructions,
                   bool(edit.get("pause_after_compaction")))


def configure(base: Config, cm: ContextManagement | None, transcript: Sequence[Message]) -> Config:
    """The session configuration for a request: `base` with the stages the client's edits describe."""
    if cm is None or (cm.clear_tool_uses is None and cm.compact is None):
        return base
    over: dict[str, Any] = {}
    clear = cm.clear_tool_uses
    if clear is not None:
        trigger = clear.trigger_tokens
        if clear.trigger_tool_uses is not None:
            uses = sum(len(m.tool_calls) for m in transcript)
            trigger = 0 if uses > clear.trigger_tool_uses else NEVER
        over["microcompact"] = {"trigger_tokens": trigger, "keep_recent": clear.keep, "protect_tokens": 0,
                                "clear_at_least": clear.clear_at_least,
                                "excluded_tools": tuple(base.microcompact.excluded_tools) + clear.exclude_tools}
        over["pricing"] = {"firing_rule": False}
    if cm.compact is not None:
        trigger = cm.compact.trigger_tokens
        window = max(base.window, trigger)
        # The threshold is window - max_output - buffer: make it the client's trigger.
        over.update(window=window, max_output=0, autocompact_buffer=window - trigger)
        if base.post_compact_target >= trigger:     # the compacted view must land well under the trigger
            over["post_compact_target_tokens"] = max(COMPACT_TARGET_FLOOR, trigger // 4)
        over["autocompact"] = {"economic_from": 1.0}
    return base.with_overrides(**over)


def cleared_results(transcript: Sequence[Message], view: Sequence[Message], counter: TokenCounter) -> tuple[set[str], int]:
    """The call ids of the tool results the view shows cleared (content replaced) against what the
    client sent, and the tokens that saved."""
    sent = {b.call_id: b for m in view for b in m.blocks if isinstance(b, ToolResult)}
    cleared: set[str] = set()
    tokens = 0
    for m in transcript:
        for b in m.blocks:
            now = sent.get(b.call_id) if isinstance(b, ToolResult) else None
            if now is not None and isinstance(b, ToolResult) and now.content != b.content:
                cleared.add(b.call_id)
                tokens += max(0, counter.text(b.content) - counter.text(now.content))
    return cleared, tokens


def clear_tool_inputs(view: list[Message], calls: set[str], tools: bool | tuple[str, ...],
                      counter: TokenCounter) -> tuple[list[Message], int]:
    """The view with the inputs of `calls` (of every tool, or of the named `tools`) cleared to `{}`,
    and the tokens that saved."""
    out, tokens = [], 0
    for m in view:
        blocks = [ToolCall(b.id, b.name, {}) if isinstance(b, ToolCall) and b.id in calls and b.input
                  and (tools is True or (isinstance(tools, tuple) and b.name in tools)) else b for b in m.blocks]
        if any(new is not old for new, old in zip(blocks, m.blocks)):
            tokens += sum(counter.text(old.input_json) - counter.text(new.input_json)
                          for new, old in zip(blocks, m.blocks) if new is not old and isinstance(old, ToolCall)
                          and isinstance(new, ToolCall))
            m = m.with_blocks(blocks)
        out.append(m)
    return out, max(0, tokens)


def cleared_tool_uses(cleared: int, tokens: int) -> dict[str, Any] | None:
    """The `applied_edits` entry of a clear_tool_uses edit (None when nothing was cleared)."""
    if not cleared:
        return None
    return {"type": CLEAR_TOOL_USES, "cleared_tool_uses": cleared, "cleared_input_tokens": tokens}


def clear_thinking(view: list[Message], keep: int, counter: TokenCounter) -> tuple[list[Message], dict[str, Any] | None]:
    """The view without the thinking of all but the newest `keep` assistant turns that have some
    (the turn answering a tool call keeps its thinking: the API needs it), and what was cleared."""
    if keep < 0:
        return view, None
    with_thinking = [i for i, m in enumerate(view) if m.role == "assistant" and m.origin is Origin.CONVERSATION
                     and any(isinstance(b, Thinking) for b in m.blocks)]
    drop = set(with_thinking[:max(0, len(with_thinking) - max(keep, 1 if _in_tool_loop(view) else keep))])
    if not drop:
        return view, None
    out, tokens = [], 0
    for i, m in enumerate(view):
        if i in drop:
            kept = [b for b in m.blocks if not isinstance(b, Thinking)]
            tokens += sum(counter.text(b.text) for b in m.blocks if isinstance(b, Thinking))
            m = m.with_blocks(kept) if kept else m.with_blocks([])
        out.append(m)
    out = [m for m in out if m.blocks]
    return out, {"type": CLEAR_THINKING, "cleared_thinking_turns": len(drop), "cleared_input_tokens": tokens}


def _in_tool_loop(view: Sequence[Message]) -> bool:
    """The request answers tool calls (the last user turn holds results): the assistant turn that
    made them is still the model's current turn."""
    last = next((m for m in reversed(view) if m.role in ("user", "tool")), None)
    return last is not None and bool(last.tool_results)


def compaction_block(summary: str) -> dict[str, Any]:
    return {"type": "compaction", "content": summary}


def summary_key(summary: str) -> str:
    """How the gateway remembers a compaction summary it handed out (a digest, not the text)."""
    return hashlib.blake2b(summary.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def fold_compaction_blocks(messages: list[Message], known: set[str]) -> list[Message]:
    """The transcript as the model should see it when the client sends `compaction` blocks back:
    one this gateway handed out (its summary is already in the session's view) is dropped; any
    other is honoured as the API does, dropping what came before it and continuing from its summary."""
    found = [(i, j) for i, m in enumerate(messages) if m.role == "assistant"
             for j, b in enumerate(m.blocks) if _compaction_content(b) is not None]
    if not found:
        return messages
    # A block with no content is a compaction that failed: a no-op, like one this gateway made.
    foreign = [(i, j) for i, j in found
               if (text := _compaction_content(messages[i].blocks[j])) and summary_key(text) not in known]
    out = list(messages)
    if foreign:
        i, j = foreign[-1]
        summary = _compaction_content(out[i].blocks[j]) or ""
        head = [m for m in out[:i] if m.role == "system"]
        rest = out[i].with_blocks(out[i].blocks[j + 1:])
        out = head + [Message(f"{out[i].id}.compaction", "user", (Text(summary),))] + [rest] + out[i + 1:]
    cleaned = []
    for m in out:
        if m.role == "assistant" and any(_compaction_content(b) is not None for b in m.blocks):
            m = m.with_blocks([b for b in m.blocks if _compaction_content(b) is None])
        if m.blocks:
            cleaned.append(m)
    return cleaned


def _compaction_content(block: Any) -> str | None:
    if not isinstance(block, Opaque) or '"compaction"' not in block.json_text:
        return None
    value = block.value
    if isinstance(value, dict) and value.get("type") == "compaction":
        content = value.get("content")
        return content if isinstance(content, str) else ""
    return None
