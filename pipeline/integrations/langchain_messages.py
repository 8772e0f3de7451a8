"""Lossless conversion between LangChain message objects and worksurface `Message`s.

Each converted message keeps the original's fields (the JSON-safe ones) in `meta["langchain"]`, and
the digest it had when converted, so a message worksurface left unchanged converts back to an equal
object (the very object, when the originals are passed). Changed messages (a cleared tool result)
are rebuilt from their blocks plus the kept fields; worksurface's own messages become plain
LangChain messages marked with `response_metadata["worksurface_origin"]`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ..core.errors import FormatError
from ..core.model import Block, Image, Message, Opaque, Origin, Role, Text, Thinking, ToolCall, ToolResult

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

META_KEY = "langchain"
DIGEST_KEY = "langchain_digest"
ORIGIN_KEY = "worksurface_origin"
ROLES: dict[str, Role] = {"system": "system", "human": "user", "ai": "assistant",
                          "AIMessageChunk": "assistant", "tool": "tool"}
# ChatMessage carries a free-form role; these are the ones with a worksurface equivalent.
CHAT_ROLES: dict[str, Role] = {"system": "system", "user": "user", "human": "user",
                               "assistant": "assistant", "ai": "assistant", "tool": "tool"}
# Fields a rebuilt message must not inherit: they describe the old content, not the new one.
STALE_KWARGS = ("tool_calls", "function_call")


def message_id(message: "BaseMessage", index: int) -> str:
    """LangChain's id when set, else one derived from the position (stable: histories only grow)."""
    return message.id or f"lc-{index}"


def to_worksurface(messages: Sequence["BaseMessage"]) -> list[Message]:
    """Convert a LangChain history; FormatError names the index of a message that has no mapping."""
    return [_to_message(m, i) for i, m in enumerate(messages)]


class ConversionCache:
    """`to_worksurface` that remembers the previous call's conversions by message id: a graph hands
    the same history to every model call (the same objects within a run, equal copies from the
    checkpoint across runs), so each message is converted once. A hit must be the same object or
    an equal one (comparing is far cheaper than converting); anything else is converted again."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple["BaseMessage", Message]] = {}

    def to_worksurface(self, messages: Sequence["BaseMessage"]) -> list[Message]:
        seen: dict[str, tuple[BaseMessage, Message]] = {}
        out: list[Message] = []
        for i, m in enumerate(messages):
            mid = message_id(m, i)
            hit = self._seen.get(mid)
            converted = hit[1] if hit is not None and (hit[0] is m or hit[0] == m) else _to_message(m, i)
            seen[mid] = (m, converted)
            out.append(converted)
        self._seen = seen  # only the current history is held, so the cache never outgrows it
        return out


def from_worksurface(messages: Sequence[Message],
                     originals: Sequence["BaseMessage"] = ()) -> list["BaseMessage"]:
    """Convert a view back. Unchanged messages come back as the matching object of `originals` (the
    history they were converted from) or, without it, as an equal object rebuilt from meta."""
    by_id = {message_id(m, i): m for i, m in enumerate(originals)}
    return [lc for m in messages for lc in _from_message(m, by_id)]


# --- LangChain -> worksurface -------------------------------------------------------------------

def _to_message(lc: "BaseMessage", index: int) -> Message:
    role = _role(lc, index)
    origin = Origin(lc.response_metadata.get(ORIGIN_KEY, Origin.CONVERSATION.value))
    mid = message_id(lc, index)
    blocks = list(_content_blocks(lc.content, _tool_use_ids(lc)))
    if role == "tool":
        blocks = [_tool_result(lc, blocks, index)]
    for k, call in enumerate(getattr(lc, "tool_calls", None) or ()):
        blocks.append(ToolCall(call.get("id") or f"{mid}:call{k}", call["name"], call.get("args") or {}))
    message = Message(mid, role, tuple(blocks), origin)
    return replace(message, meta={META_KEY: {"type": lc.type, "fields": _json_fields(lc)},
                                  DIGEST_KEY: message.digest})


def _role(lc: "BaseMessage", index: int) -> Role:
    if lc.type == "chat":
        role = CHAT_ROLES.get(getattr(lc, "role", ""))
    else:
        role = ROLES.get(lc.type)
    if role is None:
        raise FormatError(f"LangChain message type {lc.type!r} has no worksurface equivalent",
                          record=str(index))
    return role


def _tool_use_ids(lc: "BaseMessage") -> set[str]:
    """Ids of calls that `tool_calls` already carries (Anthropic-style content repeats them)."""
    return {c["id"] for c in getattr(lc, "tool_calls", None) or () if c.get("id")}


def _content_blocks(content: Any, call_ids: set[str]) -> Iterator[Block]:
    if isinstance(content, str):
        if content:
            yield Text(content)
        return
    for part in content:
        if isinstance(part, str):
            yield Text(part)
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            yield Text(part["text"])
        elif kind == "thinking" and isinstance(part.get("thinking"), str):
            yield Thinking(part["thinking"], part.get("signature"))
        elif kind == "tool_use" and part.get("id") in call_ids:
            continue
        elif kind in ("image_url", "image"):
            yield _image(part) or Opaque.of(part)
        else:
            yield Opaque.of(part)


def _image(part: dict[str, Any]) -> Image | None:
    """The image forms LangChain passes through: OpenAI image_url, LangChain's standard block and
    Anthropic's source block. None for any other shape (kept as Opaque)."""
    url = part.get("image_url")
    url = url.get("url") if isinstance(url, dict) else url
    if url is None and part.get("url"):
        url = part["url"]
    if isinstance(url, str):
        if url.startswith("data:") and ";base64," in url:
            head, data = url[5:].split(";base64,", 1)
            return Image(head or "image/png", data)
        return Image(data=url, source="url")
    if isinstance(part.get("base64"), str):
        return Image(part.get("mime_type") or "image/png", part["base64"])
    source = part.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        return Image(source.get("media_type") or "image/png", source.get("data", ""))
    return None


