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

import uuid
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

from ..core.clearing import CLEARED_TEXT, HARNESS_CLEARING, cleared_only, clearing_of, harness_view
from ..core.errors import FormatError
from ..core.jsontext import encode_line
from ..core.model import ROLES, Block, Message, Origin, Text, ToolCall, ToolResult
from ..core.tokens import TokenCounter
from ..core.calibration import Calibration, calibrate
from ..core.view import live_slice
from .base import Keep, Transcript
from .claude_code_blocks import BlockError, decode_content, encode_content
from .damaged import DamagedLine, ParsedLine, first_record, lines, orphaned_by, parsed_lines
from .validate import mark_unanswered

NAME = "claude-code"
WRITABLE = True

MESSAGE_TYPES = frozenset({"user", "assistant"})
BOUNDARY_SUBTYPE = "compact_boundary"
# Claude Code's microcompact: it cleared old tool results (microcompactMetadata.compactedToolIds) and
# sends each as CLEARED_RESULT from then on (the text is Claude Code's own, as its bundle holds it).
CLEARING_SUBTYPE = "microcompact_boundary"
CLEARED_RESULT = "[Old tool result content cleared]"
# Records that are not messages but belong to a session file (the ones the sniffer recognises; any
# other typed record is kept too: Claude Code 2.1.3xx writes attachment, cost-state, api-request,
# last-prompt, mode, tools-used, atis-latch, ... and adds more with each release).
EXTRA_TYPES = frozenset({"system", "progress", "file-history-snapshot", "queue-operation", "summary",
                         "custom-title", "attachment", "last-prompt", "cost-state"})
RECORD_TYPES = MESSAGE_TYPES | EXTRA_TYPES
# Every Claude Code record carries one of these; a generic JSONL log with a "type" field does not.
SNIFF_KEYS = ("sessionId", "uuid", "messageId", "operation", "leafUuid")
# What a new record copies from the nearest original one, so Claude Code can resume the file.
CONTEXT_KEYS = ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch", "agentId", "slug")
ORIGIN_FIELD = "worksurfaceOrigin"
ROLE_FIELD = "worksurfaceRole"
# worksurface's own id for a record of its own (the record's uuid is a UUID, as Claude Code expects),
# and the pipeline meta a later run needs (the status epoch and sequence, which reinjector, ...).
ID_FIELD = "worksurfaceId"
META_FIELD = "worksurfaceMeta"
SAVED_META = ("epoch", "seq", "kind", "reinjector", "stage", "trigger", "pre_tokens", "post_tokens",
              "summarizer", "covered")
# compactMetadata of a boundary worksurface made, when the message does not say: worksurface
# compactions are requested by the harness, and the pre-compaction size is unknown.
DEFAULT_TRIGGER = "manual"
DEFAULT_PRE_TOKENS = 0
# Claude Code resets any other compactMetadata.trigger to "auto" when it loads the file.
TRIGGERS = ("auto", "manual")
# worksurface's injected context, written as Claude Code writes its own (user records with isMeta).
INJECTED = (Origin.REINJECTION, Origin.STATUS)
# Namespace of the uuids of records worksurface writes (uuid5 over session, epoch and content).
# Prefix of the API message ids of kept assistant records copied into a new chain (Anthropic's own
# ids start with "msg_"; the rest is derived from the original id, so the records of one message
# still share one id).
API_ID_PREFIX = "msg_ws"
UUID_NAMESPACE = uuid.UUID("6d1d2b4e-6a3f-5c1e-9b7a-0c5e2f7d8a13")
QUEUE_ENQUEUE = "enqueue"


class _RecordError(ValueError):
    """A bad record; `read` adds the path and line."""


# ----------------------------------------------------------------------------------------- sniff


def sniff(text: str, path: str | None) -> bool:
    """The first record is a Claude Code one (known type and an id key); a damaged first line is
    passed over."""
    record = first_record(text)
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return False
    if not any(k in record for k in SNIFF_KEYS):
        return False
    return record["type"] in RECORD_TYPES or (path or "").endswith(".jsonl")


# ------------------------------------------------------------------------------------------ read


def read(text: str, path: str | None = None) -> Transcript:
    return read_records(parsed_lines(lines(text)), path)


