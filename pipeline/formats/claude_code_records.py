"""What a Claude Code session record is, for the reader and the writer alike: the record types, the
fields worksurface adds to its own records, and how a message record's id, role, origin and blocks
are read (a pure function of the record, so the writer can tell an unchanged message from its record)."""

from __future__ import annotations

import uuid
from typing import Any

from ..core.model import ROLES, Block, Origin, Text
from .claude_code_blocks import decode_content

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
                         "custom-title", "attachment", "last-prompt", "cost-state", "mode", "tools-used",
                         "atis-latch", "api-request", "api-request-shape", "api-request-blob",
                         "file-history-delta"})
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
# Prefix of the API message ids of kept assistant records copied into a new chain (Anthropic's own
# ids start with "msg_"; the rest is derived from the original id, so the records of one message
# still share one id).
API_ID_PREFIX = "msg_ws"
# Namespace of the uuids of records worksurface writes (uuid5 over session, epoch and content).
UUID_NAMESPACE = uuid.UUID("6d1d2b4e-6a3f-5c1e-9b7a-0c5e2f7d8a13")
QUEUE_ENQUEUE = "enqueue"
# A manual compaction's instructions: Claude Code 2.1.2xx queues `/compact <instructions>` and records
# them nowhere else (2.1.3xx also writes a <command-args> record after the boundary).
COMPACT_COMMAND = "/compact"
# Meta of a message Claude Code kept verbatim across its last compaction (compactMetadata
# preservedMessages / preservedSegment): the boundary's id, and the id of the message the record
# follows in the file (the reader moves it after the summary, as Claude Code relinks it; the writer
# puts its record back where it was read).
PRESERVED_BY = "preserved_by"
FILE_AFTER = "file_after"


class RecordError(ValueError):
    """A bad record; `read` adds the path and line."""


def is_message_record(record: dict[str, Any]) -> bool:
    kind = record.get("type")
    return kind in MESSAGE_TYPES or (kind == "system" and record.get("subtype") == BOUNDARY_SUBTYPE)


def record_id(record: dict[str, Any]) -> str:
    """The Message id of a record: its uuid. A record of worksurface's own also names the id the
    message had when written (`worksurfaceId`, kept in meta `worksurface_id`); it is not reused, so a
    later compaction that makes the same message again (same content, same deterministic id) does
    not meet its own earlier copy under one id."""
    saved = record.get(ID_FIELD)
    if saved is not None and not isinstance(saved, str):
        raise RecordError(f"{ID_FIELD} must be a string")
    return record["uuid"]


def message_parts(record: dict[str, Any]) -> tuple[str, Origin, tuple[Block, ...]]:
    """(role, origin, blocks) of a message record: a pure function, so `write` can re-derive it."""
    kind = record["type"]
    if kind == "system":
        content = record.get("content", "")
        if not isinstance(content, str):
            raise RecordError("compact_boundary content must be a string")
        blocks: tuple[Block, ...] = (Text(content),)
    else:
        message = record.get("message")
        if not isinstance(message, dict):
            raise RecordError(f"{kind} record without a 'message' object")
        blocks = decode_content(message.get("content"))
    role = record.get(ROLE_FIELD, kind)
    if role not in ROLES:
        raise RecordError(f"unknown {ROLE_FIELD} {role!r}")
    if ORIGIN_FIELD not in record:  # every record Claude Code wrote: no enum lookup
        return role, Origin.CONVERSATION, blocks
    try:
        origin = Origin(record[ORIGIN_FIELD])
    except ValueError:
        raise RecordError(f"unknown {ORIGIN_FIELD} {record.get(ORIGIN_FIELD)!r}") from None
    return role, origin, blocks


# Who produced what an `attachment` record carries (its `attachment.type`), for the facts that read
# them: every attachment is Claude Code's own record, so its text has the harness's authority unless
# it carries what the user typed (a queued prompt) or changes what the model can call (a tool, MCP
# or agent delta: a tool announcement), or is a file Claude Code read again (an observation).
ATTACHMENT_PRODUCERS = {
    "hook_additional_context": "harness", "hook_success": "harness", "hook_blocking_error": "harness",
    "hook_non_blocking_error": "harness", "hook_stopped_continuation": "harness", "async_hook_response": "harness",
    "deferred_tools_delta": "tools", "mcp_instructions_delta": "tools", "agent_listing_delta": "tools",
    "queued_command": "user",
    "file": "file", "already_read_file": "file", "edited_text_file": "file", "compact_file_reference": "file",
}
HARNESS_PRODUCER = "harness"


def attachment_producer(attachment: Any) -> str:
    """"harness", "tools", "user" or "file" for an attachment record's `attachment` object (see
    ATTACHMENT_PRODUCERS); a kind not listed is the harness's (Claude Code adds kinds each release)."""
    kind = attachment.get("type") if isinstance(attachment, dict) else None
    return ATTACHMENT_PRODUCERS.get(kind, HARNESS_PRODUCER) if isinstance(kind, str) else HARNESS_PRODUCER
