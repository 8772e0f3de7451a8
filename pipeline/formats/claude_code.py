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

The reader is here; the writer is `claude_code_writer` and the record vocabulary both share is
`claude_code_records` (this module re-exports the names the format registry and callers use).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Sequence

from ..core.clearing import CLEARED_TEXT, HARNESS_CLEARING, clearing_of
from ..core.errors import FormatError
from ..core.model import Message, ToolCall, ToolResult
from .base import Keep, Transcript, keeps_line
from .claude_code_blocks import BlockError
from ..core.usage import USAGE_VOID
from .claude_code_records import (BOUNDARY_SUBTYPE, CLEARED_RESULT, CLEARING_SUBTYPE, COMPACT_COMMAND, FILE_AFTER,
                                  ID_FIELD, META_FIELD, NAME, PRESERVED_BY, QUEUE_ENQUEUE, RECORD_TYPES, SAVED_META,
                                  SNIFF_KEYS, UUID_NAMESPACE, WRITABLE, RecordError, is_message_record, message_parts,
                                  record_id)
from .claude_code_window import WindowEvidence
from .claude_code_writer import fit_usage, record_uuid, session_lines, write, write_chunks, write_session
from .damaged import DamagedLine, ParsedLine, first_record, lines, orphaned_by, parsed_lines
from .validate import INTERRUPTED, mark_unanswered

__all__ = ["BOUNDARY_SUBTYPE", "CLEARED_RESULT", "NAME", "RECORD_TYPES", "UUID_NAMESPACE", "WRITABLE",
           "fit_usage", "read", "read_records", "record_id", "record_uuid", "session_lines", "sniff", "write",
           "write_chunks", "write_session"]




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
    calling: set[str] = set()  # ids of the messages that hold tool calls
    boundaries = 0
    last_id: str | None = None
    count = 0
    damaged: list[DamagedLine] = []
    readable_calls: set[str] = set()  # tool_use ids of the readable assistant records so far
    lines: dict[int, tuple[Any, str]] = {}
    window = WindowEvidence()
    parents: dict[str, Any] = {}  # record uuid -> parentUuid, every record (a preserved segment is walked)
    instructions: str | None = None  # a manual /compact's, queued and not yet applied
    # Once per record of a file of 100k: each line below is worth its microsecond (see benchmarks/large.py).
    for number, line, record in parsed:
        count += 1
        if isinstance(record, DamagedLine):
            damaged.append(record)
            extras.append((last_id, record))  # skipped, and written back as it was
            continue
        lost = _lost_call(record, readable_calls, damaged) if damaged else None
        if lost is not None:
            # Its call is on a damaged line: shown, it would answer nothing. Kept in the file as read.
            extras.append((last_id, DamagedLine(number, line, f"answers tool call {lost[0]!r}, whose record "
                                                              f"(line {lost[1].line}) is damaged")))
            continue
        if keep is None and keeps_line(line):
            lines[id(record)] = (record, line)
        try:
            uuid = record.get("uuid")
            if uuid is not None:
                _check_uuid(uuid, uuids, number)
                parents[uuid] = record.get("parentUuid")
            window.see(record, number)
            kind = record.get("type")
            if is_message_record(record):
                message = _read_message(record)
                boundary = kind == "system"  # the one system record that is a message
                if boundary and instructions is not None:
                    message = replace(message, meta={**message.meta, "instructions": instructions})
                if boundary or kind == "assistant":
                    instructions = None  # applied by this compaction, or the agent went on without it
                messages.append(keep(message) if keep is not None else message)
                last_id = message.id
                if boundary:
                    # Calls before a boundary are history; a later epoch may repeat them (a kept tail).
                    segment_calls = {}
                    boundaries += 1
                for block in message.blocks:
                    if isinstance(block, ToolResult):
                        results.append((block.call_id, number, message.id))
                    elif isinstance(block, ToolCall):
                        if block.id in segment_calls:
                            raise RecordError(f"tool_use id {block.id!r} is used twice (first on line "
                                               f"{segment_calls[block.id]}): a call id must be unique")
                        segment_calls[block.id] = number
                        call_ids.add(block.id)
                        calling.add(message.id)
                        if kind == "assistant":  # where harnesses write calls: what a result may answer
                            readable_calls.add(block.id)
            elif isinstance(kind, str):
                # Not a message: progress, snapshots, queue operations, and the record types every
                # Claude Code release adds (attachment, cost-state, api-request, ...), kept verbatim.
                extras.append((last_id, record))
                if kind == "queue-operation" and record.get("operation") == QUEUE_ENQUEUE:
                    text = _queued_text(record.get("content"))
                    queued.append((last_id, text))
                    instructions = _compact_instructions(text) if text.startswith(COMPACT_COMMAND) else instructions
                elif _is_clearing_record(record) and messages:
                    _note_clearing(messages, record)
            else:
                raise RecordError(f"record type must be a string, not {kind!r}" if kind is not None
                                   else "record has no 'type'")
        except (RecordError, BlockError) as exc:
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
    notices: list[str] = []
    read = len(messages)
    if boundaries:  # only a boundary's preserved messages are relinked
        messages, extras = relink_preserved(messages, extras, parents, uuids, notices, path)
    # Calls without a result (the user interrupted, the session ended) are kept and flagged; the
    # loop above saw every result and which messages call, unless relinking dropped a message.
    marked = (_mark_unanswered(messages, call_ids - {r[0] for r in results}, calling) if len(messages) == read
              else mark_unanswered(messages))
    inferred = window.infer()
    meta: dict[str, Any] = {"window_inference": inferred.to_json()}
    if inferred.window is not None:
        meta["context_window"] = inferred.window
    if notices:
        meta["notices"] = notices
    if instructions is not None:
        meta["pending_compact_instructions"] = instructions
    # What `keep` made of a message is not what its record says: only the messages themselves count.
    return Transcript(marked, NAME, path, extras, meta, queued, as_read=tuple(marked) if keep is None else (),
                      lines=lines)


