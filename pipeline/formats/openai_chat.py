"""OpenAI Chat Completions messages: a JSON list of messages, or a request `{"model", "messages", ...}`.

Read keeps every field it does not model (message `name`, `refusal`, an explicit `id`; request `model`,
`tools`, ...) so an unmodified transcript writes back as equal JSON; each part and tool call keeps its
original JSON (see rawkeep), so an unchanged `arguments` string is reproduced byte for byte.
Write makes the view valid for the API: `tool` messages right after the assistant message holding
the calls; worksurface's own messages become `system` (if system) or `user` text named
`worksurface_<origin>` (see ownmark: read gives them their origin back); a tool result
found inside a non-tool message becomes its own `tool` message; a call left without a result while
more messages follow gets a placeholder result (validate.NO_RESULT); `Thinking` blocks are not sent
(the API takes no reasoning input); tool-result images follow the tool messages as one user message
(tool messages carry text only).
"""

from __future__ import annotations

import functools
import json
import re
from collections import defaultdict
from typing import Any, Sequence

from ..core import strictjson
from ..core.errors import FormatError
from ..core.model import Block, Image, Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult
from . import anthropic_messages, mini_swe_agent, ownmark
from .base import Transcript
from .jsondoc import as_messages, content_text, expect, parse_json, peek_json
from .rawkeep import Recall, raw_meta_key, remember
from .reuse import Memo, Reuse, made, read_fresh
from .validate import NO_RESULT, check_pairing

NAME = "openai"
WRITABLE = True

_ROLES = ("system", "developer", "user", "assistant", "tool")
_EXPECTED = 'a JSON list of chat messages or an object with a "messages" list'
# Message fields the model represents; every other field is kept verbatim in meta.
_MODELED = ("role", "content", "tool_calls", "tool_call_id")
# Meta keys (namespaced so a transcript read from another format never leaks into this one).
ROLE_NAME = "role_name"            # "developer" for a developer message read as role system
_EXTRA = f"{NAME}.extra"           # unmodeled message fields
_FORM = f"{NAME}.content"          # how `content` was given: string, null, list or absent
_RAW = raw_meta_key(NAME)
SHAPE = "_shape"                   # Transcript.meta: "list" or "request"
_DATA_URL = re.compile(r"^data:([^;,]+);base64,(.*)$", re.DOTALL)
_ABSENT = object()


def sniff(text: str, path: str | None) -> bool:
    doc = peek_json(text)
    msgs = as_messages(doc)
    if msgs is None or not all(isinstance(m, dict) and m.get("role") in _ROLES for m in msgs):
        return False
    # Anthropic requests and mini-swe-agent runs are chat-shaped too; they have their own adapters.
    return not anthropic_messages.looks_anthropic(doc) and not mini_swe_agent.sniff(text, path)


def read(text: str, path: str | None = None) -> Transcript:
    return read_doc(parse_json(text, path, _EXPECTED), path)


def read_doc(doc: Any, path: str | None = None, reuse: Reuse | None = None) -> Transcript:
    """`read` of a parsed document; with `reuse`, messages equal to the previous request's are kept."""
    one = reuse.message if reuse is not None else read_fresh
    if reuse is not None:
        reuse.begin()
    if isinstance(doc, list):
        raw_msgs, meta = doc, {SHAPE: "list"}
    elif isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        raw_msgs = doc["messages"]
        meta = {**{k: v for k, v in doc.items() if k != "messages"}, SHAPE: "request"}
    else:
        raise FormatError(f"expected {_EXPECTED}, found {type(doc).__name__}", path=path)
    messages = [one(i, m, functools.partial(_read_message, i, m, path), path) for i, m in enumerate(raw_msgs)]
    ids = [m.id for m in messages]
    if len(set(ids)) != len(ids):
        dup = next(x for x in ids if ids.count(x) > 1)
        raise FormatError(f"message id {dup!r} is used twice", path=path, record=dup)
    check_pairing(messages, path)
    if reuse is not None:
        reuse.check_fields(meta, path)
        reuse.commit()
    return Transcript(messages, NAME, path, meta=meta)


def write(transcript: Transcript, messages: Sequence[Message] | None = None) -> str:
    return json.dumps(document(transcript, messages), ensure_ascii=False, indent=2)


def document(transcript: Transcript, messages: Sequence[Message] | None = None,
             memo: Memo | None = None) -> dict[str, Any] | list[Any]:
    """What `write` serializes, as JSON values (for callers that send the request on; the gateway's
    `memo` keeps each message as written)."""
    msgs = list(transcript.messages if messages is None else messages)
    own = transcript.format == NAME
    fields = {k: v for k, v in transcript.meta.items() if k != SHAPE} if own else {}
    out = _export(msgs, transcript.path, memo)
    if own and transcript.meta.get(SHAPE) == "list":
        return out
    return {**fields, "messages": out}