def _tool_result(lc: "BaseMessage", blocks: list[Block], index: int) -> ToolResult:
    # A ToolMessage always has its call id; a ChatMessage with role "tool" has none to pair it with.
    call_id = getattr(lc, "tool_call_id", None)
    if not isinstance(call_id, str):
        raise FormatError("a tool message needs the tool_call_id of the call it answers", record=str(index))
    texts = [b.text if isinstance(b, Text) else b.json_text
             for b in blocks if isinstance(b, (Text, Opaque))]
    images = tuple(b for b in blocks if isinstance(b, Image))
    return ToolResult(call_id, "\n".join(texts), getattr(lc, "status", "success") == "error", images)


def _json_fields(lc: "BaseMessage") -> dict[str, Any]:
    """The message's fields that survive JSON (the session stores meta as JSON); an arbitrary tool
    `artifact` does not, and comes back only from the original object."""
    fields = lc.model_dump()
    if _jsonable(fields):  # the usual case: one check, not one per field
        return fields
    return {k: v for k, v in fields.items() if _jsonable(v)}


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# --- worksurface -> LangChain -------------------------------------------------------------------

def _from_message(m: Message, originals: dict[str, "BaseMessage"]) -> list["BaseMessage"]:
    kept = m.meta.get(META_KEY)
    if kept and m.meta.get(DIGEST_KEY) == m.digest:
        if m.id in originals:
            return [originals[m.id]]
        return [_class(kept["type"])(**kept["fields"])]
    fields = dict(kept["fields"]) if kept else {}
    original = originals.get(m.id)
    if m.origin is not Origin.CONVERSATION:
        fields["response_metadata"] = {**fields.get("response_metadata", {}), ORIGIN_KEY: m.origin.value}
    if m.role == "assistant":
        return [_rebuild_ai(m, fields)]
    out = [_rebuild_tool(m, r, k, fields, original) for k, r in enumerate(m.tool_results)]
    rest = [b for b in m.blocks if not isinstance(b, ToolResult)]
    if m.role == "tool" and out and rest:  # stray text in a tool message travels with its result
        last = out[-1]
        extra = _text_of(rest)
        last.content = (f"{last.content}\n{extra}" if isinstance(last.content, str)
                        else [*last.content, {"type": "text", "text": extra}])
    elif rest or not out:
        from langchain_core.messages import HumanMessage, SystemMessage
        cls = SystemMessage if m.role == "system" else HumanMessage
        out.append(cls(**_base(fields, m.id), content=_content(rest)))
    return out


