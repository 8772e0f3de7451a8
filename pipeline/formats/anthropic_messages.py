"""Anthropic Messages requests: `{"system": str | blocks, "messages": [...], ...}` or a bare message list.

Read: `system` becomes one leading system message (id "system"; its string-or-blocks form kept), each
API message one message (id = its index). Every block keeps its original JSON (cache_control,
citations, unknown keys; see rawkeep), so an unmodified request writes back as equal JSON.

Write exports a VALID request, which can change the message structure:
- leading system messages -> `system` (a string when it is one plain text, else a block list);
  a system message read from the `messages` list (role "system", which newer Claude Code versions
  send between turns) is written back there in place; other system messages later in the view ->
  user text;
- role "tool" -> user; consecutive same-role messages are merged into one turn;
- every tool_result moves to the user turn right after the assistant turn holding its tool_use,
  ahead of that turn's other blocks (a user turn is created when there is none); a call left
  without a result while more turns follow is answered with validate.NO_RESULT (as an error);
- the API requires the first turn to be the user's: when the view starts with an assistant turn,
  a minimal user text "(continued)" is inserted before it.
So read(write(x)) can have fewer messages than x; what is guaranteed is the same sequence of roles
and blocks after merging, and write(read(write(x))) == write(x).
"""

from __future__ import annotations

import functools
import json
from typing import Any, Sequence

from ..core.errors import FormatError
from ..core.model import Block, Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult, block_key
from . import ownmark
from .base import Transcript
from .jsondoc import as_messages, parse_json, peek_json
from .rawkeep import remember
from .reuse import Memo, Reuse, read_fresh
from .validate import check_pairing, check_unique_ids
from .anthropic_messages_records import (CONTINUED, EXTRA, FORM, IN_MESSAGES, NAME, RAW, SHAPE, SYSTEM_ID, TURN, block_json,
                                        user_text_json)
from .anthropic_messages_writer import cache_controls, export, with_cache_control

WRITABLE = True
_EXPECTED = 'an object with a "messages" list (and optional "system") or a JSON list of messages'

# Block types only the Messages API uses: their presence tells an Anthropic request from an OpenAI one.
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "document",
                               "server_tool_use", "web_search_tool_result", "search_result"})
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "refusal"})
_OPENAI_MESSAGE_KEYS = ("tool_calls", "tool_call_id", "function_call")
_ROLES = ("user", "assistant", "system")


def looks_anthropic(doc: Any) -> bool:
    """True for a chat-shaped document with positive Anthropic evidence and nothing OpenAI-only."""
    msgs = as_messages(doc)
    if msgs is None:
        return False
    evidence = isinstance(doc, dict) and (
        "system" in doc or "anthropic_version" in doc or str(doc.get("model", "")).startswith("claude"))
    for m in msgs:
        if not isinstance(m, dict) or m.get("role") not in _ROLES:
            return False
        if any(k in m for k in _OPENAI_MESSAGE_KEYS):
            return False
        content = m.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list):
            return False
        for b in content:
            t = b.get("type") if isinstance(b, dict) else None
            if t is None or t in _OPENAI_PARTS:
                return False
            if t in _ANTHROPIC_BLOCKS or (t == "image" and "source" in b) or "cache_control" in b:
                evidence = True
    return evidence


def sniff(text: str, path: str | None) -> bool:
    return looks_anthropic(peek_json(text))


def read(text: str, path: str | None = None) -> Transcript:
    return read_doc(parse_json(text, path, _EXPECTED), path)


def read_doc(doc: Any, path: str | None = None, reuse: Reuse | None = None) -> Transcript:
    """`read` of a parsed document; with `reuse`, messages equal to the previous request's are kept."""
    one = reuse.message if reuse is not None else read_fresh
    if reuse is not None:
        reuse.begin()
    messages: list[Message] = []
    if isinstance(doc, list):
        raw_msgs, meta = doc, {SHAPE: "list"}
    elif isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        raw_msgs = doc["messages"]
        meta = {**{k: v for k, v in doc.items() if k not in ("system", "messages")}, SHAPE: "request"}
        if "system" in doc:
            system = doc["system"]
            messages += one(SYSTEM_ID, system, lambda: _read_system(system, path), path)
    else:
        raise FormatError(f"expected {_EXPECTED}, found {type(doc).__name__}", path=path)
    for i, m in enumerate(raw_msgs):
        messages += one(i, m, functools.partial(_read_message, i, m, path), path)
    check_unique_ids(messages, path)
    check_pairing(messages, path)
    if reuse is not None:
        reuse.check_fields(meta, path)
        reuse.commit()
    return Transcript(messages, NAME, path, meta=meta)