# ---- read ------------------------------------------------------------------------------------

def _read_message(i: int, raw: Any, path: str | None) -> Message:
    record = f"messages[{i}]"
    if not isinstance(raw, dict):
        raise FormatError(f"expected a message object, found {type(raw).__name__}", path=path, record=record)
    role = raw.get("role")
    if role not in _ROLES:
        raise FormatError(f"role {role!r} is not one of {', '.join(_ROLES)}", path=path, record=record)
    extra = {k: v for k, v in raw.items() if k not in _MODELED}
    if raw.get("tool_calls") in (None, []) and "tool_calls" in raw:
        extra["tool_calls"] = raw["tool_calls"]     # an empty or null list is kept as given
    raws: dict[str, list[Any]] = {}
    form = "absent" if "content" not in raw else _form(raw["content"], path, record)
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str):
            raise FormatError("tool message without a string tool_call_id", path=path, record=record)
        result = ToolResult(call_id, content_text(raw.get("content")))
        if form != "string":
            remember(raws, result, raw.get("content"), lambda _: result.content)
        blocks: list[Block] = [result]
    else:
        blocks = _content_blocks(raw.get("content"), raws, path, record)
        blocks += _tool_calls(raw, role, raws, path, record)
    meta: dict[str, Any] = {_FORM: form}
    if extra:
        meta[_EXTRA] = extra
    if raws:
        meta[_RAW] = raws
    if role == "developer":
        meta[ROLE_NAME] = "developer"
    mid = str(expect(raw["id"], (str, int), path, record, "id")) if raw.get("id") is not None else str(i)
    mark = ownmark.from_name(raw.get("name"), role, "\n".join(b.text for b in blocks if isinstance(b, Text)))
    if mark is not None:
        # A message worksurface wrote (its `name` says so): its origin back, the mark not kept as a field.
        if extra.pop("name", None) is not None and not extra:
            meta.pop(_EXTRA, None)
        meta.pop(ROLE_NAME, None)
        return Message(mid, mark.role, tuple(blocks), mark.origin, {**meta, **mark.meta()})
    return Message(mid, "system" if role == "developer" else role, tuple(blocks), meta=meta)


def _form(content: Any, path: str | None, record: str) -> str:
    if content is None:
        return "null"
    if isinstance(content, str):
        return "string"
    if isinstance(content, list):
        return "list"
    raise FormatError(f"content must be a string, null or a list of parts, not {type(content).__name__}",
                      path=path, record=record)


def _content_blocks(content: Any, raws: dict[str, list[Any]], path: str | None, record: str) -> list[Block]:
    if content is None:
        return []
    if isinstance(content, str):
        return [Text(content)]
    blocks: list[Block] = []
    for j, part in enumerate(content):
        if not isinstance(part, dict):
            raise FormatError("expected a content part object", path=path, record=f"{record}.content[{j}]")
        block = _part_block(part)
        remember(raws, block, part, _part_json)
        blocks.append(block)
    return blocks


def _part_block(part: dict[str, Any]) -> Block:
    if part.get("type") == "text" and isinstance(part.get("text"), str):
        return Text(part["text"])
    if part.get("type") == "image_url":
        ref = part.get("image_url")
        url = ref.get("url") if isinstance(ref, dict) else ref
        if isinstance(url, str):
            m = _DATA_URL.match(url)
            return Image(m.group(1), m.group(2)) if m else Image(data=url, source="url")
    return Opaque.of(part)


def _tool_calls(raw: dict[str, Any], role: str, raws: dict[str, list[Any]], path: str | None,
                record: str) -> list[Block]:
    calls = raw.get("tool_calls")
    if not calls:
        return []
    if role != "assistant" or not isinstance(calls, list):
        raise FormatError("tool_calls must be a list on an assistant message", path=path, record=record)
    out: list[Block] = []
    for k, tc in enumerate(calls):
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not (isinstance(fn, dict) and isinstance(tc.get("id"), str) and isinstance(fn.get("name"), str)):
            raise FormatError('expected a tool call {"id", "function": {"name", "arguments"}}',
                              path=path, record=f"{record}.tool_calls[{k}]")
        call = ToolCall(tc["id"], fn["name"], _arguments(fn.get("arguments", "")))
        remember(raws, call, tc, _call_json)
        out.append(call)
    return out


