"""OpenAI Responses API requests: `{"model", "instructions", "input": str | [items], "tools", ...}`.

The items are the ones Codex rollouts hold (`message`, `reasoning`, `function_call`,
`custom_tool_call`, `local_shell_call` and their `*_output`s, anything else kept whole), so each item is
read with the Codex adapter's `item_parts` into one message (id = its index in `input`), and a
message whose blocks are unchanged writes back as its own item, byte for byte. `instructions`
becomes a leading system message (id "instructions"); a bare string `input` one user message. Items
given in the short form (`{"role": "user", "content": "text"}`, no `type`) keep that form.

Write makes a valid request: leading system messages that came from `instructions` go back there;
any other message is written as input items (worksurface's own system messages as `developer`
messages; worksurface's own messages start with their tagged mark, see ownmark; conversation text is
written as it is); a tool call left without an output while more items follow is answered with
validate.NO_RESULT. Every request field worksurface does not model (`previous_response_id`, `store`,
`tools`, `reasoning`, ...) is kept as given.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Sequence

from ..core.errors import FormatError
from ..core.model import Message, Text, ToolResult
from . import codex, ownmark
from .base import Transcript
from .jsondoc import parse_json, peek_json
from .reuse import Memo, Reuse, made, read_fresh
from .validate import NO_RESULT, check_pairing, check_unique_ids

NAME = "openai-responses"
WRITABLE = True

INSTRUCTIONS_ID = "instructions"
_EXPECTED = 'an object with an "input" string or list of items (a Responses API request)'
_RAW = f"{NAME}.item"          # the item as the client sent it
_SHORT = f"{NAME}.short"       # the item was `{"role", "content": str}` (no type, string content)
_INPUT_FORM = "_input"         # Transcript.meta: "string" or "list"
_HAS_INSTRUCTIONS = "_instructions"  # Transcript.meta: the request had an `instructions` field


def sniff(text: str, path: str | None) -> bool:
    doc = peek_json(text)
    return isinstance(doc, dict) and isinstance(doc.get("input"), (str, list)) and "messages" not in doc


def read(text: str, path: str | None = None) -> Transcript:
    return read_doc(parse_json(text, path, _EXPECTED), path)


def read_doc(doc: Any, path: str | None = None, reuse: Reuse | None = None) -> Transcript:
    """`read` of a parsed document; with `reuse`, items equal to the previous request's are kept."""
    one = reuse.message if reuse is not None else read_fresh
    if reuse is not None:
        reuse.begin()
    if not isinstance(doc, dict) or not isinstance(doc.get("input"), (str, list)):
        raise FormatError(f"expected {_EXPECTED}", path=path)
    meta = {k: v for k, v in doc.items() if k not in ("input", "instructions")}
    messages: list[Message] = []
    instructions = doc.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise FormatError("instructions must be a string", path=path, record="instructions")
        messages.append(one(INSTRUCTIONS_ID, instructions,
                            lambda: Message(INSTRUCTIONS_ID, "system", (Text(instructions),)), path))
    meta[_HAS_INSTRUCTIONS] = "instructions" in doc
    items = doc["input"]
    if isinstance(items, str):
        meta[_INPUT_FORM] = "string"
        messages.append(Message("0", "user", (Text(items),), meta={_SHORT: True}))
    else:
        meta[_INPUT_FORM] = "list"
        read = [one(i, item, functools.partial(_read_item, i, item, path), path) for i, item in enumerate(items)]
        grouped = codex.group_responses(read)
        if reuse is not None:   # the next request reuses the grouped item (the same object again)
            for i, (was, now) in enumerate(zip(read, grouped)):
                if now is not was:
                    reuse.keep(i, now)
        messages += grouped
    check_unique_ids(messages, path)
    check_pairing(messages, path)
    if reuse is not None:
        reuse.check_fields(meta, path)
        reuse.commit()
    return Transcript(messages, NAME, path, meta=meta)


def _read_item(i: int, item: Any, path: str | None) -> Message:
    record = f"input[{i}]"
    if not isinstance(item, dict):
        raise FormatError(f"expected an input item object, found {type(item).__name__}", path=path, record=record)
    short = "type" not in item and isinstance(item.get("content"), str)
    payload = _long_form(item) if short or "type" not in item else item
    try:
        role, blocks, extra = codex.item_parts(payload)
    except ValueError as exc:
        raise FormatError(str(exc), path=path, record=record) from None
    meta: dict[str, Any] = {**extra, _RAW: item}
    if short:
        meta[_SHORT] = True
    if role != "assistant" and blocks and isinstance(blocks[0], Text):
        mark, first = ownmark.read_text(blocks[0].text)
        if mark is not None and len(blocks) == 1:
            # A message worksurface wrote: its origin (and id) back from the mark (see ownmark).
            return Message(mark.id or str(i), mark.role, (Text(first),), mark.origin, {**meta, **mark.meta()})
    return Message(str(i), role, blocks, meta=meta)  # type: ignore[arg-type]


