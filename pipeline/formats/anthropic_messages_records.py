"""The vocabulary the Anthropic Messages reader and writer share: the meta keys a message read from a
request keeps (how its content was given, its unmodeled keys, the raw JSON of its blocks, the API turn
it was split from), the JSON of a block as the API writes it, and of the text blocks of worksurface's own messages (their
mark tagged, see ownmark) and of the conversation (as they are)."""

from __future__ import annotations

from typing import Any

from ..core.model import Block, Image, Opaque, Text, Thinking, ToolCall, ToolResult
from . import ownmark
from .rawkeep import raw_meta_key

NAME = "anthropic"
SYSTEM_ID = "system"
CONTINUED = "(continued)"  # the user text put first when a view would start with an assistant turn
SHAPE = "_shape"                   # Transcript.meta: "list" or "request"
EXTRA = f"{NAME}.extra"           # unmodeled message keys
FORM = f"{NAME}.content"          # "string" or "list": how content (or system) was given
RAW = raw_meta_key(NAME)
TURN = f"{NAME}.turn"             # the API turn a message was split from at a worksurface mark
IN_MESSAGES = f"{NAME}.in_messages"  # a system message that sat in the `messages` list, not `system`


def own_json(block: Block, mark: ownmark.Mark) -> Any:
    """The API JSON of the text block of a message worksurface made (`mark` says which)."""
    assert isinstance(block, Text)
    return {"type": "text", "text": ownmark.marked_text(mark, block.text)}


def user_text_json(block: Block) -> Any:
    """The API JSON of a conversation text block in a user turn or `system`: its text exactly (a mark
    is known by its tag, never by its shape: see ownmark)."""
    assert isinstance(block, Text)
    return {"type": "text", "text": block.text}


def block_json(b: Block) -> Any:
    if isinstance(b, Text):
        return {"type": "text", "text": b.text}
    if isinstance(b, ToolCall):
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": dict(b.input)}
    if isinstance(b, ToolResult):
        d: dict[str, Any] = {"type": "tool_result", "tool_use_id": b.call_id}
        if b.images:
            text = [{"type": "text", "text": b.content}] if b.content else []
            d["content"] = text + [image_json(i) for i in b.images]
        else:
            d["content"] = b.content
        if b.is_error:
            d["is_error"] = True
        return d
    if isinstance(b, Thinking):
        if b.redacted:
            return {"type": "redacted_thinking", "data": b.signature or ""}
        d = {"type": "thinking", "thinking": b.text}
        if b.signature is not None:
            d["signature"] = b.signature
        return d
    if isinstance(b, Image):
        return image_json(b)
    if isinstance(b, Opaque):
        return b.value
    raise TypeError(f"not a block: {b!r}")


def image_json(i: Image) -> dict[str, Any]:
    if i.source == "url":
        return {"type": "image", "source": {"type": "url", "url": i.data}}
    return {"type": "image", "source": {"type": "base64", "media_type": i.media_type, "data": i.data}}