def read_records(parsed: Iterable[ParsedLine], path: str | None = None, keep: Keep | None = None) -> Transcript:
    """`read` from lines already split and parsed (`damaged.parsed_lines`), in one pass: a file read
    line by line is never held whole; `keep` is what is kept of each message (see base.Keep). A
    result is left out as lost when its call is on a damaged line before it and no readable record
    before it holds that call (harnesses write a call before its result)."""
    messages: list[Message] = []
    extras: list[tuple[str | None, Any]] = []
    queued: list[tuple[str | None, str]] = []
    call_ids: set[str] = set()
    segment_calls: dict[str, int] = {}  # call id -> line, since the last compact boundary
    uuids: dict[str, int] = {}  # record uuid -> line
    results: list[tuple[str, int, str | None]] = []  # (call id, line, record uuid)
    last_id: str | None = None
    count = 0
    damaged: list[DamagedLine] = []
    readable_calls: set[str] = set()
    for number, line, record in parsed:
        count += 1
        if isinstance(record, DamagedLine):
            damaged.append(record)
            extras.append((last_id, record))  # skipped, and written back as it was
            continue
        readable_calls |= _tool_use_ids((record,))
        lost = _lost_call(record, readable_calls, damaged) if damaged else None
        if lost is not None:
            # Its call is on a damaged line: shown, it would answer nothing. Kept in the file as read.
            extras.append((last_id, DamagedLine(number, line, f"answers tool call {lost[0]!r}, whose record "
                                                              f"(line {lost[1].line}) is damaged")))
            continue
        try:
            _check_uuid(record, uuids, number)
            if _is_message_record(record):
                message = _read_message(record)
                messages.append(keep(message) if keep is not None else message)
                last_id = message.id
                if message.meta.get("compact_boundary"):
                    # Calls before a boundary are history; a later epoch may repeat them (a kept tail).
                    segment_calls = {}
                for block in message.blocks:
                    if isinstance(block, ToolResult):
                        results.append((block.call_id, number, message.id))
                    elif isinstance(block, ToolCall):
                        if block.id in segment_calls:
                            raise _RecordError(f"tool_use id {block.id!r} is used twice (first on line "
                                               f"{segment_calls[block.id]}): a call id must be unique")
                        segment_calls[block.id] = number
                        call_ids.add(block.id)
            elif isinstance(record.get("type"), str):
                # Not a message: progress, snapshots, queue operations, and the record types every
                # Claude Code release adds (attachment, cost-state, api-request, ...), kept verbatim.
                extras.append((last_id, record))
                if record["type"] == "queue-operation" and record.get("operation") == QUEUE_ENQUEUE:
                    queued.append((last_id, _queued_text(record.get("content"))))
                elif _is_clearing_record(record) and messages:
                    _note_clearing(messages, record)
            else:
                kind = record.get("type")
                raise _RecordError(f"record type must be a string, not {kind!r}" if kind is not None
                                   else "record has no 'type'")
        except (_RecordError, BlockError) as exc:
            uuid = record.get("uuid")
            raise FormatError(str(exc), path=path, line=number,
                              record=uuid if isinstance(uuid, str) else None) from None
    if not count:
        # An empty file is not a session with no messages: Claude Code never writes one, and
        # compacting it would overwrite the output with nothing.
        raise FormatError("empty file: a Claude Code session has at least one JSON record", path=path)
    # A result may follow a compact_boundary that its call precedes: the file still holds both.
    for call_id, number, uuid in results:
        if call_id not in call_ids:
            raise FormatError(f"tool_result for tool_use id {call_id!r}, which never appears in the file",
                              path=path, line=number, record=uuid)
    # Calls without a result (the user interrupted, the session ended) are kept and flagged.
    return Transcript(mark_unanswered(messages), NAME, path, extras, {}, queued)


