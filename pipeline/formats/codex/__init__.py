"""Codex CLI rollout JSONL (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): one record per line,
`{"timestamp", "ordinal", "type", "payload", ...}`.

Every `response_item` is one `Message`: a `message` (role user, assistant, developer -> system),
`reasoning` (a Thinking block), `function_call` / `custom_tool_call` / `local_shell_call` (a ToolCall)
and their `*_output` records (a ToolResult, role tool), and any other item kind (`web_search_call`,
`ghost_snapshot`, an encrypted `compaction`) as an assistant message holding one Opaque block, so it
keeps its place. User-role messages the harness wrote (`<environment_context>`, AGENTS.md
instructions) are role system with meta `is_meta`, as they are standing context, not user turns.

A `compacted` record becomes a boundary message (meta `compact_boundary`, `made_by`, `trigger`,
`pre_tokens`, `post_tokens`, as Claude Code's compact_boundary) followed by one message per item of its
`replacement_history` (what Codex sends from then on; the item that carries the summary has meta
`is_compact_summary`), so `view.live_slice` starts at Codex's last compaction. A record with only a
`message` (older Codex) gives the boundary and one summary message.

Everything else (session_meta, turn_context, event_msg, world_state, token_usage_record, future kinds)
is kept in `Transcript.extras`. Each `token_count` event's `last_token_usage` (Codex's field names) is
put on the assistant message it measures as meta `usage`.

Writing emits an unchanged message's source record as it was. A changed one keeps its record with the
payload re-encoded. A boundary worksurface made becomes a `compacted` record shaped as Codex writes
its own (`message` = the summary, `replacement_history` = the standing context before the boundary,
the summary and worksurface's reinjected messages); the kept tail follows as ordinary records, so
`codex exec resume` continues from it. What only worksurface needs to read its own output back (ids,
origins) rides in a record-level `worksurface` key that Codex ignores.
"""

from .reader import (NAME, RESPONSE_META, SNIFF_TYPES, WRITABLE, group_responses, item_parts, read, read_records,
                     sniff)
from .writer import encode_block, encode_message, kept_payload, write, write_chunks

__all__ = ["NAME", "RESPONSE_META", "SNIFF_TYPES", "WRITABLE", "encode_block", "encode_message", "group_responses",
           "item_parts", "kept_payload", "read", "read_records", "sniff", "write", "write_chunks"]