def _arguments(args: Any) -> dict[str, Any]:
    """Parsed arguments; a string that is not a JSON object is kept whole under `_raw`."""
    if isinstance(args, dict):
        return args
    if isinstance(args, str):
        try:
            value = strictjson.loads(args)
        except ValueError:  # broken JSON, or a number it would not write back
            return {"_raw": args}
        if isinstance(value, dict):
            return value
    return {"_raw": args}


# ---- write -----------------------------------------------------------------------------------

def _export(msgs: list[Message], path: str | None, memo: Memo | None = None) -> list[dict[str, Any]]:
    owner: dict[str, int] = {}
    results: dict[int, list[tuple[ToolResult, Message]]] = defaultdict(list)
    for i, m in enumerate(msgs):
        for r in m.tool_results:
            if r.call_id not in owner:
                raise FormatError(f"tool result for call {r.call_id!r} has no tool call before it",
                                  path=path, record=f"{m.id} (message {i})")
            results[owner[r.call_id]].append((r, m))
        for c in m.tool_calls:
            owner[c.id] = i
    for i, m in enumerate(msgs[:-1]):       # a call at the very end may still be run by the caller
        answered = {r.call_id for r, _ in results.get(i, ())}
        results[i] += [(ToolResult(c.id, NO_RESULT, is_error=True), m) for c in m.tool_calls
                       if c.id not in answered]
    out: list[dict[str, Any]] = []
    for i, m in enumerate(msgs):
        d = made(memo, NAME, m, lambda m: _message_dict(m, path))
        if d is not None:
            out.append(d)
        images: list[Image] = []
        for r, src in results.get(i, ()):
            out.append(made(memo, f"{NAME} result {r.call_id}", src, lambda src: _tool_dict(r, src)))
            images.extend(r.images)
        if images:
            out.append({"role": "user", "content": [_part_json(img) for img in images]})
    return out


def _message_dict(m: Message, path: str | None) -> dict[str, Any] | None:
    """The message without its tool results (they are written after their call); None if empty."""
    if m.origin is not Origin.CONVERSATION:
        role = "system" if m.role == "system" else "user"
    elif m.role == "system" and m.meta.get(ROLE_NAME) == "developer":
        role = "developer"
    else:
        role = m.role
    content_blocks: list[Block] = [b for b in m.blocks if not isinstance(b, (ToolCall, ToolResult, Thinking))]
    if m.tool_calls and role != "assistant":
        raise FormatError(f"tool call in a {role} message cannot be written", path=path, record=m.id)
    if not content_blocks and not m.tool_calls and m.blocks:
        return None         # only tool results (written after their call) or thinking (not sent)
    if role == "tool":
        role = "user"       # text left in a tool message without results: say it as the user
    recall = Recall(m, NAME)
    d: dict[str, Any] = {"role": role, **m.meta.get(_EXTRA, {})}
    if m.origin is not Origin.CONVERSATION:
        d["name"] = ownmark.name_for(m, role)  # so a later read knows worksurface made it
    content = _content(content_blocks, m.meta.get(_FORM), role, recall)
    if content is not _ABSENT:
        d["content"] = content
    if m.tool_calls:
        d["tool_calls"] = [recall.get(c, _call_json) for c in m.tool_calls]
    return d


def _content(blocks: list[Block], form: str | None, role: str, recall: Recall) -> Any:
    if not blocks:
        empty = None if role == "assistant" else ""
        return {"absent": _ABSENT, "null": None, "list": []}.get(form or "", empty)
    if form != "list" and len(blocks) == 1 and isinstance(blocks[0], Text):
        return blocks[0].text
    return [recall.get(b, _part_json) for b in blocks]


def _tool_dict(r: ToolResult, src: Message) -> dict[str, Any]:
    own_message = src.role == "tool" and len(src.blocks) == 1
    d: dict[str, Any] = {"role": "tool", **(src.meta.get(_EXTRA, {}) if own_message else {})}
    d["tool_call_id"] = r.call_id
    content = Recall(src, NAME).get(r, lambda _: r.content)
    if not (own_message and src.meta.get(_FORM) == "absent" and content == ""):
        d["content"] = content
    return d


def _part_json(b: Block) -> Any:
    if isinstance(b, Text):
        return {"type": "text", "text": b.text}
    if isinstance(b, Image):
        url = b.data if b.source == "url" else f"data:{b.media_type};base64,{b.data}"
        return {"type": "image_url", "image_url": {"url": url}}
    if isinstance(b, Opaque):
        return b.value
    raise TypeError(f"not a content block: {b!r}")


def _call_json(c: ToolCall) -> dict[str, Any]:
    inp = dict(c.input)
    args = inp["_raw"] if set(inp) == {"_raw"} else json.dumps(inp, ensure_ascii=False)
    return {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": args}}
