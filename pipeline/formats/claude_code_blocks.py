"""Anthropic-style content blocks as Claude Code stores them, to and from the message model.

Decoding is a pure function of the stored JSON, so the writer can tell whether a message still equals
its source record by decoding that record again. Encoding takes the original block as a template where
there is one, so fields worksurface does not model (`caller`, `citations`, key order) survive an edit.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..core.model import Block, Image, Opaque, Text, Thinking, ToolCall, ToolResult

# A tool result's list content is shown to the model as its text parts in order; joining them with a
# newline keeps them apart without inventing structure.
TOOL_RESULT_TEXT_JOIN = "\n"


class BlockError(ValueError):
    """A content block that cannot be read; the caller adds file and line."""


def decode_content(content: Any) -> tuple[Block, ...]:
    """`message.content` (a string or a list of blocks) as model blocks."""
    if isinstance(content, str):
        return (Text(content),)
    if isinstance(content, list):
        return tuple([decode_block(b) for b in content])
    raise BlockError(f"message.content must be a string or a list, not {type(content).__name__}")


def decode_block(block: Any) -> Block:
    if not isinstance(block, dict):
        raise BlockError(f"content block is a {type(block).__name__}, not an object")
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return Text(text) if isinstance(text, str) else Text(_string(block, "text", "text block"))
    if kind == "tool_use":
        call_id, name, args = block.get("id"), block.get("name"), block.get("input", {})
        if not isinstance(call_id, str) or not isinstance(name, str) or not isinstance(args, dict):
            raise BlockError("tool_use block needs a string id and name and an object input")
        return ToolCall(call_id, name, args)
    if kind == "tool_result":
        return _decode_tool_result(block)
    if kind == "thinking":
        return Thinking(_string(block, "thinking", "thinking block", default=""),
                        _string(block, "signature", "thinking block", default=None))
    if kind == "redacted_thinking":
        # The encrypted payload is not text the model reads; it rides in `signature`.
        return Thinking("", _string(block, "data", "redacted_thinking block", default=None), redacted=True)
    if kind == "image":
        image = _decode_image(block)
        if image is not None:
            return image
    # A block type worksurface does not model (server tool use, documents, ...): kept as it is.
    return Opaque(json.dumps(block, ensure_ascii=False))


def _string(block: dict[str, Any], key: str, what: str, **default: Any) -> Any:
    """`block[key]` when it is a string; the default (if given) when absent or null; else an error
    (a number where text belongs is a damaged file, not text to invent)."""
    value = block.get(key)
    if value is None and "default" in default:
        return default["default"]
    if not isinstance(value, str):
        raise BlockError(f"{what}: '{key}' must be a string, not {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return "missing" if value is None else type(value).__name__


def _decode_tool_result(block: dict[str, Any]) -> ToolResult:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise BlockError("tool_result block without a string tool_use_id")
    content = block.get("content")
    images: list[Image] = []
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = []
        for item in content:
            image = _decode_image(item) if isinstance(item, dict) and item.get("type") == "image" else None
            if image is not None:
                images.append(image)
            elif isinstance(item, dict) and item.get("type") == "text":
                parts.append(_string(item, "text", f"tool_result {call_id} text part"))
            else:  # an unmodelled part (document, search result): the model still reads it
                parts.append(json.dumps(item, ensure_ascii=False))
        text = TOOL_RESULT_TEXT_JOIN.join(parts)
    else:
        raise BlockError(f"tool_result {call_id}: content must be a string or a list")
    is_error = block.get("is_error", False)
    if is_error is not None and not isinstance(is_error, bool):
        raise BlockError(f"tool_result {call_id}: is_error must be true or false, not {_kind(is_error)}")
    return ToolResult(call_id, text, bool(is_error), tuple(images))


def _decode_image(block: dict[str, Any]) -> Image | None:
    """An image block as an Image; None for a source kind worksurface does not model (kept opaque)."""
    source = block.get("source")
    if not isinstance(source, dict):
        raise BlockError(f"image block: 'source' must be an object, not {_kind(source)}")
    if source.get("type") == "base64":
        return Image(_string(source, "media_type", "image source", default="image/png"),
                     _string(source, "data", "image source", default=""), "base64")
    if source.get("type") == "url":
        return Image(data=_string(source, "url", "image source", default=""), source="url")
    return None


def encode_content(blocks: Sequence[Block], original: Any = None, *, as_string: bool) -> Any:
    """Blocks as `message.content`: a plain string when `as_string` and there is one text block,
    else a list; `original` (the stored content) supplies a template for each block it still has."""
    if as_string and len(blocks) == 1 and isinstance(blocks[0], Text):
        return blocks[0].text
    templates = original if isinstance(original, list) else []
    return [encode_block(b, _template(b, i, templates)) for i, b in enumerate(blocks)]


def _template(block: Block, index: int, templates: list[Any]) -> dict[str, Any] | None:
    """The stored block this one came from: by call id for calls and results, else by position."""
    if isinstance(block, (ToolCall, ToolResult)):
        kind, key, value = (("tool_use", "id", block.id) if isinstance(block, ToolCall)
                            else ("tool_result", "tool_use_id", block.call_id))
        return next((t for t in templates
                     if isinstance(t, dict) and t.get("type") == kind and t.get(key) == value), None)
    if index < len(templates) and isinstance(templates[index], dict):
        wanted = {Text: ("text",), Thinking: ("thinking", "redacted_thinking"), Image: ("image",)}
        if templates[index].get("type") in wanted.get(type(block), ()):
            return templates[index]
    return None


def encode_block(block: Block, template: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = dict(template) if template else {}
    if isinstance(block, Text):
        out.update(type="text", text=block.text)
    elif isinstance(block, ToolCall):
        out.update(type="tool_use", id=block.id, name=block.name, input=dict(block.input))
    elif isinstance(block, ToolResult):
        out.update(type="tool_result", tool_use_id=block.call_id)
        out["content"] = _encode_result_content(block, out.get("content"))
        if block.is_error or "is_error" in out:
            out["is_error"] = block.is_error
    elif isinstance(block, Thinking):
        out = _encode_thinking(block, out)
    elif isinstance(block, Image):
        out.update(type="image", source=_encode_image_source(block))
    elif isinstance(block, Opaque):
        out = block.value
    else:
        raise TypeError(f"not a block: {block!r}")
    return out


def _encode_result_content(block: ToolResult, original: Any) -> Any:
    """A string, unless the stored content was a list or there are images to carry."""
    if not block.images and not isinstance(original, list):
        return block.content
    parts: list[dict[str, Any]] = []
    if block.content or not block.images:
        parts.append({"type": "text", "text": block.content})
    parts.extend({"type": "image", "source": _encode_image_source(i)} for i in block.images)
    return parts


def _encode_thinking(block: Thinking, out: dict[str, Any]) -> dict[str, Any]:
    if block.redacted:
        out = {k: v for k, v in out.items() if k not in ("thinking", "signature", "data")}
        out["type"] = "redacted_thinking"
        if block.signature is not None:
            out["data"] = block.signature
        return out
    out = {k: v for k, v in out.items() if k not in ("data", "signature")}
    out.update(type="thinking", thinking=block.text)
    if block.signature is not None:
        out["signature"] = block.signature
    return out


def _encode_image_source(image: Image) -> dict[str, Any]:
    if image.source == "url":
        return {"type": "url", "url": image.data}
    return {"type": "base64", "media_type": image.media_type, "data": image.data}
