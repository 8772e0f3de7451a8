"""The JSON a harness sends a command hook on stdin, and the JSON the hook prints back.

Claude Code and Codex share the shape: `session_id`, `transcript_path`, `cwd`, `hook_event_name`,
plus the event's own fields (`source` for SessionStart: startup, resume, clear, compact, fork;
`trigger` for PreCompact and PostCompact: manual or auto). A SessionStart hook adds context to the
next model turn with `{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": ...}}`
(both clients); PreCompact's plain stdout would become Claude Code's compaction instructions, so
worksurface prints nothing there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import HookError

SESSION_START = "SessionStart"
PRE_COMPACT = "PreCompact"
POST_COMPACT = "PostCompact"
# The SessionStart source both clients pass right after their own compaction.
COMPACT_SOURCE = "compact"


@dataclass(frozen=True)
class HookInput:
    """One hook call's input; `raw` is the whole JSON object as received."""

    event: str
    session_id: str
    transcript_path: Path | None
    cwd: str | None
    source: str | None = None
    trigger: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def after_compaction(self) -> bool:
        return self.event == SESSION_START and self.source == COMPACT_SOURCE


def parse_input(text: str) -> HookInput:
    """The hook input in `text`, or HookError saying what is wrong with it."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise HookError(f"hook input on stdin is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise HookError(f"hook input on stdin must be a JSON object, not {type(data).__name__}")
    event, session_id = data.get("hook_event_name"), data.get("session_id")
    if not isinstance(event, str) or not event:
        raise HookError("hook input has no hook_event_name")
    if not isinstance(session_id, str) or not session_id:
        raise HookError(f"{event} hook input has no session_id")
    transcript = data.get("transcript_path")
    if transcript is not None and not isinstance(transcript, str):
        raise HookError(f"{event} hook input: transcript_path must be a string or null")
    return HookInput(event, session_id, Path(transcript) if transcript else None,
                     _text(data.get("cwd")), _text(data.get("source")), _text(data.get("trigger")), data)


def session_start_reply(context: str) -> dict[str, Any]:
    """The SessionStart reply that adds `context` to the harness's next model turn."""
    return {"hookSpecificOutput": {"hookEventName": SESSION_START, "additionalContext": context}}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
