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

import dataclasses
import functools
import json
from dataclasses import dataclass
from typing import Any, Sequence

from ..core.errors import FormatError
from ..core.model import Block, Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult, block_key
from . import ownmark
from .base import Transcript
from .jsondoc import as_messages, parse_json, peek_json
from .rawkeep import Recall, raw_meta_key, remember
from .reuse import Memo, Reuse, made, read_fresh
from .validate import NO_RESULT, check_pairing, check_unique_ids

NAME = "anthropic"
WRITABLE = True

_EXPECTED = 'an object with a "messages" list (and optional "system") or a JSON list of messages'
SYSTEM_ID = "system"
CONTINUED = "(continued)"  # the user text put first when a view would start with an assistant turn
SHAPE = "_shape"                   # Transcript.meta: "list" or "request"
_EXTRA = f"{NAME}.extra"           # unmodeled message keys
_FORM = f"{NAME}.content"          # "string" or "list": how content (or system) was given
_RAW = raw_meta_key(NAME)
_TURN = f"{NAME}.turn"             # the API turn a message was split from at a worksurface mark
IN_MESSAGES = f"{NAME}.in_messages"  # a system message that sat in the `messages` list, not `system`
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
    system, turns = _export(msgs, transcript.path, memo)
    if own and transcript.meta.get(SHAPE) == "list" and system is None:
        return turns
    doc = {k: v for k, v in transcript.meta.items() if k != SHAPE} if own else {}
    if system is not None:
        doc["system"] = system
    doc["messages"] = turns
    return doc


def with_cache_control(message: Message, cache_control: Any | None) -> Message:
    """`message` whose blocks carry no `cache_control`, except its last cacheable block (not a
    thinking block), which gets `cache_control` when it is given: how the gateway places a client's
    prompt-cache breakpoint on the view without leaving stale ones from earlier requests."""
    raws: dict[str, list[Any]] = {key: [_without_cache_control(r) for r in options]
                                  for key, options in (message.meta.get(_RAW) or {}).items()}
    if cache_control is not None:
        last = next((b for b in reversed(message.blocks) if not isinstance(b, Thinking)), None)
        if last is not None:
            key = block_key(last)
            options = raws.get(key) or [_text_maker(message, last)(last)]
            options[-1] = {**options[-1], "cache_control": cache_control}
            raws[key] = options
    meta = {k: v for k, v in message.meta.items() if k != _RAW}
    return dataclasses.replace(message, meta={**meta, _RAW: raws} if raws else meta)


def cache_controls(message: Message) -> list[Any]:
    """The `cache_control` values the message's blocks carry as the client sent them."""
    return [r["cache_control"] for options in (message.meta.get(_RAW) or {}).values() for r in options
            if isinstance(r, dict) and r.get("cache_control") is not None]


def _without_cache_control(raw: Any) -> Any:
    return {k: v for k, v in raw.items() if k != "cache_control"} if isinstance(raw, dict) else raw


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
                remember(raws, block, b, _user_text_json)
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
        meta: dict[str, Any] = {_FORM: form}
        if n == 0 and extra:
            meta[_EXTRA] = extra
        if raws:
            meta[_RAW] = raws
        if len(groups) > 1:
            meta[_TURN] = mid  # written back as the one turn it was read from
        gid = mid if n == 0 else f"{mid}.{j}"
        if mark is None:
            meta.update(conversation_meta or {})
            out.append(Message(gid, role, tuple(blocks), meta=meta))  # type: ignore[arg-type]
        else:
            own_id = mark.id if mark.id and mark.id not in used else gid
            out.append(Message(own_id, mark.role, tuple(blocks), mark.origin, {**meta, **mark.meta()}))
        used.add(out[-1].id)
    return out


def _own_json(block: Block, mark: ownmark.Mark) -> Any:
    """The API JSON of the text block of a message worksurface made (`mark` says which)."""
    assert isinstance(block, Text)
    return {"type": "text", "text": ownmark.marked_text(mark, block.text)}