def write(transcript: Transcript, messages: Sequence[Message] | None = None) -> str:
    return json.dumps(document(transcript, messages), ensure_ascii=False, indent=2)


def document(transcript: Transcript, messages: Sequence[Message] | None = None,
             memo: Memo | None = None) -> dict[str, Any] | list[Any]:
    """What `write` serializes: the request (or bare message list) as JSON values, for callers that
    send it on rather than save it (the gateway; its `memo` keeps each message's blocks as written)."""
    msgs = list(transcript.messages if messages is None else messages)
    own = transcript.format == NAME
    system, turns = export(msgs, transcript.path, memo)
    if own and transcript.meta.get(SHAPE) == "list" and system is None:
        return turns
    doc = {k: v for k, v in transcript.meta.items() if k != SHAPE} if own else {}
    if system is not None:
        doc["system"] = system
    doc["messages"] = turns
    return doc


# ---- read ------------------------------------------------------------------------------------

def _read_system(value: Any, path: str | None) -> list[Message]:
    if isinstance(value, str):
        value_blocks: list[Any] = [value]
        form = "string"
    elif isinstance(value, list):
        value_blocks, form = value, "list"
    else:
        raise FormatError(f"system must be a string or a list of blocks, not {type(value).__name__}",
                          path=path, record="system")
    return _split_marked(SYSTEM_ID, "system", value_blocks, form, {}, path, "system")


def _read_message(i: int, raw: Any, path: str | None) -> list[Message]:
    record = f"messages[{i}]"
    if not isinstance(raw, dict):
        raise FormatError(f"expected a message object, found {type(raw).__name__}", path=path, record=record)
    role = raw.get("role")
    if role not in _ROLES:
        raise FormatError(f"role must be user, assistant or system, not {role!r}", path=path, record=record)
    content = raw.get("content")
    if isinstance(content, str):
        raw_blocks: list[Any] = [content]
        form = "string"
    elif isinstance(content, list):
        raw_blocks, form = content, "list"
    else:
        raise FormatError(f"content must be a string or a list of blocks, not {type(content).__name__}",
                          path=path, record=record)
    extra = {k: v for k, v in raw.items() if k not in ("role", "content")}
    # A system message read from the list is written back there (IN_MESSAGES), not into `system`.
    in_list = {IN_MESSAGES: True} if role == "system" else {}
    return _split_marked(str(i), role, raw_blocks, form, extra, path, f"{record}.content", in_list)


