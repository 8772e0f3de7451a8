"""Writing a Claude Code session file for a view: unchanged messages as the records they were read
from, changed ones re-encoded in their record, worksurface's compaction as a new chain the way
Claude Code writes its own, and the usage of rewritten assistant records fitted to the view (see
`write_session`)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence

from ..core.calibration import Calibration, calibrate
from ..core.clearing import cleared_only, harness_view
from ..core.jsontext import encode_line
from ..core.model import Block, Message, Origin, Text, ToolResult
from ..core.tokens import TokenCounter
from ..core.view import live_slice
from .base import Transcript, line_of
from .claude_code_blocks import encode_content
from .claude_code_records import (API_ID_PREFIX, BOUNDARY_SUBTYPE, CONTEXT_KEYS, DEFAULT_PRE_TOKENS, DEFAULT_TRIGGER,
                                  FILE_AFTER, ID_FIELD, INJECTED, META_FIELD, ORIGIN_FIELD, PRESERVED_BY, ROLE_FIELD,
                                  SAVED_META, TRIGGERS, UUID_NAMESPACE, is_message_record, message_parts, record_id)
from .damaged import DamagedLine

def write(transcript: Transcript, messages: Sequence[Message] | None = None) -> str:
    """JSONL for `messages` (default: the transcript's); see `write_session` for the options."""
    return write_session(transcript, messages)


def write_chunks(transcript: Transcript, messages: Sequence[Message] | None = None) -> Iterator[str]:
    """`write` as the lines it joins, made as they are consumed (a large file is written as it goes)."""
    return session_lines(transcript, messages)


def write_session(transcript: Transcript, messages: Sequence[Message] | None = None, *,
                  session_id: str | None = None, now: str | None = None) -> str:
    """The session file Claude Code continues from, for the view `messages` (`session_lines` joined)."""
    return "".join(session_lines(transcript, messages, session_id=session_id, now=now))


def session_lines(transcript: Transcript, messages: Sequence[Message] | None = None, *,
                  session_id: str | None = None, now: str | None = None) -> Iterator[str]:
    """The lines of the session file Claude Code continues from, for the view `messages`.

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
    # The file's message records, in the file's order (not the view's: see file_order).
    originals = [r for r in map(_own_raw, file_order(transcript.messages)) if r is not None]
    split = _new_boundary(msgs)
    as_read = _as_read(transcript)
    if split is not None and originals:
        live = (_history(transcript, transcript.messages, originals, as_read)
                + _chain(transcript, msgs[split:], originals, stamp, as_read))
    else:
        shown = {m.id for m in msgs}
        history = [m for m in transcript.messages[:_live_start(transcript.messages)] if m.id not in shown]
        live = _history(transcript, history + msgs, originals, as_read)
    records = fit_usage(transcript, live)
    if session_id is not None:
        records = [{**r, "sessionId": session_id} if isinstance(r, dict) and "sessionId" in r else r
                   for r in records]
    lines = transcript.lines
    return (_dump(r, lines) for r in records)


# Each line written: a record, or a damaged line of the source kept as it was read, and its message.
Written = list[tuple["dict[str, Any] | DamagedLine", "Message | None"]]


def file_order(messages: Sequence[Message]) -> list[Message]:
    """`messages` with each one the reader moved after Claude Code's summary (meta PRESERVED_BY: kept
    verbatim across that compaction) put back after the message it followed in the file (FILE_AFTER),
    or, when that one is not written, right before its boundary: Claude Code relinks the kept records
    by id wherever they are, and an unchanged file is written back as it was read."""
    moved = [m for m in messages if PRESERVED_BY in m.meta]
    if not moved:
        return list(messages)
    out = [m for m in messages if PRESERVED_BY not in m.meta]
    for message in moved:  # in the file's order among themselves, so one may follow another
        after = message.meta.get(FILE_AFTER)
        ids = [m.id for m in out]
        if after is None:
            out.insert(0, message)
        elif after in ids:
            out.insert(ids.index(after) + 1, message)
        elif message.meta[PRESERVED_BY] in ids:
            out.insert(ids.index(message.meta[PRESERVED_BY]), message)
        else:
            out.append(message)
    return out


def _view_order(live: list[tuple[int, Message]], start: int) -> list[tuple[int, Message]]:
    """Written (index, message) pairs of the live part that starts at index `start` (its boundary) in
    the order Claude Code sends them: the messages the boundary preserved, written before it (see
    file_order), right after the boundary's anchor."""
    moved = [e for e in live if e[0] < start]
    if not moved:
        return live
    rest = [e for e in live if e[0] >= start]
    kept = rest[0][1].meta.get("preserved") if rest else None
    anchor = kept.get("anchor") if isinstance(kept, dict) else None
    at = next((k + 1 for k, e in enumerate(rest) if e[1].id == anchor), 1)
    return rest[:at] + moved + rest[at:]


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


