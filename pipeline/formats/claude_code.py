"""Claude Code session JSONL (`~/.claude/projects/<project>/<session>.jsonl`, and sidechain
`subagents/agent-*.jsonl` files): one JSON record per line.

Every user and assistant record is one `Message` (id = the record's `uuid`). Claude Code stores one API
assistant message as several records, one content block each, sharing `message.id`; they stay separate
Messages here (meta `api_message_id`) and the Anthropic exporter merges them. A `compact_boundary`
system record is a system Message. Everything else (progress, file-history-snapshot, queue-operation,
other system subtypes) is kept in `Transcript.extras` so that an unmodified transcript writes back the
same JSON records in the same order.

Writing emits an unchanged message's source record as it was. A changed message keeps its record with
`message.content` re-encoded in the stored shape, and a changed tool result also replaces the record's
`toolUseResult` (Claude Code's structured copy of the output, e.g. a whole file for Read) by the new
content string: keeping the structured original would put back what compaction removed. Messages
worksurface made become new records that carry `worksurfaceOrigin` (and `worksurfaceRole` when the
record type does not imply the role), so reading the file back restores them.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import FormatError
from ..model import ROLES, Block, Message, Origin, Text, ToolCall, ToolResult
from .base import Transcript
from .claude_code_blocks import BlockError, decode_content, encode_content
from .validate import mark_unanswered

NAME = "claude-code"
WRITABLE = True

MESSAGE_TYPES = frozenset({"user", "assistant"})
BOUNDARY_SUBTYPE = "compact_boundary"
# Records that are not messages but belong to a session file. "summary" (session title, older
# versions) and "custom-title" (/rename) do not occur in the sample files but are written by
# Claude Code, so they must not make a real session unreadable.
EXTRA_TYPES = frozenset({"system", "progress", "file-history-snapshot", "queue-operation", "summary",
                         "custom-title"})
RECORD_TYPES = MESSAGE_TYPES | EXTRA_TYPES
# Every Claude Code record carries one of these; a generic JSONL log with a "type" field does not.
SNIFF_KEYS = ("sessionId", "uuid", "messageId", "operation", "leafUuid")
# What a new record copies from the nearest original one, so Claude Code can resume the file.
CONTEXT_KEYS = ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch", "agentId", "slug")
ORIGIN_FIELD = "worksurfaceOrigin"
ROLE_FIELD = "worksurfaceRole"
# compactMetadata of a boundary worksurface made, when the message does not say: worksurface
# compactions are requested by the harness, and the pre-compaction size is unknown.
DEFAULT_TRIGGER = "manual"
DEFAULT_PRE_TOKENS = 0
QUEUE_ENQUEUE = "enqueue"
# Lone UTF-16 surrogates (truncated tool output) cannot be written as UTF-8; such lines are escaped.
_SURROGATE = re.compile("[\ud800-\udfff]")


class _RecordError(ValueError):
    """A bad record; `read` adds the path and line."""


# ----------------------------------------------------------------------------------------- sniff


def sniff(text: str, path: str | None) -> bool:
    """The first non-empty line is a Claude Code record (known type and an id key)."""
    record = _first_record(text)
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return False
    if not any(k in record for k in SNIFF_KEYS):
        return False
    return record["type"] in RECORD_TYPES or (path or "").endswith(".jsonl")


def _first_record(text: str) -> Any:
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line = text[start:end]
        if line.strip():
            try:
                return json.loads(line)
            except ValueError:
                return None
        start = end + 1
    return None


# ------------------------------------------------------------------------------------------ read


def read(text: str, path: str | None = None) -> Transcript:
    messages: list[Message] = []
    extras: list[tuple[str | None, Any]] = []
    queued: list[tuple[str | None, str]] = []
    call_ids: set[str] = set()
    results: list[tuple[str, int, str | None]] = []  # (call id, line, record uuid)
    last_id: str | None = None
    # Split on "\n" only: JSON strings may hold a raw U+2028, which str.splitlines would break at.
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(f"broken JSON: {exc.msg} at column {exc.colno}", path=path,
                              line=number) from None
        if not isinstance(record, dict):
            raise FormatError(f"record is a JSON {type(record).__name__}, not an object", path=path,
                              line=number)
        try:
            if _is_message_record(record):
                message = _read_message(record)
                messages.append(message)
                last_id = message.id
                for block in message.blocks:
                    if isinstance(block, ToolResult):
                        results.append((block.call_id, number, message.id))
                    elif isinstance(block, ToolCall):
                        call_ids.add(block.id)
            elif record.get("type") in EXTRA_TYPES:
                extras.append((last_id, record))
                if record["type"] == "queue-operation" and record.get("operation") == QUEUE_ENQUEUE:
                    queued.append((last_id, _queued_text(record.get("content"))))
            else:
                kind = record.get("type")
                raise _RecordError(f"unknown record type {kind!r}" if kind is not None
                                   else "record has no 'type'")
        except (_RecordError, BlockError) as exc:
            uuid = record.get("uuid")
            raise FormatError(str(exc), path=path, line=number,
                              record=uuid if isinstance(uuid, str) else None) from None
    # A result may follow a compact_boundary that its call precedes: the file still holds both.
    for call_id, number, uuid in results:
        if call_id not in call_ids:
            raise FormatError(f"tool_result for tool_use id {call_id!r}, which never appears in the file",
                              path=path, line=number, record=uuid)
    # Calls without a result (the user interrupted, the session ended) are kept and flagged.
    return Transcript(mark_unanswered(messages), NAME, path, extras, {}, queued)


def _is_message_record(record: dict[str, Any]) -> bool:
    kind = record.get("type")
    return kind in MESSAGE_TYPES or (kind == "system" and record.get("subtype") == BOUNDARY_SUBTYPE)


def _read_message(record: dict[str, Any]) -> Message:
    uuid = record.get("uuid")
    if not isinstance(uuid, str):
        raise _RecordError(f"{record['type']} record without a string uuid")
    role, origin, blocks = _message_parts(record)
    meta: dict[str, Any] = {
        "raw": record, "cwd": record.get("cwd"), "git_branch": record.get("gitBranch"),
        "timestamp": record.get("timestamp"), "is_sidechain": bool(record.get("isSidechain")),
        "is_meta": bool(record.get("isMeta")), "is_compact_summary": bool(record.get("isCompactSummary")),
    }
    if "todos" in record:
        meta["todos"] = record["todos"]
    if record["type"] == "assistant":
        meta["usage"] = record["message"].get("usage")
        meta["api_message_id"] = record["message"].get("id")
    elif record["type"] == "system":
        compact = record.get("compactMetadata") or {}
        meta.update(compact_boundary=True, trigger=compact.get("trigger"),
                    pre_tokens=compact.get("preTokens"))
    return Message(uuid, role, blocks, origin, meta)  # type: ignore[arg-type]


def _message_parts(record: dict[str, Any]) -> tuple[str, Origin, tuple[Block, ...]]:
    """(role, origin, blocks) of a message record: a pure function, so `write` can re-derive it."""
    kind = record["type"]
    if kind == "system":
        content = record.get("content", "")
        if not isinstance(content, str):
            raise _RecordError("compact_boundary content must be a string")
        blocks: tuple[Block, ...] = (Text(content),)
    else:
        message = record.get("message")
        if not isinstance(message, dict):
            raise _RecordError(f"{kind} record without a 'message' object")
        blocks = decode_content(message.get("content"))
    role = record.get(ROLE_FIELD, kind)
    if role not in ROLES:
        raise _RecordError(f"unknown {ROLE_FIELD} {role!r}")
    try:
        origin = Origin(record.get(ORIGIN_FIELD, Origin.CONVERSATION.value))
    except ValueError:
        raise _RecordError(f"unknown {ORIGIN_FIELD} {record.get(ORIGIN_FIELD)!r}") from None
    return role, origin, blocks


def _queued_text(content: Any) -> str:
    if isinstance(content, list):  # newer versions may queue content blocks
        return "\n".join(b.get("text", "") for b in content
                         if isinstance(b, dict) and b.get("type") == "text")
    return content if isinstance(content, str) else ""


# ----------------------------------------------------------------------------------------- write


def write(transcript: Transcript, messages: Sequence[Message] | None = None) -> str:
    """JSONL for `messages` (default: the transcript's), with the transcript's extras after the
    messages they followed; extras whose message is not written are dropped with it."""
    msgs = list(transcript.messages if messages is None else messages)
    anchored: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for anchor, record in transcript.extras:
        anchored[anchor].append(record)
    plan: list[Message | dict[str, Any]] = list(anchored.pop(None, []))
    for message in msgs:
        plan.append(message)
        plan.extend(anchored.pop(message.id, []))
    originals = [r for r in (_own_raw(m) for m in transcript.messages) if r is not None]
    originals += [r for _, r in transcript.extras]
    written = {item.id if isinstance(item, Message) else item.get("uuid") for item in plan}
    chain = _Chain(dropped={r["uuid"] for r in originals if "uuid" in r} - written,
                   context=_context(next((r for r in originals if "cwd" in r), {}), {}))
    return "".join(_dump(chain.emit(item)) for item in plan)


def _dump(record: dict[str, Any]) -> str:
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    if _SURROGATE.search(line):
        line = json.dumps(record, separators=(",", ":"))
    return line + "\n"


def _own_raw(message: Message) -> dict[str, Any] | None:
    """The Claude Code record a message was read from (another format's `raw` is not one)."""
    raw = message.meta.get("raw")
    if isinstance(raw, dict) and "uuid" in raw and _is_message_record(raw):
        return raw
    return None


def _context(record: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    return {**base, **{k: record[k] for k in CONTEXT_KEYS if k in record}}


@dataclass
class _Chain:
    """Running state of a write: the parentUuid chain, the last timestamp, the session context."""

    dropped: set[Any]
    context: dict[str, Any]
    last_uuid: str | None = None
    last_timestamp: str | None = None

    def emit(self, item: Message | dict[str, Any]) -> dict[str, Any]:
        if isinstance(item, Message):
            raw = _own_raw(item)
            record = self._new(item) if raw is None else _kept(item, raw)
            if record is None:  # a boundary message that is no longer one text: write it afresh
                record = self._new(item)
        else:
            record = item
        if record.get("parentUuid") in self.dropped:
            # Its parent was cut from this file: hang it on the record written before it instead.
            record = {**record, "parentUuid": self.last_uuid}
        if "cwd" in record or "sessionId" in record:
            self.context = _context(record, self.context)
        if record.get("type") in ("user", "assistant", "system") and isinstance(record.get("uuid"), str):
            self.last_uuid = record["uuid"]
        if isinstance(record.get("timestamp"), str):
            self.last_timestamp = record["timestamp"]
        return record

    def _new(self, message: Message) -> dict[str, Any]:
        """A record for a message with no Claude Code source: worksurface's own, or converted."""
        meta = message.meta
        head = {**self.context,
                "isSidechain": bool(meta.get("is_sidechain", self.context.get("isSidechain", False)))}
        stamp = {"uuid": message.id}
        timestamp = meta.get("timestamp") or self.last_timestamp
        if timestamp is not None:
            stamp["timestamp"] = timestamp
        boundary = message.origin is Origin.BOUNDARY or (
            message.origin is Origin.CONVERSATION and meta.get("compact_boundary"))
        if boundary and _single_text(message.blocks):
            # Like Claude Code's own boundary: it starts a new chain, remembering the old one's end.
            record = {"parentUuid": None, "logicalParentUuid": self.last_uuid, **head, "type": "system",
                      "subtype": BOUNDARY_SUBTYPE, "content": message.blocks[0].text, "isMeta": False,
                      **stamp, "level": "info",
                      "compactMetadata": {"trigger": meta.get("trigger") or DEFAULT_TRIGGER,
                                          "preTokens": meta.get("pre_tokens") or DEFAULT_PRE_TOKENS}}
        elif message.role == "assistant":
            body: dict[str, Any] = {"id": meta.get("api_message_id") or message.id, "type": "message",
                                    "role": "assistant",
                                    "content": encode_content(message.blocks, as_string=False)}
            if meta.get("usage") is not None:
                body["usage"] = meta["usage"]
            record = {"parentUuid": self.last_uuid, **head, "type": "assistant", "message": body, **stamp}
        else:
            record = {"parentUuid": self.last_uuid, **head, "type": "user",
                      "message": {"role": "user", "content": encode_content(message.blocks, as_string=True)},
                      **stamp}
            if meta.get("is_meta"):
                record["isMeta"] = True
            if message.origin is Origin.SUMMARY or meta.get("is_compact_summary"):
                record.update(isVisibleInTranscriptOnly=True, isCompactSummary=True)
        return _mark(record, message)


def _single_text(blocks: Sequence[Block]) -> bool:
    return len(blocks) == 1 and isinstance(blocks[0], Text)


def _mark(record: dict[str, Any], message: Message) -> dict[str, Any]:
    """Record the role and origin that the record's type and fields do not already imply."""
    record.pop(ORIGIN_FIELD, None)
    record.pop(ROLE_FIELD, None)
    if message.origin is not Origin.CONVERSATION:
        record[ORIGIN_FIELD] = message.origin.value
    if message.role != record["type"]:
        record[ROLE_FIELD] = message.role
    return record


def _kept(message: Message, raw: dict[str, Any]) -> dict[str, Any] | None:
    """The source record, as it was if the message is unchanged, else with the new content.
    None when the change does not fit the record (a boundary no longer one text)."""
    role, origin, blocks = _message_parts(raw)
    if (message.id, message.role, message.origin, message.blocks) == (raw["uuid"], role, origin, blocks):
        return raw
    record = dict(raw)
    record["uuid"] = message.id
    if raw["type"] == "system":
        if not _single_text(message.blocks):
            return None
        record["content"] = message.blocks[0].text
        return _mark(record, message)
    stored = raw["message"].get("content")
    record["message"] = {**raw["message"], "content": encode_content(
        message.blocks, stored, as_string=isinstance(stored, str))}
    new_results = message.tool_results
    if "toolUseResult" in record and new_results != tuple(b for b in blocks if isinstance(b, ToolResult)):
        if new_results:
            record["toolUseResult"] = "\n".join(r.content for r in new_results)
        else:
            del record["toolUseResult"]
    return _mark(record, message)