def _split_marked(mid: str, role: str, raw_blocks: list[Any], form: str, extra: dict[str, Any],
                  path: str | None, record: str, conversation_meta: dict[str, Any] | None = None) -> list[Message]:
    """The message(s) of one API turn (or of `system`): in a user turn or `system`, a text block whose
    first line is worksurface's mark (see ownmark) is a message of its own, with the origin, role and
    id the mark gives; the blocks around it are the turn's conversation messages (`<id>.<block>`)."""
    groups: list[tuple[ownmark.Mark | None, list[Block], dict[str, list[Any]], int]] = []
    for j, b in enumerate(raw_blocks):
        where = record if form == "string" else f"{record}[{j}]"
        text_block = isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text"
                                            and isinstance(b.get("text"), str))
        mark: ownmark.Mark | None = None
        if text_block and role != "assistant":
            raw_text = b if isinstance(b, str) else b["text"]
            mark, text = ownmark.read_text(raw_text)
            block: Block = Text(text)
            raws: dict[str, list[Any]] = {}
            if mark is not None:
                # A marked block is given back as it was while unchanged (its mark names no id, say).
                raws[block_key(block)] = [b if isinstance(b, dict) else {"type": "text", "text": b}]
            elif not isinstance(b, str):
                remember(raws, block, b, user_text_json)
        else:
            if isinstance(b, str):
                block, raws = Text(b), {}
            else:
                raws = {}
                block = _block(b, raws, path, where)
        if mark is not None or not groups or groups[-1][0] is not None:
            groups.append((mark, [], {}, j))
        groups[-1][1].append(block)
        for key, values in raws.items():
            groups[-1][2].setdefault(key, []).extend(values)
    if not groups:
        groups.append((None, [], {}, 0))
    out: list[Message] = []
    used: set[str] = set()
    for n, (mark, blocks, raws, j) in enumerate(groups):
        meta: dict[str, Any] = {FORM: form}
        if n == 0 and extra:
            meta[EXTRA] = extra
        if raws:
            meta[RAW] = raws
        if len(groups) > 1:
            meta[TURN] = mid  # written back as the one turn it was read from
        gid = mid if n == 0 else f"{mid}.{j}"
        if mark is None:
            meta.update(conversation_meta or {})
            out.append(Message(gid, role, tuple(blocks), meta=meta))  # type: ignore[arg-type]
        else:
            own_id = mark.id if mark.id and mark.id not in used else gid
            out.append(Message(own_id, mark.role, tuple(blocks), mark.origin, {**meta, **mark.meta()}))
        used.add(out[-1].id)
    return out


def _block(b: Any, raws: dict[str, list[Any]], path: str | None, record: str) -> Block:
    if not isinstance(b, dict) or not isinstance(b.get("type"), str):
        raise FormatError('expected a content block object with a "type"', path=path, record=record)
    block = _block_from(b, path, record)
    remember(raws, block, b, block_json)
    return block


def _block_from(b: dict[str, Any], path: str | None, record: str) -> Block:
    t = b["type"]
    if t == "text" and isinstance(b.get("text"), str):
        return Text(b["text"])
    if t == "tool_use":
        if not (isinstance(b.get("id"), str) and isinstance(b.get("name"), str)
                and isinstance(b.get("input", {}), dict)):
            raise FormatError("tool_use needs a string id and name and an object input", path=path,
                              record=record)
        return ToolCall(b["id"], b["name"], b.get("input", {}))
    if t == "tool_result":
        if not isinstance(b.get("tool_use_id"), str):
            raise FormatError("tool_result needs a string tool_use_id", path=path, record=record)
        text, images = _result_content(b.get("content"), path, record)
        return ToolResult(b["tool_use_id"], text, bool(b.get("is_error")), images)
    if t == "thinking" and isinstance(b.get("thinking"), str):
        return Thinking(b["thinking"], b.get("signature"))
    if t == "redacted_thinking" and isinstance(b.get("data"), str):
        # The encrypted payload rides in `signature`: it is not text the model reads back as such.
        return Thinking("", b["data"], redacted=True)
    if t == "image":
        image = _image(b.get("source"))
        if image is not None:
            return image
    return Opaque.of(b)


def _result_content(content: Any, path: str | None, record: str) -> tuple[str, tuple[Image, ...]]:
    if content is None:
        return "", ()
    if isinstance(content, str):
        return content, ()
    if not isinstance(content, list):
        raise FormatError("tool_result content must be a string or a list of blocks", path=path,
                          record=record)
    texts = [p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text"
             and isinstance(p.get("text"), str)]
    images = [_image(p.get("source")) for p in content if isinstance(p, dict) and p.get("type") == "image"]
    return "\n".join(texts), tuple(i for i in images if i is not None)


def _image(source: Any) -> Image | None:
    if not isinstance(source, dict):
        return None
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        media = source.get("media_type")
        return Image(media if isinstance(media, str) else "image/png", source["data"])
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return Image(data=source["url"], source="url")
    return None


__all__ = ["CONTINUED", "IN_MESSAGES", "NAME", "WRITABLE", "cache_controls", "document", "looks_anthropic", "read", "read_doc",
           "sniff", "with_cache_control", "write"]