Extras = list[tuple[str | None, Any]]


def relink_preserved(messages: list[Message], extras: Extras, parents: dict[str, Any], lines: dict[str, int],
                     notices: list[str], path: str | None = None) -> tuple[list[Message], Extras]:
    """The messages (and extras) in the order Claude Code sends them: the messages its last compaction
    kept (compactMetadata preservedMessages, else the preservedSegment walked from its tail to its head)
    moved from before the boundary to after its anchor (the summary), as Claude Code relinks them on
    load, each marked with the boundary (PRESERVED_BY), the message it followed in the file
    (FILE_AFTER, so the writer puts the record back) and, for an assistant record, USAGE_VOID (Claude
    Code zeroes that usage: it measured the context before the compaction). Only the file's last
    boundary counts. A named id that no record of the file has gives a notice naming it: Claude Code
    then relinks nothing and follows the records' own parentUuid chain, and so does this: where the
    records after the summary hang on it, the live view is the summary and what follows; where they
    hang on the old chain (as 2.1.2xx writes them), Claude Code sends the history before the boundary
    and not its summary, so the boundary and summary become extras (kept in the file as they are).
    `lines` is each record uuid's line, `parents` each one's parentUuid."""
    at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].meta.get("compact_boundary")), None)
    if at is None:
        return messages, extras
    boundary = messages[at]
    kept = boundary.meta.get("preserved")
    if not isinstance(kept, dict):
        return messages, extras
    where = f"{path}: " if path else ""
    ids, missing = _preserved_ids(kept, parents)
    if missing:
        head = (f"{where}compact boundary {boundary.id} names preserved messages no record of the file holds "
                f"({', '.join(missing)}): Claude Code relinks none of them, so neither does worksurface; ")
        bypassed = _bypass(messages, extras, at, parents, lines)
        if bypassed is None:
            notices.append(head + "the live view is its summary and what follows")
            return messages, extras
        notices.append(head + "the records after the summary continue the chain before the boundary, so Claude "
                              "Code sends that history and not the summary, and so does the view (the boundary "
                              "and summary records stay in the file as they are)")
        return bypassed
    absent = [i for i in kept.get("all_ids", ()) if i not in parents and i not in ids]
    if absent:
        notices.append(f"{where}compact boundary {boundary.id}: preservedMessages.allUuids names messages no record "
                       f"of the file holds ({', '.join(absent)}); Claude Code kept them in memory only, so the "
                       "view goes without them")
    anchor = kept.get("anchor")
    index = {m.id: i for i, m in enumerate(messages)}
    if anchor not in index or index[anchor] < at:
        notices.append(f"{where}compact boundary {boundary.id}: its preserved messages hang on {anchor!r}, which is "
                       "no message after it; they stay where the file has them")
        return messages, extras
    chosen = [index[i] for i in ids if i in index and index[i] < at]
    if not chosen:
        return messages, extras
    moved: list[Message] = []
    for i in chosen:
        m = messages[i]
        meta = {**m.meta, PRESERVED_BY: boundary.id, FILE_AFTER: messages[i - 1].id if i else None}
        if m.role == "assistant":
            meta[USAGE_VOID] = True
        moved.append(replace(m, meta=meta))
    taken = set(chosen)
    rest = [m for i, m in enumerate(messages) if i not in taken]
    after = next(i for i, m in enumerate(rest) if m.id == anchor) + 1
    return rest[:after] + moved + rest[after:], extras


