"""Fitting a transcript to the format it is written in, and saying what did not fit.

A Transcript carries its source format's own material: `extras` (Claude Code progress records, aider
prose around a published chat, OpenHands state events), request-level `meta` (OpenAI `tools`,
SWE-agent `info`), and per message the source record (`raw`, `<format>.source`, namespaced raw
blocks). A writer of another format would copy that verbatim: an aider `{"markdown": ...}` extra
written into a Claude Code file makes it unreadable. `convert` returns a transcript and messages
with none of it, and with the blocks the target cannot hold removed, plus a `Dropped` report.

Where the target has no field for something the model saw, it goes into the text instead:
- `is_error` of a tool result: OpenAI chat, SWE-agent, mini-swe-agent and aider have no error flag,
  so the result text starts with ERROR_MARKER (`[error] `); the model still sees that the call failed;
- tool calls in aider (which has none) and calls other than a shell command in mini-swe-agent (whose
  one tool is bash): the call becomes a line of the assistant's text (CALL_AS_TEXT, name, JSON input)
  and its result the harness's output shown to the model (counted under `carried_as_text`).
Dropped where the target has no place (counted): thinking blocks (kept within a format, and between
Claude Code and Anthropic, whose signatures are Anthropic's), images (not in SWE-agent, mini-swe-agent,
aider, nor in OpenHands tool results), opaque blocks (another API's JSON: kept within a format, and
between Claude Code and Anthropic, which share block shapes), the source's non-message records, and
its fields no writer of the target reads (counted by name).

Also here: how a JSON format marks worksurface's own messages (ORIGIN_FIELD) so they read back with
their origin, as Claude Code's `worksurfaceOrigin` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from ..core.errors import FormatError
from ..core.model import Block, Image, Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult
from .base import Transcript

# What a tool result that failed starts with in a format without an error flag. Square brackets and a
# fixed word: easy for a model to read and for a script to find; never produced by the adapters' reads.
ERROR_MARKER = "[error] "
# Field on a record (SWE-agent history entry, mini-swe-agent message, OpenHands event) that says
# which of worksurface's mechanisms made it; absent on the harness's own records.
ORIGIN_FIELD = "worksurface_origin"
# How a tool call reads in a format that has none (aider): this prefix, the tool's name, its JSON input.
CALL_AS_TEXT = "[tool call]"
# aider's meta kind for harness output shown to the model (see aider.py).
TOOL_OUTPUT_KIND = "tool_output"

# Formats whose thinking and opaque blocks are the same API's (Anthropic's): they pass between them.
# Elsewhere both stay only within their own format (a Codex reasoning item is OpenAI's, encrypted).
_ANTHROPIC_FAMILY = frozenset({"claude-code", "anthropic"})
# Formats that can hold each kind of block / field (TOOL_CALL_FORMATS: any tool call, as a call).
_THINKING = _ANTHROPIC_FAMILY | {"codex", "openai-responses"}  # Responses items hold reasoning
_IMAGES = frozenset({"claude-code", "anthropic", "openai", "openhands", "codex", "openai-responses"})
_TOOL_RESULT_IMAGES = frozenset({"claude-code", "anthropic", "openai", "codex", "openai-responses"})
_ERROR_FLAG = frozenset({"claude-code", "anthropic", "openhands", "codex"})
TOOL_CALL_FORMATS = frozenset({"claude-code", "anthropic", "openai", "swe-agent", "openhands", "codex",
                               "openai-responses"})
# Formats whose only tool is a shell: other calls are written as text.
_SHELL_ONLY = frozenset({"mini-swe-agent"})
# Tool names that run one shell command line (Claude Code, SWE-agent, OpenHands, Codex, generic).
SHELL_TOOLS = frozenset({"bash", "execute_bash", "shell", "run", "run_shell_command", "exec_command"})
# Per-message meta a target's writer uses when the message came from another format (the rest of a
# foreign message's adapter fields has no place there and is reported under `fields`).
_CARRIED_META: Mapping[str, frozenset[str]] = {
    "claude-code": frozenset({"timestamp", "is_sidechain", "is_meta", "is_compact_summary",
                              "compact_boundary", "trigger", "pre_tokens", "usage", "api_message_id"}),
    "openhands": frozenset({"timestamp"}),
    "codex": frozenset({"timestamp", "is_meta", "is_compact_summary", "compact_boundary", "trigger", "pre_tokens",
                        "usage"}),
}
# Meta keys the pipeline (not an adapter) sets; they are not source fields and always pass through.
PIPELINE_META = frozenset({"interrupted", "edited_calls", "epoch", "reinjector", "covered_ids", "stage",
                           "made_by", "post_tokens", "summarizer", "call_ids"})
# Source-record keys: the whole record a message was read from (never another format's business).
_RECORD_META = frozenset({"raw", "events"})


@dataclass
class Dropped:
    """What a write could not carry into its target format (counts), and what it carried as text."""

    source: str
    target: str
    thinking: int = 0
    images: int = 0
    opaque: int = 0
    records: int = 0                                   # non-message records (extras) of the source
    fields: dict[str, int] = field(default_factory=dict)   # source fields with no place, by name
    carried: dict[str, int] = field(default_factory=dict)  # written into the text instead, by name

    @property
    def empty(self) -> bool:
        return not (self.thinking or self.images or self.opaque or self.records or self.fields)

    def to_json(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "dropped": {
            "thinking": self.thinking, "images": self.images, "opaque": self.opaque,
            "records": self.records, "fields": dict(sorted(self.fields.items()))},
            "carried_as_text": dict(sorted(self.carried.items()))}

    def describe(self) -> str:
        """One line for the CLI: what was dropped and what went into the text."""
        parts = [f"{n} {what}" for what, n in (("thinking blocks", self.thinking), ("images", self.images),
                                                ("opaque blocks", self.opaque),
                                                (f"{self.source} records", self.records)) if n]
        parts += [f"{n}x {name}" for name, n in sorted(self.fields.items())]
        line = f"{self.source} -> {self.target}: dropped " + (", ".join(parts) if parts else "nothing")
        if self.carried:
            line += "; carried as text: " + ", ".join(f"{n}x {k}" for k, n in sorted(self.carried.items()))
        return line


@dataclass
class Conversion:
    transcript: Transcript
    messages: list[Message]
    dropped: Dropped


def convert(transcript: Transcript, target: str, messages: Sequence[Message] | None = None) -> Conversion:
    """`transcript` (and the view `messages`, default its own) made fit for a writer of `target`.

    Same format: only what the format cannot hold is changed (an `is_error` with no field); the
    transcript keeps its extras and meta, so an unmodified file writes back as it was read.
    Another format: extras, request meta and source records are dropped as well.
    """
    msgs = list(transcript.messages if messages is None else messages)
    dropped = Dropped(transcript.format, target)
    same = transcript.format == target
    as_text = _calls_as_text(msgs, target)
    family = same or {transcript.format, target} <= _ANTHROPIC_FAMILY
    out = [_fit_message(m, target, family, same, as_text, dropped) for m in msgs]
    if same:
        return Conversion(transcript, out, dropped)
    dropped.records = len(transcript.extras)
    for key in transcript.meta:
        if not key.startswith("_"):
            dropped.fields[key] = dropped.fields.get(key, 0) + 1
    as_text = _calls_as_text(transcript.messages, target)
    originals = [_fit_message(m, target, family, False, as_text, Dropped(transcript.format, target))
                 for m in transcript.messages]
    fitted = Transcript(originals, target, transcript.path, [], {}, list(transcript.queued_inputs))
    return Conversion(fitted, out, dropped)


def shell_command(call: ToolCall) -> str | None:
    """The command line of a call that runs one shell command (any harness's shell tool), else None."""
    command = call.input.get("command")
    if not isinstance(command, str):
        return None
    return command if call.name.lower() in SHELL_TOOLS or set(call.input) == {"command"} else None


def _calls_as_text(messages: Sequence[Message], target: str) -> set[str]:
    """Ids of the calls the target cannot hold as calls: all in aider, non-shell ones in mini-swe-agent."""
    if target in TOOL_CALL_FORMATS:
        return set()
    calls = [c for m in messages for c in m.tool_calls]
    if target in _SHELL_ONLY:
        return {c.id for c in calls if shell_command(c) is None}
    return {c.id for c in calls}


def _fit_message(m: Message, target: str, family: bool, same: bool, as_text: set[str],
                 dropped: Dropped) -> Message:
    blocks: list[Block] = []
    changed = False
    for b in m.blocks:
        fitted = _fit_block(b, target, m.role, family, dropped)
        if fitted is not None and _call_id(fitted) in as_text:
            fitted = _as_text(fitted, dropped)
        changed = changed or fitted is not b
        if fitted is not None:
            blocks.append(fitted)
    own_fields = dropped if m.origin is Origin.CONVERSATION else None
    meta = m.meta if same else _foreign_meta(m.meta, target, own_fields)
    if not changed and meta is m.meta:
        return m
    role = m.role
    if (m.tool_calls or m.tool_results) and not any(isinstance(b, (ToolCall, ToolResult)) for b in blocks):
        # All its calls or results became text: a result is the harness's output shown to the model.
        if m.tool_calls:
            role = "assistant"
        else:
            role, meta = "user", {**meta, "kind": TOOL_OUTPUT_KIND}
    return replace(m, role=role, blocks=tuple(blocks), meta=meta)


def _call_id(b: Block) -> str | None:
    return b.id if isinstance(b, ToolCall) else b.call_id if isinstance(b, ToolResult) else None


def _as_text(b: Block, dropped: Dropped) -> Block:
    """A call as a line of text (CALL_AS_TEXT, its name, its JSON input); a result as its text."""
    if isinstance(b, ToolCall):
        dropped.carried["tool_calls"] = dropped.carried.get("tool_calls", 0) + 1
        return Text(f"{CALL_AS_TEXT} {b.name} {b.input_json}")
    assert isinstance(b, ToolResult)
    return Text(b.content)


def _fit_block(b: Block, target: str, role: str, family: bool, dropped: Dropped) -> Block | None:
    """`family`: source and target read the same API's thinking and opaque blocks."""
    if isinstance(b, Thinking) and not (family and target in _THINKING):
        dropped.thinking += 1
        return None
    if isinstance(b, Image) and (target not in _IMAGES or (target == "openhands" and role != "user")):
        dropped.images += 1
        return None
    if isinstance(b, Opaque) and not family:
        dropped.opaque += 1
        return None
    if isinstance(b, ToolResult):
        result = b
        if result.images and target not in _TOOL_RESULT_IMAGES:
            dropped.images += len(result.images)
            result = replace(result, images=())
        if result.is_error and target not in _ERROR_FLAG:
            dropped.carried["is_error"] = dropped.carried.get("is_error", 0) + 1
            content = result.content
            result = replace(result, is_error=False,
                             content=content if content.startswith(ERROR_MARKER) else ERROR_MARKER + content)
        return result
    return b


def _foreign_meta(meta: Mapping[str, Any], target: str, dropped: Dropped | None) -> dict[str, Any]:
    """A foreign message's meta without its source record (a namespaced key `<format>.x` belongs to
    that format's writer alone). For a message of the conversation (`dropped` given), the source's
    fields the target has no place for are dropped and counted; a worksurface message's meta is the
    pipeline's and is kept."""
    carried = _CARRIED_META.get(target, frozenset())
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if key in _RECORD_META or "." in key:
            continue
        if dropped is None or key in PIPELINE_META or key in carried:
            out[key] = value
        elif value not in (None, False, "", [], {}):
            dropped.fields[key] = dropped.fields.get(key, 0) + 1
    return out


def origin_of(record: Mapping[str, Any], path: str | None = None, where: str | None = None) -> Origin:
    """The origin a record was marked with (ORIGIN_FIELD); CONVERSATION when unmarked."""
    try:
        return Origin(record.get(ORIGIN_FIELD, Origin.CONVERSATION.value))
    except ValueError:
        raise FormatError(f"unknown {ORIGIN_FIELD} {record.get(ORIGIN_FIELD)!r} (expected one of: "
                          f"{', '.join(o.value for o in Origin)})", path=path, record=where) from None


def mark_origin(record: dict[str, Any], message: Message) -> dict[str, Any]:
    """`record` marked with the message's origin when worksurface made the message."""
    if message.origin is not Origin.CONVERSATION:
        record[ORIGIN_FIELD] = message.origin.value
    return record
