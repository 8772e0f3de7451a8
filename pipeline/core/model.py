"""The message model every adapter reads into and every stage works on.

Messages and blocks are frozen and compare by content, so a view can be diffed, hashed and cached
without copying. Provenance (`origin`) is a field, never inferred from text: a tool result that
happens to contain `<agent-status>` is still a tool result.
"""

from __future__ import annotations

import hashlib
import json
import operator
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Iterable, Literal, Mapping, Sequence, Union

from .cached import cached

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")


class Origin(StrEnum):
    """Who made a message: the harness's conversation, or one of worksurface's own mechanisms."""

    CONVERSATION = "conversation"
    STATUS = "status"
    SUMMARY = "summary"
    BOUNDARY = "boundary"
    SNIP_MARKER = "snip_marker"
    COLLAPSE = "collapse"
    REINJECTION = "reinjection"
    RECOVERY = "recovery"


# Built once (`json.dumps` with options builds an encoder per call; this runs for every tool call read).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the form content hashes are taken over."""
    return _CANONICAL.encode(value)


@dataclass(frozen=True)
class Text:
    text: str
    type: Literal["text"] = field(default="text", init=False, repr=False)


@dataclass(frozen=True)
class Thinking:
    text: str
    signature: str | None = None
    redacted: bool = False
    type: Literal["thinking"] = field(default="thinking", init=False, repr=False)


@dataclass(frozen=True)
class Image:
    """An image block; `data` is base64 (or a URL when `source` is "url"). Counted by a fixed rule."""

    media_type: str = "image/png"
    data: str = ""
    source: Literal["base64", "url"] = "base64"
    width: int | None = None
    height: int | None = None
    type: Literal["image"] = field(default="image", init=False, repr=False)


@dataclass(frozen=True)
class ToolCall:
    """A model's request to run a tool. `input` is JSON-like; it is hashed through its canonical JSON."""

    id: str
    name: str
    input: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    input_json: str = field(default="", init=False, repr=False)
    type: Literal["tool_call"] = field(default="tool_call", init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "input_json", canonical_json(self.input))


@dataclass(frozen=True)
class ToolResult:
    """The harness's answer to a `ToolCall`. Text lives in `content`; images, if any, in `images`."""

    call_id: str
    content: str
    is_error: bool = False
    images: tuple[Image, ...] = ()
    type: Literal["tool_result"] = field(default="tool_result", init=False, repr=False)


@dataclass(frozen=True)
class Opaque:
    """A provider block worksurface does not model, kept byte for byte as its JSON text."""

    json_text: str
    type: Literal["opaque"] = field(default="opaque", init=False, repr=False)

    @classmethod
    def of(cls, value: Any) -> "Opaque":
        return cls(json.dumps(value, ensure_ascii=False))

    @property
    def value(self) -> Any:
        return json.loads(self.json_text)


Block = Union[Text, Thinking, Image, ToolCall, ToolResult, Opaque]


def block_key(block: Block) -> str:
    """A stable string identifying a block's content (used for hashing and token memoization)."""
    if isinstance(block, Text):
        return "t\x00" + block.text
    if isinstance(block, ToolResult):
        imgs = "".join(block_key(i) for i in block.images)
        return f"r\x00{block.call_id}\x00{int(block.is_error)}\x00{block.content}\x00{imgs}"
    if isinstance(block, ToolCall):
        return f"c\x00{block.id}\x00{block.name}\x00{block.input_json}"
    if isinstance(block, Thinking):
        return f"k\x00{block.text}\x00{block.signature or ''}\x00{int(block.redacted)}"
    if isinstance(block, Image):
        return f"i\x00{block.media_type}\x00{block.source}\x00{block.width}\x00{block.height}\x00{block.data}"
    if isinstance(block, Opaque):
        return "o\x00" + block.json_text
    raise TypeError(f"not a block: {block!r}")


