"""What a harness sends after its own compaction, as worksurface messages, so the rebuilt surface can
skip what it already shows.

The transcript holds the compaction once the harness has written it: its boundary, its summary, the
messages it kept and (Claude Code) the attachment records it re-attached, the files it read again
among them. Codex writes its `compacted` item before the SessionStart hook runs; Claude Code 2.1
writes its boundary only after its hooks ran, so at SessionStart the transcript still ends before
the compaction and nothing of the new context can be known (`[]`: the surface then skips nothing).
"""

from __future__ import annotations

from typing import Any, Collection, Sequence

from ..core.model import Message, Origin, Text, ToolCall, ToolResult
from ..formats.base import Transcript

# Claude Code's record type for what it attaches to the context (files re-read after a compaction,
# the todo list, skills, hook output ...), and the attachment type of a re-read file.
ATTACHMENT_RECORD = "attachment"
FILE_ATTACHMENT = "file"
# The tool a re-attached file is shown as, so the files reinjector's "the tail shows it" check (a read
# of the same path with the same content) recognises it.
READ_TOOL = "Read"


def harness_boundaries(messages: Sequence[Message]) -> list[str]:
    """Ids of the compact boundaries the harness itself wrote, oldest first."""
    return [m.id for m in messages if m.meta.get("compact_boundary") and m.origin is Origin.CONVERSATION]


def harness_view(transcript: Transcript, known: Collection[str] | None) -> list[Message]:
    """The messages the harness sends after the compaction that just ran: from its newest boundary
    on, when that boundary is this compaction's (one not in `known`, the boundaries the transcript had
    before it; with `known` None, one no assistant turn followed yet), plus what it re-attached.
    [] when the transcript does not hold this compaction yet."""
    messages = transcript.messages
    at = next((i for i in range(len(messages) - 1, -1, -1)
               if messages[i].meta.get("compact_boundary") and messages[i].origin is Origin.CONVERSATION), None)
    if at is None:
        return []
    boundary = messages[at]
    fresh = (boundary.id not in known) if known is not None else \
        not any(m.role == "assistant" for m in messages[at + 1:])
    if not fresh:
        return []
    live = list(messages[at:])
    ids = {m.id for m in live}
    attached = [record for anchor, record in transcript.extras
                if anchor in ids and isinstance(record, dict) and record.get("type") == ATTACHMENT_RECORD]
    return live + [m for n, record in enumerate(attached) for m in _attachment_messages(n, record)]


def _attachment_messages(n: int, record: dict[str, Any]) -> list[Message]:
    """A re-attached file as a read of it (a call and its result); any other attachment as the text
    the harness rendered for the model."""
    attachment = record.get("attachment")
    if not isinstance(attachment, dict):
        return []
    if attachment.get("type") == FILE_ATTACHMENT:
        path, content = _file_of(attachment)
        if path is not None and content is not None:
            call = ToolCall(f"harness-attachment-{n}", READ_TOOL, {"file_path": path})
            return [Message(f"harness-attachment-{n}-call", "assistant", (call,), Origin.CONVERSATION),
                    Message(f"harness-attachment-{n}-result", "user", (ToolResult(call.id, content),),
                            Origin.CONVERSATION)]
    texts = [r["content"] for r in record.get("rendered") or () if isinstance(r, dict) and isinstance(r.get("content"), str)]
    if not texts:
        return []
    return [Message(f"harness-attachment-{n}", "user", (Text("\n".join(texts)),), Origin.CONVERSATION,
                    {"is_meta": True})]


def _file_of(attachment: dict[str, Any]) -> tuple[str | None, str | None]:
    """(path, text) of a Claude Code file attachment (`content.file.filePath` / `.content`)."""
    content = attachment.get("content")
    file = content.get("file") if isinstance(content, dict) else None
    if not isinstance(file, dict):
        return None, None
    path = file.get("filePath") or attachment.get("filename")
    text = file.get("content")
    return (path if isinstance(path, str) else None), (text if isinstance(text, str) else None)