def _bypass(messages: list[Message], extras: Extras, at: int, parents: dict[str, Any],
            lines: dict[str, int]) -> tuple[list[Message], Extras] | None:
    """(messages, extras) without the boundary at `at` and its summary, which become extras at their
    place, when the first message after them hangs (through records that are no message) on a record
    before the boundary: Claude Code, relinking nothing, then walks from the leaf into the old chain and
    never reaches them. None when that message hangs on them (or there is none)."""
    removed = [messages[at]] + ([messages[at + 1]] if at + 1 < len(messages)
                                and messages[at + 1].meta.get("is_compact_summary") else [])
    after = at + len(removed)
    if after >= len(messages):
        return None
    gone = {m.id for m in removed}
    start = lines.get(messages[at].id, 0)
    raw = messages[after].meta.get("raw")
    parent = raw.get("parentUuid") if isinstance(raw, dict) else None
    seen: set[str] = set()
    while isinstance(parent, str) and parent not in gone and parent not in seen and lines.get(parent, 0) > start:
        seen.add(parent)
        parent = parents.get(parent)
    if not isinstance(parent, str) or parent in gone or parent not in lines:
        return None
    before = messages[at - 1].id if at else None
    order = [m.id for m in removed]
    records = [m.meta.get("raw") or {"type": "system", "uuid": m.id} for m in removed]  # `keep` may drop raw
    out: Extras = []
    emitted = 0
    for anchor, record in extras:
        if anchor in gone:  # it followed the boundary or the summary: it follows them still, where they are
            upto = order.index(anchor) + 1
            out += [(before, r) for r in records[emitted:upto]]
            emitted, anchor = max(emitted, upto), before
        out.append((anchor, record))
    out += [(before, r) for r in records[emitted:]]
    return [m for m in messages if m.id not in gone], out


def _preserved_ids(kept: dict[str, Any], parents: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the ids Claude Code relinks, in order; those of them no record holds). The listed ids when
    there are any, else the segment walked from its tail up the parentUuid chain to its head (a walk
    that breaks off names the id it could not reach)."""
    listed = kept.get("ids")
    if listed:
        return list(listed), [i for i in listed if i not in parents]
    segment = kept.get("segment")
    if not isinstance(segment, dict):
        return [], []
    walked: list[str] = []
    at = segment.get("tail")
    while isinstance(at, str) and at not in walked:
        if at not in parents:
            return [], [at]
        walked.append(at)
        if at == segment.get("head"):
            return walked[::-1], []
        at = parents[at]
    return [], [str(segment.get("head"))]


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


def _mark_unanswered(messages: list[Message], unanswered: set[str], calling: set[str]) -> list[Message]:
    """`validate.mark_unanswered` from what the reader gathered: the call ids no result answers (most
    files: none, and nothing is looked into) and the ids of the messages that call."""
    if not unanswered:
        return messages
    out = messages
    for i, m in enumerate(messages):
        if m.id in calling:
            missing = [c.id for c in m.tool_calls if c.id in unanswered]
            if missing:
                out = out if out is not messages else list(messages)
                out[i] = replace(m, meta={**m.meta, INTERRUPTED: missing})
    return out


def _check_uuid(uuid: Any, seen: dict[str, int], number: int) -> None:
    """A record's uuid (not None) is a string no earlier record of the file has."""
    if not isinstance(uuid, str):
        raise RecordError(f"uuid must be a string, not {type(uuid).__name__}")
    if uuid in seen:
        raise RecordError(f"uuid {uuid!r} is used twice (first on line {seen[uuid]}): "
                           "every record of a session has its own uuid")
    seen[uuid] = number


