"""Writing messages back as a Codex CLI rollout (the format is described in the package's docstring)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

from ...core.jsontext import encode_line
from ...core.model import Block, Image, Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult
from ...core.tokens import TokenCounter
from ...core.calibration import Calibration, calibrate
from ..base import Transcript, line_of
from ..damaged import DamagedLine
from .reader import (BOUNDARY_FIGURES, CALL_TYPES, LOCAL_SHELL, MADE_BY_WORKSURFACE, MARK, NEW_ORDINAL, OUTPUT_TYPES,
                     _RecordError, _natural_id, item_parts)

def write(transcript: Transcript, messages: Sequence[Message] | None = None) -> str:
    """JSONL for `messages` (default: the transcript's); see `write_chunks`."""
    return "".join(write_chunks(transcript, messages))


def write_chunks(transcript: Transcript, messages: Sequence[Message] | None = None) -> list[str]:
    """The lines of the JSONL for `messages` (default: the transcript's), with the transcript's extras after the
    messages they followed; extras whose message is not written are dropped with it.

    A view with a compaction of worksurface's is written as Codex writes its own: its `compacted`
    record carries the standing context verbatim and is followed by the latest turn_context; the
    token_count events, which measured the context before it, give way to one at the end that
    measures the compacted view (so a resumed Codex does not compact it again)."""
    msgs = list(transcript.messages if messages is None else messages)
    new = next((i for i in range(len(msgs) - 1, -1, -1)
                if _is_boundary(msgs[i]) and _own_compacted(msgs[i]) is None), None)
    anchored: dict[str | None, list[dict[str, Any] | DamagedLine]] = defaultdict(list)
    for anchor, record in transcript.extras:
        if new is None or not _is_token_count(record):
            anchored[anchor].append(record)
    writer = _Writer(_uses_ordinals(transcript), transcript.lines)
    for record in anchored.pop(None, []):
        writer.emit(record)
    i = 0
    while i < len(msgs):
        message = msgs[i]
        if _is_boundary(message):
            j = i + 1
            owned = _own_compacted(message)
            if owned is not None:  # Codex's compaction (or one read back): its items follow it
                while j < len(msgs) and msgs[j].meta.get("codex_compacted") == message.id:
                    j += 1
                writer.emit(_kept_compacted(message, owned, msgs[i + 1:j]))
            else:
                while j < len(msgs) and (msgs[j].origin not in (Origin.CONVERSATION, Origin.BOUNDARY)
                                         or _is_standing(msgs[j])):
                    j += 1  # worksurface's summary and reinjected messages, and the standing context
                writer.emit(_new_compacted(message, _restated(msgs[:i]), msgs[i + 1:j], writer.last_timestamp))
                context = _latest(transcript, _is_turn_context)
                if context is not None and not any(r is context for m in msgs[i:] for r in anchored.get(m.id, ())):
                    writer.emit(context)  # the turn settings Codex resumes with (model, cwd, policies)
            for m in msgs[i:j]:
                for record in anchored.pop(m.id, []):
                    writer.emit(record)
            i = j
            continue
        for record in _message_records(message, writer.last_timestamp, writer.names):
            writer.emit(record)
        for record in anchored.pop(message.id, []):
            writer.emit(record)
        i += 1
    if new is not None:
        measured = _view_usage(transcript, _restated(msgs[:new]) + msgs[new:], writer.last_timestamp)
        if measured is not None:
            writer.emit(measured)
    return writer.lines


def _is_token_count(record: Any) -> bool:
    if not isinstance(record, dict) or record.get("type") != "event_msg":
        return False
    payload = record.get("payload")
    return isinstance(payload, dict) and payload.get("type") == "token_count"


def _is_turn_context(record: Any) -> bool:
    return isinstance(record, dict) and record.get("type") == "turn_context"


def _latest(transcript: Transcript, kind: Any) -> dict[str, Any] | None:
    """The newest extra of a kind as of the transcript's last message (a cut transcript keeps the
    extras of the messages it cut off; they are not part of it)."""
    ids = {m.id for m in transcript.messages}
    found = [r for anchor, r in transcript.extras if (anchor is None or anchor in ids) and kind(r)]
    return found[-1] if found else None


def _is_standing(message: Message) -> bool:
    """Standing context (developer and permissions messages, AGENTS.md, environment context): a
    compaction carries it in its `compacted` record verbatim, as Codex's own does."""
    return message.role == "system" and message.origin is Origin.CONVERSATION and not _is_boundary(message)


def _view_usage(transcript: Transcript, sent: Sequence[Message], timestamp: str | None) -> dict[str, Any] | None:
    """A token_count event for the compacted view: the rollout's newest one with `last_token_usage`
    set to the view's size (worksurface's count plus what the rollout's usage says Codex adds, as
    `calibration.calibrate` fits it); the running totals and the window stay. None when the rollout has
    no token_count to start from."""
    base = _latest(transcript, _is_token_count)
    info = base["payload"].get("info") if base is not None else None
    if base is None or not isinstance(info, dict):
        return None
    counter = TokenCounter()
    # Fitted on the whole rollout: its earliest requests show the fixed part (a compaction's live part
    # starts with what Codex carried, which is not fixed); later compactions start their own segments.
    fitted = calibrate(transcript.messages, counter) or Calibration(0, 1.0, 0)
    size = fitted.size(counter.messages(sent))
    last = info.get("last_token_usage")
    usage = {k: 0 for k in last} if isinstance(last, dict) else {}
    usage.update(input_tokens=size, cached_input_tokens=0, output_tokens=0, total_tokens=size)
    record: dict[str, Any] = {"timestamp": timestamp or base.get("timestamp"), "ordinal": NEW_ORDINAL,
                              "type": "event_msg", "payload": {**base["payload"], "info": {**info, "last_token_usage": usage}},
                              MARK: {"estimated": True}}
    if record["timestamp"] is None:
        del record["timestamp"]
    return record


@dataclass
class _Writer:
    ordinals: bool
    read: dict[int, tuple[Any, str]] = field(default_factory=dict)  # the lines records were read from
    lines: list[str] = field(default_factory=list)
    last_timestamp: str | None = None
    names: "_Names" = field(default_factory=lambda: _Names())

    def emit(self, record: dict[str, Any] | DamagedLine) -> None:
        if isinstance(record, DamagedLine):
            self.lines.append(record.text + "\n")  # as read; the newline lets the next record start a line
            return
        if "ordinal" in record and self.ordinals and record["ordinal"] != len(self.lines):
            # Codex pages a rollout by ordinal: keep them consecutive when records were dropped.
            record = {**record, "ordinal": len(self.lines)}
        elif record.get("ordinal") == NEW_ORDINAL:  # a file without ordinals (older Codex)
            record = {k: v for k, v in record.items() if k != "ordinal"}
        if isinstance(record.get("timestamp"), str):
            self.last_timestamp = record["timestamp"]
        line = line_of(self.read, record)  # a record the write did not change: its line as read
        self.lines.append((line if line is not None else encode_line(record)) + "\n")


def _uses_ordinals(transcript: Transcript) -> bool:
    return any(isinstance(r, dict) and "ordinal" in r for _, r in transcript.extras[:1])


def _is_boundary(message: Message) -> bool:
    return message.origin is Origin.BOUNDARY or bool(message.meta.get("compact_boundary"))


def _own_raw(message: Message) -> dict[str, Any] | None:
    """The rollout record a message was read from (another format's `raw` is not one)."""
    raw = message.meta.get("raw")
    if isinstance(raw, dict) and raw.get("type") == "response_item" and isinstance(raw.get("payload"), dict):
        return raw
    return None


def _own_compacted(message: Message) -> dict[str, Any] | None:
    raw = message.meta.get("raw")
    if isinstance(raw, dict) and raw.get("type") == "compacted" and isinstance(raw.get("payload"), dict):
        return raw
    return None


def _stamp(message: Message, fallback: str | None) -> str | None:
    stamp = message.meta.get("timestamp")
    return stamp if isinstance(stamp, str) else fallback


@dataclass
class _Names:
    """The ids reading the written records back gives them (`_Reader.unique` numbers repeated
    items: `reasoning-<digest>~2`, ...), so a record names its message's id only where reading it
    back would give another one (a copy before it was not written)."""

    used: set[str] = field(default_factory=set)

    def read_as(self, natural: str) -> str:
        mid, n = natural, 1
        while mid in self.used:
            n += 1
            mid = f"{natural}~{n}"
        return mid


def _message_records(message: Message, timestamp: str | None, names: _Names) -> list[dict[str, Any]]:
    """The response_item record(s) of a message outside a compaction."""
    raw = _own_raw(message)
    if raw is not None:
        payload = kept_payload(message, raw["payload"])
        if payload is not None:
            kept = raw if payload is raw["payload"] else {**raw, "payload": payload}
            marked = _mark_record(kept, message, names.read_as(_natural_id(payload)))
            names.used.add(message.id)  # read back under its own id: natural, or named in the mark
            return [marked]
    payloads = encode_message(message)
    stamp = _stamp(message, timestamp)
    out = []
    for n, payload in enumerate(payloads):
        record: dict[str, Any] = {"timestamp": stamp, "ordinal": NEW_ORDINAL, "type": "response_item",
                                  "payload": payload}
        if stamp is None:
            del record["timestamp"]
        read_as = names.read_as(_natural_id(payload))
        out.append(_mark_record(record, message, read_as) if n == 0 else record)
        names.used.add(message.id if n == 0 else read_as)
    return out


def _mark_record(record: dict[str, Any], message: Message, read_as: str) -> dict[str, Any]:
    """Add (or drop) the `worksurface` key: only what reading the record would not give back
    (`read_as`: the id reading it would give)."""
    role, _, _ = item_parts(record["payload"])
    mark: dict[str, Any] = {}
    if message.id != read_as:
        mark["id"] = message.id
    if message.origin is not Origin.CONVERSATION:
        mark["origin"] = message.origin.value
    if message.role != role:
        mark["role"] = message.role
    if mark == (record.get(MARK) or {}):
        return record
    record = {k: v for k, v in record.items() if k != MARK}
    if mark:
        record[MARK] = mark
    return record


def kept_payload(message: Message, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The source payload if the message still equals it, else the payload with the new content;
    None when the change does not fit one item (write it afresh)."""
    role, blocks, _ = item_parts(payload)
    if message.blocks == blocks:
        return payload
    if len(message.blocks) != 1 and payload.get("type") != "message":
        return None
    kind = payload.get("type")
    if kind == "message" and all(isinstance(b, (Text, Image, Opaque)) for b in message.blocks):
        return {**payload, "content": [_encode_part(b, payload.get("role")) for b in message.blocks]}
    block = message.blocks[0] if message.blocks else None
    if kind in OUTPUT_TYPES and isinstance(block, ToolResult):
        return {**payload, "call_id": block.call_id, "output": _encode_output(block, payload.get("output"))}
    if kind in CALL_TYPES and isinstance(block, ToolCall):
        new = encode_block(block)
        return {**payload, **{k: v for k, v in new.items() if k not in ("type", "id")}} if new["type"] == kind else None
    if kind == "reasoning" and isinstance(block, Thinking):
        return {**payload, "summary": [{"type": "summary_text", "text": block.text}], "content": None,
                "encrypted_content": block.signature}
    return None


def encode_message(message: Message) -> list[dict[str, Any]]:
    """Response items for a message that has no rollout record of its own."""
    out: list[dict[str, Any]] = []
    parts: list[Block] = []

    def flush() -> None:
        if parts:
            role = message.meta.get("codex_role") or {"system": "developer", "tool": "user"}.get(
                message.role, message.role)
            out.append({"type": "message", "role": role, "content": [_encode_part(b, role) for b in parts]})
            parts.clear()

    for block in message.blocks:
        if isinstance(block, (Text, Image)) or (isinstance(block, Opaque) and message.role != "assistant"):
            parts.append(block)
            continue
        flush()
        out.append(encode_block(block))
    flush()
    if not out:
        out.append({"type": "message", "role": "assistant" if message.role == "assistant" else "user",
                    "content": []})
    return out


def encode_block(block: Block) -> dict[str, Any]:
    if isinstance(block, ToolCall):
        if block.name == LOCAL_SHELL:
            return {"type": "local_shell_call", "call_id": block.id, "status": "completed",
                    "action": dict(block.input)}
        if set(block.input) == {"input"} and isinstance(block.input["input"], str):
            return {"type": "custom_tool_call", "call_id": block.id, "name": block.name,
                    "input": block.input["input"]}
        return {"type": "function_call", "name": block.name,
                "arguments": json.dumps(dict(block.input), ensure_ascii=False), "call_id": block.id}
    if isinstance(block, ToolResult):
        return {"type": "function_call_output", "call_id": block.call_id, "output": _encode_output(block, None)}
    if isinstance(block, Thinking):
        return {"type": "reasoning", "summary": [{"type": "summary_text", "text": block.text}], "content": None,
                "encrypted_content": block.signature}
    if isinstance(block, Opaque):
        value = block.value
        return value if isinstance(value, dict) and "type" in value else {
            "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": block.json_text}]}
    return {"type": "message", "role": "assistant", "content": [_encode_part(block, "assistant")]}


def _encode_part(block: Block, role: Any) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "output_text" if role == "assistant" else "input_text", "text": block.text}
    if isinstance(block, Image):
        url = block.data if block.source == "url" else f"data:{block.media_type};base64,{block.data}"
        return {"type": "input_image", "image_url": url}
    if isinstance(block, Opaque):
        value = block.value
        return value if isinstance(value, dict) else {"type": "input_text", "text": block.json_text}
    return {"type": "input_text", "text": json.dumps(encode_block(block), ensure_ascii=False)}


def _encode_output(block: ToolResult, original: Any) -> Any:
    if not block.images and not isinstance(original, list):
        return block.content
    parts: list[dict[str, Any]] = []
    if block.content or not block.images:
        parts.append({"type": "input_text", "text": block.content})
    parts.extend(_encode_part(i, "user") for i in block.images)
    return parts


# -- compaction records -------------------------------------------------------------------------


def _item_payload(message: Message) -> dict[str, Any]:
    """One replacement_history item for a message (its own item when it still fits)."""
    raw = message.meta.get("raw")
    source = raw.get("payload") if isinstance(raw, dict) and raw.get("type") == "response_item" else (
        raw if isinstance(raw, dict) and "type" in raw and "payload" not in raw else None)
    if isinstance(source, dict):
        try:
            kept = kept_payload(message, source)
        except _RecordError:
            kept = None
        if kept is not None:
            return {k: v for k, v in kept.items()}
    items = encode_message(message)
    return items[0]


def _item_mark(message: Message, payload: dict[str, Any], boundary_id: str) -> dict[str, Any]:
    role, _, _ = item_parts(payload)
    mark: dict[str, Any] = {"id": message.id}
    if message.origin is not Origin.CONVERSATION:
        mark["origin"] = message.origin.value
    if message.role != role:
        mark["role"] = message.role
    return mark


def _kept_compacted(boundary: Message, raw: dict[str, Any], items: Sequence[Message]) -> dict[str, Any]:
    """A compacted record read from the file: as it was while its items are unchanged."""
    payload = raw["payload"]
    history = payload.get("replacement_history")
    mark = raw.get(MARK) or {}
    restated = [m for m in mark.get("items", []) if m.get("restates")]
    if history is None:
        originals: list[dict[str, Any]] = []
    else:
        originals = [h for h, m in zip(history, mark.get("items") or [{}] * len(history)) if not m.get("restates")]
    if history is None and len(items) == 1 and items[0].meta.get("synthetic"):
        if items[0].blocks == (Text(payload.get("message", "")),):
            return raw
    elif len(items) == len(originals) and all(
            item_parts(o)[1] == m.blocks for o, m in zip(originals, items)):
        return raw
    # Items changed: rebuild replacement_history from the messages (restated copies kept first).
    kept_restated = [h for h, m in zip(history or [], mark.get("items") or []) if m.get("restates")]
    new_items = [_item_payload(m) for m in items]
    new_payload = {k: v for k, v in payload.items() if k != "replacement_history_metadata"}
    new_payload["replacement_history"] = kept_restated + new_items
    summary = next((m for m in items if m.meta.get("is_compact_summary")), None)
    if summary is not None:
        new_payload["message"] = summary.text
    record = {**raw, "payload": new_payload}
    marks = restated + [_item_mark(m, p, boundary.id) for m, p in zip(items, new_items)]
    record[MARK] = {**mark, "boundary": mark.get("boundary") or _boundary_mark(boundary), "items": marks}
    return record


def _boundary_mark(boundary: Message) -> dict[str, Any]:
    """How worksurface reads the boundary back: its id, text, origin and figures."""
    meta = boundary.meta
    mark = {"id": boundary.id, "text": boundary.text, "origin": boundary.origin.value,
            "made_by": meta.get("made_by") or MADE_BY_WORKSURFACE}
    mark.update({k: meta[k] for k in BOUNDARY_FIGURES if meta.get(k) is not None})
    return mark


def _restated(before: Sequence[Message]) -> list[Message]:
    """What Codex must still send from before a new boundary: the live messages before it that are
    standing context (system role: developer instructions, environment context), as Codex itself
    keeps them in its replacement_history."""
    start = 0
    for i in range(len(before) - 1, -1, -1):
        if _is_boundary(before[i]):
            start = i + 1
            break
    return [m for m in before[start:] if _is_standing(m)]


def _new_compacted(boundary: Message, restated: Sequence[Message], head: Sequence[Message],
                   timestamp: str | None) -> dict[str, Any]:
    """A `compacted` record for a boundary worksurface made, shaped as Codex writes its own."""
    summary = next((m for m in head if m.origin is Origin.SUMMARY or m.meta.get("is_compact_summary")), None)
    restated_items = [_item_payload(m) for m in restated]
    items = [_item_payload(m) for m in head]
    payload: dict[str, Any] = {"message": summary.text if summary is not None else "",
                               "replacement_history": restated_items + items}
    marks = [{"restates": m.id} for m in restated] + [_item_mark(m, p, boundary.id) for m, p in zip(head, items)]
    boundary_mark = _boundary_mark(boundary)
    record: dict[str, Any] = {"timestamp": _stamp(boundary, timestamp), "ordinal": NEW_ORDINAL, "type": "compacted",
                              "payload": payload, MARK: {"boundary": boundary_mark, "items": marks}}
    if record["timestamp"] is None:
        del record["timestamp"]
    return record