def _rebuild_ai(m: Message, fields: dict[str, Any]) -> "BaseMessage":
    from langchain_core.messages import AIMessage
    calls = [{"name": c.name, "args": dict(c.input), "id": c.id, "type": "tool_call"} for c in m.tool_calls]
    kwargs = {k: v for k, v in fields.get("additional_kwargs", {}).items() if k not in STALE_KWARGS}
    return AIMessage(**{**_base(fields, m.id), "additional_kwargs": kwargs},
                     content=_content([b for b in m.blocks if not isinstance(b, ToolCall)]),
                     tool_calls=calls, invalid_tool_calls=fields.get("invalid_tool_calls", []),
                     usage_metadata=fields.get("usage_metadata"))


def _rebuild_tool(m: Message, result: ToolResult, k: int, fields: dict[str, Any],
                  original: "BaseMessage | None") -> "BaseMessage":
    from langchain_core.messages import ToolMessage
    content: Any = result.content
    if result.images:
        content = [{"type": "text", "text": result.content}] + [_image_part(i) for i in result.images]
    artifact = getattr(original, "artifact", None) if original is not None else fields.get("artifact")
    return ToolMessage(**_base(fields, m.id if k == 0 else f"{m.id}:{k}"), content=content,
                       tool_call_id=result.call_id, status="error" if result.is_error else "success",
                       artifact=artifact)


def _base(fields: dict[str, Any], mid: str) -> dict[str, Any]:
    return {"id": mid, "name": fields.get("name"), "additional_kwargs": fields.get("additional_kwargs", {}),
            "response_metadata": fields.get("response_metadata", {})}


def _content(blocks: Sequence[Block]) -> Any:
    """A plain string when the blocks are text only (the common case), else content parts."""
    if all(isinstance(b, Text) for b in blocks):
        return _text_of(blocks)
    return [_part(b) for b in blocks]


def _text_of(blocks: Sequence[Block]) -> str:
    return "\n".join(b.text if isinstance(b, Text) else _part_text(b) for b in blocks)


def _part_text(b: Block) -> str:
    return b.json_text if isinstance(b, Opaque) else getattr(b, "text", "")


def _part(b: Block) -> Any:
    if isinstance(b, Text):
        return {"type": "text", "text": b.text}
    if isinstance(b, Thinking):
        part = {"type": "thinking", "thinking": b.text}
        return {**part, "signature": b.signature} if b.signature else part
    if isinstance(b, Image):
        return _image_part(b)
    if isinstance(b, Opaque):
        return b.value
    raise FormatError(f"block {b!r} cannot be a LangChain content part")


def _image_part(image: Image) -> dict[str, Any]:
    url = image.data if image.source == "url" else f"data:{image.media_type};base64,{image.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _class(type_name: str) -> type["BaseMessage"]:
    from langchain_core.messages import (AIMessage, AIMessageChunk, ChatMessage, HumanMessage,
                                         SystemMessage, ToolMessage)
    classes: dict[str, type[BaseMessage]] = {
        "system": SystemMessage, "human": HumanMessage, "ai": AIMessage,
        "AIMessageChunk": AIMessageChunk, "tool": ToolMessage, "chat": ChatMessage}
    return classes[type_name]