@dataclass(frozen=True)
class Message:
    """One message of a transcript or view.

    `meta` carries adapter and pipeline details (the source record for lossless round trips, the stage
    that made a marker, cwd, timestamps); it does not take part in equality or hashing.
    """

    id: str
    role: Role
    blocks: tuple[Block, ...]
    origin: Origin = Origin.CONVERSATION
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"message {self.id!r}: role must be one of {ROLES}, not {self.role!r}")
        if not isinstance(self.blocks, tuple):
            object.__setattr__(self, "blocks", tuple(self.blocks))

    @cached
    def digest(self) -> str:
        """Content hash over id, role, origin and blocks; what the session log compares."""
        h = hashlib.blake2b(digest_size=16)
        h.update(f"{self.id}\x01{self.role}\x01{self.origin.value}".encode())
        for b in self.blocks:
            h.update(b"\x02")
            h.update(block_key(b).encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    @cached  # asked of every message by most fact extractors and the status derivation
    def text(self) -> str:
        """The plain text blocks joined (not tool calls or results)."""
        return "\n".join(b.text for b in self.blocks if isinstance(b, Text))

    # Cached: stages look these up for every message on every call.
    @cached
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(b for b in self.blocks if isinstance(b, ToolCall))

    @cached
    def tool_results(self) -> tuple[ToolResult, ...]:
        return tuple(b for b in self.blocks if isinstance(b, ToolResult))

    @cached  # asked of every message by the requests, constraints, approaches and the status bar
    def user_turn(self) -> bool:
        """A real user message (see `is_user_turn`)."""
        return (self.role == "user" and self.origin is Origin.CONVERSATION
                and not self.tool_results and not _blank(self.text)
                and not self.meta.get("is_meta") and not self.meta.get("is_compact_summary")
                and self.meta.get("kind") != "tool_output")  # aider's harness notices

    @property
    def is_worksurface(self) -> bool:
        return self.origin is not Origin.CONVERSATION

    def with_blocks(self, blocks: Iterable[Block], **meta: Any) -> "Message":
        """A copy with other blocks (and extra meta); id, role and origin kept."""
        return replace(self, blocks=tuple(blocks), meta={**self.meta, **meta} if meta else self.meta)


def visible_text(block: Block) -> str:
    """The text a model sees for a block, as used for token counting and probe matching."""
    if isinstance(block, Text):
        return block.text
    if isinstance(block, ToolResult):
        return block.content
    if isinstance(block, ToolCall):
        return f"{block.name} {block.input_json}"
    if isinstance(block, Thinking):
        return block.text
    if isinstance(block, Opaque):
        return block.json_text
    return ""


def message_text(message: Message) -> str:
    """Everything of a message that a model would read, as one string."""
    return "\n".join(t for t in (visible_text(b) for b in message.blocks) if t)


def view_text(messages: Sequence[Message]) -> str:
    return "\n".join(message_text(m) for m in messages)


def _blank(text: str) -> bool:
    """Empty or only whitespace (without copying the text, as `strip` would)."""
    return not text or text.isspace()


def is_user_turn(message: Message) -> bool:
    """A real user message: role user, conversation origin, with text and no tool results (worked out
    once per message: messages are immutable)."""
    return message.user_turn


def call_index(messages: Sequence[Message]) -> dict[str, int]:
    """Map each tool-call id to the index of the message that makes the call."""
    return {c.id: i for i, m in enumerate(messages) for c in m.tool_calls}


def result_index(messages: Sequence[Message]) -> dict[str, int]:
    """Map each tool-call id to the index of the message that carries its result."""
    return {r.call_id: i for i, m in enumerate(messages) for r in m.tool_results}


def shared_length(messages: Sequence[Message], prefix: Sequence[Message]) -> int:
    """How many leading message objects `messages` shares with `prefix` (identity): where a view a
    stage read before was first changed (by an edit that fired, a rewind), so its reading can go on
    from there instead of from the start."""
    if all(map(operator.is_, prefix, messages)):  # map stops at the shorter one: no copies
        return min(len(messages), len(prefix))
    return next(i for i, (a, b) in enumerate(zip(prefix, messages)) if a is not b)


def begins_with(messages: Sequence[Message], prefix: Sequence[Message]) -> bool:
    """`messages` starts with the very message objects of `prefix`: a view that only grew since
    `prefix` was read (an identity check per message at C speed, no digest)."""
    if messages is prefix:
        return True
    return len(messages) >= len(prefix) and all(map(operator.is_, prefix, messages))


def orphans(messages: Sequence[Message]) -> tuple[set[str], set[str]]:
    """(call ids without a result, result call ids without a call earlier in the list)."""
    calls, results = call_index(messages), result_index(messages)
    missing_results = {c for c in calls if c not in results}
    missing_calls = {r for r, i in results.items() if r not in calls or calls[r] > i}
    return missing_results, missing_calls


def message_time(message: Message) -> float | None:
    """The message's own timestamp (Claude Code records one), as epoch seconds."""
    stamp = message.meta.get("timestamp")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