def _read_message(record: dict[str, Any]) -> Message:
    if not isinstance(record.get("uuid"), str):
        raise RecordError(f"{record['type']} record without a string uuid")
    role, origin, blocks = message_parts(record)
    get = record.get
    meta: dict[str, Any] = {
        "raw": record, "cwd": get("cwd"), "git_branch": get("gitBranch"), "timestamp": get("timestamp"),
        "is_sidechain": True if get("isSidechain") else False, "is_meta": True if get("isMeta") else False,
        "is_compact_summary": True if get("isCompactSummary") else False,
    }
    if "todos" in record:
        meta["todos"] = record["todos"]
    if record["type"] == "assistant":
        meta["usage"] = record["message"].get("usage")
        meta["api_message_id"] = record["message"].get("id")
    elif record["type"] == "system":
        compact = _compact_metadata(record)
        meta.update(compact_boundary=True, trigger=compact.get("trigger"),
                    pre_tokens=compact.get("preTokens"), post_tokens=compact.get("postTokens"),
                    duration_ms=compact.get("durationMs"), dropped_tokens=compact.get("cumulativeDroppedTokens"))
        preserved = _preserved(compact)
        if preserved is not None:
            meta["preserved"] = preserved
    if isinstance(record.get(ID_FIELD), str):
        meta["worksurface_id"] = record[ID_FIELD]
    saved = record.get(META_FIELD)
    if saved is not None:
        if not isinstance(saved, dict):
            raise RecordError(f"{META_FIELD} must be an object")
        meta.update({k: v for k, v in saved.items() if k in SAVED_META})
    return Message(record_id(record), role, blocks, origin, meta)  # type: ignore[arg-type]


def _compact_metadata(record: dict[str, Any]) -> dict[str, Any]:
    """A boundary's compactMetadata, checked: an object with a string trigger and counts."""
    compact = record.get("compactMetadata")
    if compact is None:
        return {}
    if not isinstance(compact, dict):
        raise RecordError(f"compactMetadata must be an object, not a {_json_type(compact)}")
    if compact.get("trigger") is not None and not isinstance(compact["trigger"], str):
        raise RecordError(f"compactMetadata.trigger must be a string, not a {_json_type(compact['trigger'])}")
    for key in ("preTokens", "postTokens", "cumulativeDroppedTokens"):
        value = compact.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise RecordError(f"compactMetadata.{key} must be a number of tokens, not a {_json_type(value)}")
    duration = compact.get("durationMs")
    if duration is not None and (not isinstance(duration, (int, float)) or isinstance(duration, bool)):
        raise RecordError(f"compactMetadata.durationMs must be a number, not a {_json_type(duration)}")
    return compact


def _preserved(compact: dict[str, Any]) -> dict[str, Any] | None:
    """What a boundary says Claude Code kept verbatim (None: nothing): {anchor, ids, all_ids, segment}
    from compactMetadata.preservedMessages (the kept messages named by id, in order, hung on the anchor)
    and preservedSegment (head, anchor and tail of the kept run of the old chain)."""
    listed = compact.get("preservedMessages")
    segment = compact.get("preservedSegment")
    if listed is None and segment is None:
        return None
    out: dict[str, Any] = {"anchor": None, "ids": [], "all_ids": [], "segment": None}
    if segment is not None:
        if not isinstance(segment, dict):
            raise RecordError(f"compactMetadata.preservedSegment must be an object, not a {_json_type(segment)}")
        ends = {k: segment.get(f"{k}Uuid") for k in ("head", "anchor", "tail")}
        for key, value in ends.items():
            if not isinstance(value, str):
                raise RecordError(f"compactMetadata.preservedSegment.{key}Uuid must be a string, not a "
                                  f"{_json_type(value)}")
        out.update(anchor=ends["anchor"], segment=ends)
    if listed is not None:
        if not isinstance(listed, dict):
            raise RecordError(f"compactMetadata.preservedMessages must be an object, not a {_json_type(listed)}")
        anchor = listed.get("anchorUuid")
        if not isinstance(anchor, str):
            raise RecordError("compactMetadata.preservedMessages.anchorUuid must be a string, not a "
                              f"{_json_type(anchor)}")
        for key, name in (("uuids", "ids"), ("allUuids", "all_ids")):
            ids = listed.get(key, [])
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise RecordError(f"compactMetadata.preservedMessages.{key} must be a list of uuid strings")
            out[name] = list(ids)
        out["anchor"] = anchor
    return out


def _compact_instructions(text: str) -> str | None:
    """The instructions of a queued `/compact <instructions>` (None for a bare /compact or another command)."""
    command, _, rest = text.strip().partition(" ")
    return (rest.strip() or None) if command == COMPACT_COMMAND else None


def _json_type(value: Any) -> str:
    names = {str: "string", list: "list", dict: "object", bool: "boolean", int: "number", float: "number"}
    return names.get(type(value), type(value).__name__)


def _queued_text(content: Any) -> str:
    if isinstance(content, list):  # newer versions may queue content blocks
        return "\n".join(b.get("text", "") for b in content
                         if isinstance(b, dict) and b.get("type") == "text")
    return content if isinstance(content, str) else ""