def _tool_use_ids(records: Iterable[dict[str, Any]]) -> set[str]:
    """The tool_use ids of these records (read before the messages, when some lines are damaged)."""
    ids: set[str] = set()
    for record in records:
        body = record.get("message")
        content = body.get("content") if isinstance(body, dict) else None
        if record.get("type") == "assistant" and isinstance(content, list):
            ids.update(b["id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_use"
                       and isinstance(b.get("id"), str))
    return ids


def _lost_call(record: dict[str, Any], readable: set[str], damaged: Sequence[DamagedLine]) -> tuple[str, DamagedLine] | None:
    """(call id, damaged line) when this user record answers a call that only a damaged line held."""
    body = record.get("message")
    content = body.get("content") if isinstance(body, dict) else None
    if record.get("type") != "user" or not isinstance(content, list):
        return None
    for block in content:
        call_id = block.get("tool_use_id") if isinstance(block, dict) and block.get("type") == "tool_result" else None
        if isinstance(call_id, str) and call_id not in readable:
            line = orphaned_by(call_id, damaged)
            if line is not None:
                return call_id, line
    return None


def _is_clearing_record(record: dict[str, Any]) -> bool:
    return record.get("type") == "system" and record.get("subtype") == CLEARING_SUBTYPE


def _note_clearing(messages: list[Message], record: dict[str, Any]) -> None:
    """Mark Claude Code's microcompact on the message its record follows (see core/clearing.py): the
    tool results it names are sent as CLEARED_RESULT from then on. Fields of a wrong type are left out."""
    meta = record.get("microcompactMetadata")
    meta = meta if isinstance(meta, dict) else {}
    ids = meta.get("compactedToolIds")
    cleared = [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []
    last = messages[-1]
    mark = {"trigger": meta["trigger"] if isinstance(meta.get("trigger"), str) else None,
            "pre_tokens": _tokens_or_none(meta.get("preTokens")),
            "tokens_saved": _tokens_or_none(meta.get("tokensSaved")), "cleared_call_ids": cleared}
    earlier = clearing_of(last)
    if earlier is not None:  # two clearings after one message: one mark for both
        saved = [n for n in (earlier.get("tokens_saved"), mark["tokens_saved"]) if isinstance(n, int)]
        mark = {**mark, "tokens_saved": sum(saved) if saved else None,
                "cleared_call_ids": list(dict.fromkeys([*earlier.get("cleared_call_ids", ()), *cleared]))}
    messages[-1] = replace(last, meta={**last.meta, HARNESS_CLEARING: mark, CLEARED_TEXT: CLEARED_RESULT})


def _tokens_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _check_uuid(record: dict[str, Any], seen: dict[str, int], number: int) -> None:
    uuid = record.get("uuid")
    if uuid is None:
        return
    if not isinstance(uuid, str):
        raise _RecordError(f"uuid must be a string, not {type(uuid).__name__}")
    if uuid in seen:
        raise _RecordError(f"uuid {uuid!r} is used twice (first on line {seen[uuid]}): "
                           "every record of a session has its own uuid")
    seen[uuid] = number


def _is_message_record(record: dict[str, Any]) -> bool:
    kind = record.get("type")
    return kind in MESSAGE_TYPES or (kind == "system" and record.get("subtype") == BOUNDARY_SUBTYPE)


def _read_message(record: dict[str, Any]) -> Message:
    if not isinstance(record.get("uuid"), str):
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
        compact = _compact_metadata(record)
        meta.update(compact_boundary=True, trigger=compact.get("trigger"),
                    pre_tokens=compact.get("preTokens"), post_tokens=compact.get("postTokens"))
    if isinstance(record.get(ID_FIELD), str):
        meta["worksurface_id"] = record[ID_FIELD]
    saved = record.get(META_FIELD)
    if saved is not None:
        if not isinstance(saved, dict):
            raise _RecordError(f"{META_FIELD} must be an object")
        meta.update({k: v for k, v in saved.items() if k in SAVED_META})
    return Message(record_id(record), role, blocks, origin, meta)  # type: ignore[arg-type]


def record_id(record: dict[str, Any]) -> str:
    """The Message id of a record: its uuid. A record of worksurface's own also names the id the
    message had when written (`worksurfaceId`, kept in meta `worksurface_id`); it is not reused, so a
    later compaction that makes the same message again (same content, same deterministic id) does
    not meet its own earlier copy under one id."""
    saved = record.get(ID_FIELD)
    if saved is not None and not isinstance(saved, str):
        raise _RecordError(f"{ID_FIELD} must be a string")
    return record["uuid"]


def _compact_metadata(record: dict[str, Any]) -> dict[str, Any]:
    """A boundary's compactMetadata, checked: an object with a string trigger and counts."""
    compact = record.get("compactMetadata")
    if compact is None:
        return {}
    if not isinstance(compact, dict):
        raise _RecordError(f"compactMetadata must be an object, not a {_json_type(compact)}")
    if compact.get("trigger") is not None and not isinstance(compact["trigger"], str):
        raise _RecordError(f"compactMetadata.trigger must be a string, not a {_json_type(compact['trigger'])}")
    for key in ("preTokens", "postTokens"):
        value = compact.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise _RecordError(f"compactMetadata.{key} must be a number of tokens, not a {_json_type(value)}")
    return compact


def _json_type(value: Any) -> str:
    names = {str: "string", list: "list", dict: "object", bool: "boolean", int: "number", float: "number"}
    return names.get(type(value), type(value).__name__)


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
    """JSONL for `messages` (default: the transcript's); see `write_session` for the options."""
    return write_session(transcript, messages)


def write_session(transcript: Transcript, messages: Sequence[Message] | None = None, *,
                  session_id: str | None = None, now: str | None = None) -> str:
    """The session file Claude Code continues from, for the view `messages`.

    A view with a compaction of worksurface's (a boundary not read from the file) is written as Claude
    Code writes its own: the file as it was (Claude Code's history and rewind read it), then a new
    chain that the boundary starts (`parentUuid` null, `logicalParentUuid` the old chain's end,
    timestamped `now`) holding the view, kept messages copied under new uuids, worksurface's injected
    context as meta records. Any other view is written in place: the records of the history before
    the transcript's last boundary, then the view's, each unchanged message's record as it was, an
    edited one re-encoded. Either way the usage of assistant records whose context changed is
    rewritten to the view's size, so Claude Code's own accounting sees what the view holds.
    `session_id` moves every record to another session (`--as-new-session`).
    """
    msgs = list(transcript.messages if messages is None else messages)
    stamp = now or datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    sources = [m for m in transcript.messages if _own_raw(m) is not None]
    split = _new_boundary(msgs)
    if split is not None and sources:
        live = _history(transcript, transcript.messages) + _chain(transcript, msgs[split:], stamp)
    else:
        shown = {m.id for m in msgs}
        history = [m for m in transcript.messages[:_live_start(transcript.messages)] if m.id not in shown]
        live = _history(transcript, history + msgs)
    records = fit_usage(transcript, live)
    if session_id is not None:
        records = [{**r, "sessionId": session_id} if isinstance(r, dict) and "sessionId" in r else r
                   for r in records]
    return "".join(_dump(r) for r in records)


# Each line written: a record, or a damaged line of the source kept as it was read, and its message.
Written = list[tuple["dict[str, Any] | DamagedLine", "Message | None"]]


def _new_boundary(messages: Sequence[Message]) -> int | None:
    """Index of the last compact boundary worksurface made in this view (not read from the file)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].origin is Origin.BOUNDARY and _own_raw(messages[i]) is None:
            return i
    return None


def _live_start(messages: Sequence[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].meta.get("compact_boundary") or messages[i].origin is Origin.BOUNDARY:
            return i
    return 0


def _history(transcript: Transcript, msgs: Sequence[Message]) -> Written:
    """`msgs` with the transcript's extras after the messages they followed (extras of a message
    that is not written are dropped with it), each record as it was unless its message changed."""
    anchored: dict[str | None, list[dict[str, Any] | DamagedLine]] = defaultdict(list)
    for anchor, record in transcript.extras:
        anchored[anchor].append(record)
    plan: list[Message | dict[str, Any] | DamagedLine] = list(anchored.pop(None, []))
    for message in msgs:
        plan.append(message)
        plan.extend(anchored.pop(message.id, []))
    originals = [r for r in (_own_raw(m) for m in transcript.messages) if r is not None]
    originals += [r for _, r in transcript.extras if isinstance(r, dict)]
    written = {_uuid_of(item) for item in plan}
    chain = _Chain(dropped={r["uuid"] for r in originals if "uuid" in r} - written,
                   context=_context(next((r for r in originals if "cwd" in r), {}), {}),
                   session=_session_of(transcript))
    return [(chain.emit(item), item if isinstance(item, Message) else None) for item in plan]


def _uuid_of(item: Message | dict[str, Any] | DamagedLine) -> Any:
    if isinstance(item, DamagedLine):
        return item.uuid
    if isinstance(item, dict):
        return item.get("uuid")
    raw = _own_raw(item)
    return raw["uuid"] if raw is not None else item.id


def _chain(transcript: Transcript, msgs: Sequence[Message], stamp: str) -> Written:
    """The chain a worksurface compaction starts: every message a new record after the file's last
    one, kept messages copied under uuids of this epoch (the originals stay in the history)."""
    originals = [r for r in (_own_raw(m) for m in transcript.messages) if r is not None]
    last: dict[str, Any] = next((r for r in reversed(originals) if r.get("type") in ("user", "assistant", "system")),
                                {})
    latest = max((r["timestamp"] for r in originals if isinstance(r.get("timestamp"), str)), default=stamp)
    chain = _Chain(dropped=set(), context=_context(next((r for r in reversed(originals) if "cwd" in r), {}), {}),
                   session=_session_of(transcript), last_uuid=last.get("uuid"),
                   now=max(stamp, latest), epoch=msgs[0].meta.get("epoch"), fresh=True)
    return [(chain.emit(m), m) for m in msgs]


def _session_of(transcript: Transcript) -> str:
    for m in transcript.messages:
        raw = _own_raw(m)
        if raw is not None and isinstance(raw.get("sessionId"), str):
            return raw["sessionId"]
    return transcript.path or ""


def _dump(record: dict[str, Any] | DamagedLine) -> str:
    if isinstance(record, DamagedLine):
        return record.text + "\n"  # as read; the newline lets the records after it start a line
    return encode_line(record) + "\n"


def _own_raw(message: Message) -> dict[str, Any] | None:
    """The Claude Code record a message was read from (another format's `raw` is not one)."""
    raw = message.meta.get("raw")
    if isinstance(raw, dict) and "uuid" in raw and _is_message_record(raw):
        return raw
    return None


def _context(record: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    return {**base, **{k: record[k] for k in CONTEXT_KEYS if k in record}}


def record_uuid(session: str, epoch: Any, *parts: str) -> str:
    """A deterministic UUID for a record worksurface writes: the same session, epoch and content
    give the same uuid, so writing a view twice gives the same file."""
    return str(uuid.uuid5(UUID_NAMESPACE, "\x00".join((session, str(epoch), *parts))))


@dataclass
class _Chain:
    """Running state of a write: the parentUuid chain, the last timestamp, the session context."""

    dropped: set[Any]
    context: dict[str, Any]
    session: str = ""
    last_uuid: str | None = None
    last_timestamp: str | None = None
    now: str | None = None          # the compaction's time, for the records a compaction makes
    epoch: Any = None
    fresh: bool = False             # a new chain: kept messages are copied under new uuids
    renamed: dict[str, str] = field(default_factory=dict)

    def emit(self, item: Message | dict[str, Any] | DamagedLine) -> dict[str, Any] | DamagedLine:
        if isinstance(item, DamagedLine):
            return item
        if isinstance(item, Message):
            raw = _own_raw(item)
            record = self._new(item) if raw is None else _kept(item, raw, harness_clears=not self.fresh)
            if record is None:  # a boundary message that is no longer one text: write it afresh
                record = self._new(item)
            elif raw is not None and self.fresh:
                record = self._copy(record, item)
        else:
            record = item
        if self.fresh:
            record = {**record, "parentUuid": None if _is_boundary_record(record) else self.last_uuid}
        elif record.get("parentUuid") in self.dropped:
            # Its parent was cut from this file: hang it on the record written before it instead.
            record = {**record, "parentUuid": self.last_uuid}
        if "cwd" in record or "sessionId" in record:
            self.context = _context(record, self.context)
        if record.get("type") in ("user", "assistant", "system") and isinstance(record.get("uuid"), str):
            self.last_uuid = record["uuid"]
        if isinstance(record.get("timestamp"), str):
            self.last_timestamp = record["timestamp"]
        return record

    def _copy(self, record: dict[str, Any], message: Message) -> dict[str, Any]:
        """A kept message in the new chain: same content and time, a uuid of this epoch."""
        new = dict(record)
        new.pop(ID_FIELD, None)  # its id is the new uuid: the original keeps the old one
        new["uuid"] = self.renamed[record["uuid"]] = record_uuid(self.session, self.epoch, "copy", record["uuid"],
                                                                 message.digest)
        source = new.get("sourceToolAssistantUUID")
        if source in self.renamed:
            new["sourceToolAssistantUUID"] = self.renamed[source]
        body = new.get("message")
        if new.get("type") == "assistant" and isinstance(body, dict) and isinstance(body.get("id"), str):
            # Claude Code gathers the records of one API message by message.id across the whole file;
            # sharing the original's id would pull the history's records into the new chain.
            new["message"] = {**body, "id": API_ID_PREFIX + record_uuid(self.session, self.epoch, "api",
                                                                        body["id"]).replace("-", "")[:24]}
        return new

    def _new(self, message: Message) -> dict[str, Any]:
        """A record for a message with no Claude Code source: worksurface's own, or converted."""
        meta = message.meta
        head = {**self.context,
                "isSidechain": bool(meta.get("is_sidechain", self.context.get("isSidechain", False)))}
        own = message.origin is not Origin.CONVERSATION
        uuid_ = record_uuid(self.session, meta.get("epoch", self.epoch), message.digest) if own else message.id
        stamp: dict[str, Any] = {"uuid": uuid_}
        timestamp = (self.now if own else None) or meta.get("timestamp") or self.now or self.last_timestamp
        if timestamp is not None:
            stamp["timestamp"] = timestamp
        boundary = message.origin is Origin.BOUNDARY or (
            message.origin is Origin.CONVERSATION and meta.get("compact_boundary"))
        only = _only_text(message.blocks)
        if boundary and only is not None:
            # Like Claude Code's own boundary: it starts a new chain, remembering the old one's end.
            compact = {"trigger": meta.get("trigger") if meta.get("trigger") in TRIGGERS else DEFAULT_TRIGGER,
                       "preTokens": _count(meta.get("pre_tokens"))}
            if isinstance(meta.get("covered"), int):
                compact["messagesSummarized"] = meta["covered"]
            record = {"parentUuid": None, "logicalParentUuid": self.last_uuid, **head, "type": "system",
                      "subtype": BOUNDARY_SUBTYPE, "content": only, "isMeta": False,
                      **stamp, "level": "info", "compactMetadata": compact}
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
            if meta.get("is_meta") or message.origin in INJECTED:
                record["isMeta"] = True  # context the harness adds, as Claude Code marks its own
            if message.origin is Origin.SUMMARY or meta.get("is_compact_summary"):
                record.update(isVisibleInTranscriptOnly=True, isCompactSummary=True)
        if own:
            if uuid_ != message.id:
                record[ID_FIELD] = message.id
            saved = {k: meta[k] for k in SAVED_META if isinstance(meta.get(k), (str, int, float, bool))}
            if saved:
                record[META_FIELD] = saved
        return _mark(record, message)


def _is_boundary_record(record: dict[str, Any] | DamagedLine) -> bool:
    return isinstance(record, dict) and record.get("type") == "system" and record.get("subtype") == BOUNDARY_SUBTYPE


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else DEFAULT_PRE_TOKENS


def _only_text(blocks: Sequence[Block]) -> str | None:
    """The text of a message that is one text block (a boundary's shape), else None."""
    return blocks[0].text if len(blocks) == 1 and isinstance(blocks[0], Text) else None


def _mark(record: dict[str, Any], message: Message) -> dict[str, Any]:
    """Record the role and origin that the record's type and fields do not already imply."""
    record.pop(ORIGIN_FIELD, None)
    record.pop(ROLE_FIELD, None)
    if message.origin is not Origin.CONVERSATION:
        record[ORIGIN_FIELD] = message.origin.value
    if message.role != record["type"]:
        record[ROLE_FIELD] = message.role
    return record


def _kept(message: Message, raw: dict[str, Any], harness_clears: bool = True) -> dict[str, Any] | None:
    """The source record, as it was if the message is unchanged, else with the new content.
    None when the change does not fit the record (a boundary no longer one text). A result only
    Claude Code's own clearing changed keeps its record where Claude Code clears it again itself
    (`harness_clears`: in place, after its microcompact record), not in a chain of worksurface's."""
    role, origin, blocks = _message_parts(raw)
    if (message.id, message.role, message.origin) == (record_id(raw), role, origin) and (
            message.blocks == blocks or (harness_clears and cleared_only(message, blocks))):
        return raw
    record = dict(raw)
    record["uuid"] = message.id
    if raw["type"] == "system":
        only = _only_text(message.blocks)
        if only is None:
            return None
        record["content"] = only
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


# ----------------------------------------------------------------------------------------- usage


def fit_usage(transcript: Transcript, written: Written) -> list[dict[str, Any] | DamagedLine]:
    """The written records, with the usage of each assistant record whose context is no longer the
    one the provider measured set to the view's size: Claude Code takes its context size from the
    last assistant record's usage (input + cache read + cache creation + output tokens) and would
    otherwise compact a view worksurface already compacted. The size is worksurface's count plus
    what the transcript's usage says the harness adds (`calibration.calibrate`: system prompt and tool
    schemas, and the tokenizer ratio). The boundary that starts the live part gets the view's
    size as `postTokens`."""
    records = [record for record, _ in written]

    def at(index: int) -> dict[str, Any]:
        record = records[index]
        assert isinstance(record, dict)  # a message's line is a record, never a damaged line
        return record

    start = next((i for i in range(len(written) - 1, -1, -1) if _is_boundary_record(written[i][0])), 0)
    live = [(i, m) for i, (_, m) in enumerate(written) if i >= start and m is not None]
    original = live_slice(transcript.messages)
    # A message is still the transcript's as read, or as Claude Code sent it after its own clearing.
    sent = harness_view(original)
    counter = TokenCounter()
    # Fitted on the whole file: its earliest requests show the fixed part (the live part after a
    # compaction starts with what the harness re-attached, which is not fixed).
    fitted = calibrate(transcript.messages, counter) or Calibration(0, 1.0, 0)
    counted = 0
    same = True  # the live part so far is the transcript's, unchanged: its measured usage holds
    n = 0
    while n < len(live):
        index, message = live[n]
        group = [n]  # Claude Code writes one API message as several records sharing message.id
        if at(index).get("type") == "assistant":
            api_id = at(index)["message"].get("id")
            while (n + len(group) < len(live) and at(live[n + len(group)][0]).get("type") == "assistant"
                   and at(live[n + len(group)][0])["message"].get("id") == api_id):
                group.append(n + len(group))
        for k in group:
            same = same and k < len(original) and live[k][1] in (original[k], sent[k]) and \
                records[live[k][0]] is _own_raw(original[k])
        size = sum(counter.message(live[k][1]) for k in group)
        if at(index).get("type") == "assistant" and not same:
            before = fitted.size(counted)
            output = fitted.size(counted + size) - before
            for k in group:
                record = at(live[k][0])
                records[live[k][0]] = {**record, "message": {
                    **record["message"], "usage": _usage(record["message"].get("usage"), before, output)}}
        counted += size
        n += len(group)
    if not same and records and _is_boundary_record(records[start]):
        compact = at(start).get("compactMetadata")
        records[start] = {**at(start), "compactMetadata": {**(compact if isinstance(compact, dict) else {}),
                                                                "postTokens": fitted.size(counted)}}
    return records


def _usage(old: Any, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """Usage for a rewritten record: the view's size as plain input (nothing of it is cached yet),
    the record's other usage fields kept."""
    usage = dict(old) if isinstance(old, dict) else {}
    usage.update(input_tokens=input_tokens, cache_creation_input_tokens=0, cache_read_input_tokens=0,
                 output_tokens=output_tokens)
    if isinstance(usage.get("cache_creation"), dict):
        usage["cache_creation"] = {k: 0 for k in usage["cache_creation"]}
    return usage