def _history(transcript: Transcript, msgs: Sequence[Message], originals: Sequence[dict[str, Any]],
             as_read: frozenset[int]) -> Written:
    """`msgs` with the transcript's extras after the messages they followed (extras of a message
    that is not written are dropped with it), each record as it was unless its message changed."""
    anchored: dict[str | None, list[dict[str, Any] | DamagedLine]] = defaultdict(list)
    for anchor, record in transcript.extras:
        anchored[anchor].append(record)
    plan: list[Message | dict[str, Any] | DamagedLine] = list(anchored.pop(None, []))
    for message in file_order(msgs):
        plan.append(message)
        plan.extend(anchored.pop(message.id, []))
    originals = [*originals, *(r for _, r in transcript.extras if isinstance(r, dict))]
    written = {_uuid_of(item) for item in plan}
    chain = _Chain(dropped={r["uuid"] for r in originals if "uuid" in r} - written,
                   context=_context(next((r for r in originals if "cwd" in r), {}), {}),
                   session=_session_of(transcript), as_read=as_read)
    return [(chain.emit(item), item if isinstance(item, Message) else None) for item in plan]


def _as_read(transcript: Transcript) -> frozenset[int]:
    """The ids of the messages the reader made from their records: messages are immutable, so one of
    these is still its record (the transcript holds them, so no other object takes their ids)."""
    return frozenset(map(id, transcript.as_read))


def _uuid_of(item: Message | dict[str, Any] | DamagedLine) -> Any:
    if isinstance(item, DamagedLine):
        return item.uuid
    if isinstance(item, dict):
        return item.get("uuid")
    raw = _own_raw(item)
    return raw["uuid"] if raw is not None else item.id


def _chain(transcript: Transcript, msgs: Sequence[Message], originals: Sequence[dict[str, Any]], stamp: str,
           as_read: frozenset[int]) -> Written:
    """The chain a worksurface compaction starts: every message a new record after the file's last
    one, kept messages copied under uuids of this epoch (the originals stay in the history)."""
    last: dict[str, Any] = next((r for r in reversed(originals) if r.get("type") in ("user", "assistant", "system")),
                                {})
    latest = max((r["timestamp"] for r in originals if isinstance(r.get("timestamp"), str)), default=stamp)
    chain = _Chain(dropped=set(), context=_context(next((r for r in reversed(originals) if "cwd" in r), {}), {}),
                   session=_session_of(transcript), last_uuid=last.get("uuid"),
                   now=max(stamp, latest), epoch=msgs[0].meta.get("epoch"), fresh=True, as_read=as_read)
    return [(chain.emit(m), m) for m in msgs]


def _session_of(transcript: Transcript) -> str:
    for m in transcript.messages:
        raw = _own_raw(m)
        if raw is not None and isinstance(raw.get("sessionId"), str):
            return raw["sessionId"]
    return transcript.path or ""


def _dump(record: dict[str, Any] | DamagedLine, lines: dict[int, tuple[Any, str]]) -> str:
    if isinstance(record, DamagedLine):
        return record.text + "\n"  # as read; the newline lets the records after it start a line
    line = line_of(lines, record)  # a record the write did not change: its line as read
    return (line if line is not None else encode_line(record)) + "\n"


def _own_raw(message: Message) -> dict[str, Any] | None:
    """The Claude Code record a message was read from (another format's `raw` is not one)."""
    raw = message.meta.get("raw")
    if isinstance(raw, dict) and "uuid" in raw and is_message_record(raw):
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
    as_read: frozenset[int] = frozenset()  # ids of the messages as the reader made them (`_as_read`)

    def emit(self, item: Message | dict[str, Any] | DamagedLine) -> dict[str, Any] | DamagedLine:
        if isinstance(item, DamagedLine):
            return item
        if isinstance(item, Message):
            raw = _own_raw(item)
            if raw is None:
                record: dict[str, Any] | None = self._new(item)
            elif id(item) in self.as_read:
                record = raw  # made from this very record, and messages are immutable
            else:
                record = _kept(item, raw, harness_clears=not self.fresh)
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
    role, origin, blocks = message_parts(raw)
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

    # The live part starts at the last boundary that is a message (one Claude Code bypasses is an extra).
    start = next((i for i in range(len(written) - 1, -1, -1)
                  if _is_boundary_record(written[i][0]) and written[i][1] is not None), 0)
    boundary = written[start][1] if written else None
    live = _view_order([(i, m) for i, (_, m) in enumerate(written) if m is not None and (
        i >= start or (boundary is not None and m.meta.get(PRESERVED_BY) == boundary.id))], start)
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