def _user_text_json(block: Block) -> Any:
    """The API JSON of a conversation text block in a user turn or `system`: escaped so that it can
    never pass for worksurface's mark."""
    assert isinstance(block, Text)
    return {"type": "text", "text": ownmark.conversation_text(block.text)}


def _block(b: Any, raws: dict[str, list[Any]], path: str | None, record: str) -> Block:
    if not isinstance(b, dict) or not isinstance(b.get("type"), str):
        raise FormatError('expected a content block object with a "type"', path=path, record=record)
    block = _block_from(b, path, record)
    remember(raws, block, b, _block_json)
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


# ---- write -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Item:
    """One block of an exported turn: its API JSON, where it came from, the call it makes or answers."""

    api: Any
    src: tuple[int, int] | None = None     # (message index, block index); None if export made it up
    call: str | None = None                # tool_use id
    answers: str | None = None             # tool_result's tool_use id


_Turn = tuple[str, list[_Item]]


def _export(msgs: list[Message], path: str | None, memo: Memo | None = None) -> tuple[Any, list[dict[str, Any]]]:
    k = 0
    while k < len(msgs) and msgs[k].role == "system" and not msgs[k].meta.get(IN_MESSAGES):
        k += 1
    system = _system_value(msgs[:k]) if k else None
    rest = msgs[k:]
    turns = _place_results(_merged(_items(rest, path, memo)))
    if turns and turns[0][0] == "assistant":
        turns.insert(0, ("user", [_Item({"type": "text", "text": CONTINUED})]))
    return system, [_turn_json(role, items, rest) for role, items in turns]


def _system_value(head: list[Message]) -> Any:
    only = head[0]
    if (len(head) == 1 and only.meta.get(_FORM) != "list" and len(only.blocks) == 1
            and isinstance(only.blocks[0], Text)):
        return Recall(only, NAME).get(only.blocks[0], _text_maker(only, only.blocks[0]))["text"]
    out = []
    for m in head:
        recall = Recall(m, NAME)
        out += [recall.get(b, _text_maker(m, b)) for b in m.blocks]
    return out


def _text_maker(m: Message, b: Block) -> Any:
    """How a block of a user turn or of `system` is written: text marked when worksurface made the
    message (its only block), conversation text escaped so it cannot pass for a mark."""
    if not isinstance(b, Text) or m.role == "assistant":
        return _block_json
    if m.is_worksurface and len(m.blocks) == 1:
        mark = ownmark.mark_of(m)
        return lambda block: _own_json(block, mark)
    return _user_text_json


def _blocks_json(m: Message) -> list[Any]:
    """The API JSON of each of the message's blocks (its own where it kept it)."""
    recall = Recall(m, NAME)
    return [recall.get(b, _text_maker(m, b)) for b in m.blocks]


def _items(rest: list[Message], path: str | None, memo: Memo | None = None) -> list[tuple[str, _Item]]:
    """(role, item) for every block; results are the user's; pairing checked as we go."""
    out: list[tuple[str, _Item]] = []
    calls: set[str] = set()
    answered: set[str] = set()
    for mi, m in enumerate(rest):
        role = _turn_role(m)
        written = made(memo, NAME, m, _blocks_json)
        for bi, b in enumerate(m.blocks):
            api = written[bi]
            if isinstance(b, ToolResult):
                if b.call_id not in calls or b.call_id in answered:
                    problem = "has no tool call before it" if b.call_id not in calls else "is given twice"
                    raise FormatError(f"tool result for call {b.call_id!r} {problem}", path=path,
                                      record=f"{m.id} (message {mi})")
                answered.add(b.call_id)
                out.append(("user", _Item(api, (mi, bi), answers=b.call_id)))
            elif isinstance(b, ToolCall):
                if role != "assistant":
                    raise FormatError(f"tool call in a {m.role} message cannot be written", path=path,
                                      record=f"{m.id} (message {mi})")
                calls.add(b.id)
                out.append((role, _Item(api, (mi, bi), call=b.id)))
            else:
                out.append((role, _Item(api, (mi, bi))))
    return out