def _wire(m: Message) -> Message:
    """`m` with its text as it travels in a request: a message worksurface made starts with its mark;
    conversation text travels as it is (a mark is known by its tag, see ownmark)."""
    if m.role == "assistant" or not any(isinstance(b, Text) for b in m.blocks):
        return m
    if m.is_worksurface and len(m.blocks) == 1 and isinstance(m.blocks[0], Text):
        return m.with_blocks([Text(ownmark.marked_text(ownmark.mark_of(m), m.blocks[0].text))])
    return m


def _long_form(item: dict[str, Any]) -> dict[str, Any]:
    """An item without `type` is a message (the API's EasyInputMessage); string content is one text part."""
    content = item.get("content")
    if isinstance(content, str):
        kind = "output_text" if item.get("role") == "assistant" else "input_text"
        content = [{"type": kind, "text": content}]
    return {**item, "type": "message", "content": content}


def write(transcript: Transcript, messages: Sequence[Message] | None = None) -> str:
    return json.dumps(document(transcript, messages), ensure_ascii=False, indent=2)


def document(transcript: Transcript, messages: Sequence[Message] | None = None,
             memo: Memo | None = None) -> dict[str, Any]:
    """What `write` serializes, as JSON values (for callers that send the request on; the gateway's
    `memo` keeps each message's items as written)."""
    msgs = list(transcript.messages if messages is None else messages)
    own = transcript.format == NAME
    doc: dict[str, Any] = {k: v for k, v in transcript.meta.items()
                           if k not in (_INPUT_FORM, _HAS_INSTRUCTIONS)} if own else {}
    k = 0
    instructions: list[str] = []
    while k < len(msgs) and msgs[k].id == INSTRUCTIONS_ID and msgs[k].role == "system":
        instructions.append(msgs[k].text)
        k += 1
    if instructions or (own and transcript.meta.get(_HAS_INSTRUCTIONS)):
        doc["instructions"] = "\n\n".join(instructions)
    rest = msgs[k:]
    if (own and transcript.meta.get(_INPUT_FORM) == "string" and len(rest) == 1 and rest[0].meta.get(_SHORT)
            and rest[0].role == "user" and len(rest[0].blocks) == 1 and isinstance(rest[0].blocks[0], Text)
            and not rest[0].is_worksurface):
        doc["input"] = rest[0].blocks[0].text
    else:
        doc["input"] = _items(rest, transcript.path, memo)
    ordered: dict[str, Any] = {key: doc[key] for key in ("model", "instructions", "input") if key in doc}
    return {**ordered, **doc}


def _items(msgs: list[Message], path: str | None, memo: Memo | None = None) -> list[dict[str, Any]]:
    answered = {r.call_id for m in msgs for r in m.tool_results}
    calls: set[str] = set()
    out: list[dict[str, Any]] = []
    for i, m in enumerate(msgs):
        for r in m.tool_results:
            if r.call_id not in calls:
                raise FormatError(f"tool result for call {r.call_id!r} has no tool call before it",
                                  path=path, record=f"{m.id} (message {i})")
        out += made(memo, NAME, m, _message_items)
        for c in m.tool_calls:
            calls.add(c.id)
            if c.id not in answered and i + 1 < len(msgs):   # a call at the very end may still be run
                out.append(codex.encode_block(ToolResult(c.id, NO_RESULT, is_error=True)))
    return out


def _message_items(m: Message) -> list[dict[str, Any]]:
    """The message's own item when its content is unchanged (its short form too), else new items."""
    m = _wire(m)
    raw = m.meta.get(_RAW)
    if isinstance(raw, dict):
        source = _long_form(raw) if "type" not in raw else raw
        try:
            kept = codex.kept_payload(m, source)
        except ValueError:
            kept = None
        if kept is source:
            return [raw]
        if kept is not None:
            return [kept]
    if m.role == "system" and not m.meta.get("codex_role"):
        m = Message(m.id, m.role, m.blocks, m.origin, {**m.meta, "codex_role": "developer"})
    return codex.encode_message(m)
