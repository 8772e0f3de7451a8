"""worksurface's own JSON form of messages: what the session log and stored edits hold."""

from __future__ import annotations

from typing import Any

from .model import Block, Image, Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult


def block_to_json(b: Block) -> dict[str, Any]:
    if isinstance(b, Text):
        return {"type": "text", "text": b.text}
    if isinstance(b, ToolCall):
        return {"type": "tool_call", "id": b.id, "name": b.name, "input": dict(b.input)}
    if isinstance(b, ToolResult):
        d: dict[str, Any] = {"type": "tool_result", "call_id": b.call_id, "content": b.content}
        if b.is_error:
            d["is_error"] = True
        if b.images:
            d["images"] = [block_to_json(i) for i in b.images]
        return d
    if isinstance(b, Thinking):
        return {"type": "thinking", "text": b.text, "signature": b.signature, "redacted": b.redacted}
    if isinstance(b, Image):
        return {"type": "image", "media_type": b.media_type, "data": b.data, "source": b.source,
                "width": b.width, "height": b.height}
    if isinstance(b, Opaque):
        return {"type": "opaque", "json": b.json_text}
    raise TypeError(f"not a block: {b!r}")


def block_from_json(d: dict[str, Any]) -> Block:
    t = d["type"]
    if t == "text":
        return Text(d["text"])
    if t == "tool_call":
        return ToolCall(d["id"], d["name"], d.get("input") or {})
    if t == "tool_result":
        return ToolResult(d["call_id"], d["content"], bool(d.get("is_error")),
                          tuple(block_from_json(i) for i in d.get("images", ())))  # type: ignore[misc]
    if t == "thinking":
        return Thinking(d["text"], d.get("signature"), bool(d.get("redacted")))
    if t == "image":
        return Image(d.get("media_type", "image/png"), d.get("data", ""), d.get("source", "base64"),
                     d.get("width"), d.get("height"))
    if t == "opaque":
        return Opaque(d["json"])
    raise ValueError(f"unknown block type {t!r}")


def message_to_json(m: Message, *, with_meta: bool = True) -> dict[str, Any]:
    d: dict[str, Any] = {"id": m.id, "role": m.role, "origin": m.origin.value,
                         "blocks": [block_to_json(b) for b in m.blocks]}
    if with_meta and m.meta:
        d["meta"] = dict(m.meta)
    return d


def message_from_json(d: dict[str, Any]) -> Message:
    return Message(d["id"], d["role"], tuple(block_from_json(b) for b in d["blocks"]),
                   Origin(d.get("origin", "conversation")), d.get("meta") or {})