def _turn_role(m: Message) -> str:
    """The API role a message is written with: a system message keeps its place in the list only
    when it was read from there (the API accepts it there; others become user text)."""
    if m.role == "assistant":
        return "assistant"
    return "system" if m.role == "system" and m.meta.get(IN_MESSAGES) else "user"


def _merged(items: list[tuple[str, _Item]]) -> list[_Turn]:
    turns: list[_Turn] = []
    for role, item in items:
        if turns and turns[-1][0] == role:
            turns[-1][1].append(item)
        else:
            turns.append((role, [item]))
    return turns


def _place_results(turns: list[_Turn]) -> list[_Turn]:
    """Move each result to the front of the user turn right after its call's turn.

    A user turn left empty is dropped and its neighbours merged; that assistant turn answered none
    of its calls there, so the merged turn's results still follow it.
    """
    owner = {item.call: ti for ti, (_, items) in enumerate(turns) for item in items if item.call}
    moved: dict[int, list[_Item]] = {}
    for _, items in turns:
        for item in items:
            if item.answers is not None:
                moved.setdefault(owner[item.answers], []).append(item)
    for ti, (_, items) in enumerate(turns[:-1]):    # a call in the last turn may still be run
        answered = {item.answers for item in moved.get(ti, ())}
        for call in [item.call for item in items if item.call and item.call not in answered]:
            placeholder = _block_json(ToolResult(call, NO_RESULT, is_error=True))
            moved.setdefault(ti, []).append(_Item(placeholder, answers=call))
    placed: list[_Turn] = []
    for ti, (role, items) in enumerate(turns):
        kept = [item for item in items if item.answers is None]
        if role == "user":
            kept = moved.get(ti - 1, []) + kept
        placed.append((role, kept))
        if role == "assistant" and ti in moved and (ti + 1 == len(turns) or turns[ti + 1][0] != "user"):
            placed.append(("user", moved[ti]))
    return _merged([(role, item) for role, items in placed for item in items])


def _turn_json(role: str, items: list[_Item], rest: list[Message]) -> dict[str, Any]:
    blocks = [item.api for item in items]
    first = items[0].src
    if first is not None:
        m = rest[first[0]]
        if [item.src for item in items] == _source_turn(rest, first[0]):
            # The turn is exactly one source turn: give back its own form and extra keys.
            content: Any = blocks
            if m.meta.get(_FORM) == "string" and len(blocks) == 1 and isinstance(blocks[0], dict) \
                    and blocks[0].get("type") == "text" and set(blocks[0]) == {"type", "text"}:
                content = blocks[0]["text"]
            return {"role": role, "content": content, **m.meta.get(_EXTRA, {})}
    return {"role": role, "content": blocks}


def _source_turn(rest: list[Message], start: int) -> list[tuple[int, int] | None]:
    """The (message, block) positions of the API turn message `start` was read from: its own blocks,
    and those of the messages split from the same turn at worksurface's marks."""
    turn = rest[start].meta.get(_TURN)
    end = start + 1
    while turn is not None and end < len(rest) and rest[end].meta.get(_TURN) == turn:
        end += 1
    return [(k, j) for k in range(start, end) for j in range(len(rest[k].blocks))]


def _block_json(b: Block) -> Any:
    if isinstance(b, Text):
        return {"type": "text", "text": b.text}
    if isinstance(b, ToolCall):
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": dict(b.input)}
    if isinstance(b, ToolResult):
        d: dict[str, Any] = {"type": "tool_result", "tool_use_id": b.call_id}
        if b.images:
            text = [{"type": "text", "text": b.content}] if b.content else []
            d["content"] = text + [_image_json(i) for i in b.images]
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
        return _image_json(b)
    if isinstance(b, Opaque):
        return b.value
    raise TypeError(f"not a block: {b!r}")


def _image_json(i: Image) -> dict[str, Any]:
    if i.source == "url":
        return {"type": "image", "source": {"type": "url", "url": i.data}}
    return {"type": "image", "source": {"type": "base64", "media_type": i.media_type, "data": i.data}}
