"""mini-swe-agent trajectories (read-only): a list of {role, content}, or an object with `messages`.

An assistant message with exactly one bash block (```mswea_bash_command or ```bash: mini-swe-agent
runs a response only when it holds exactly one) -> Text(the rest of the response) +
ToolCall("mswea-{index}", "bash", {"command": ...}); the user message right after it is the
observation (`<returncode>` / `<output>`, a timeout notice, or the final submission) -> ToolResult.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import FormatError
from ..model import Block, Message, Text, ToolCall, ToolResult
from .base import Transcript
from .jsondoc import as_messages, content_text, parse_json, peek_json
from .validate import check_pairing, mark_unanswered

NAME = "mini-swe-agent"
WRITABLE = False

_EXPECTED = 'a JSON list of {role, content} messages or an object with a "messages" list'
_ROLES = ("system", "user", "assistant")
_ACTION = re.compile(r"```(?:mswea_bash_command|bash)[ \t]*\n(.*?)\n?```", re.DOTALL)
SHELL_TOOL = "bash"
_FORMAT_TAG = "mini-swe-agent"        # prefix of `trajectory_format` in saved runs
_SNIFF_RECORDS = 8


def sniff(text: str, path: str | None) -> bool:
    doc = peek_json(text)
    if isinstance(doc, dict) and str(doc.get("trajectory_format", "")).startswith(_FORMAT_TAG):
        return True
    msgs = as_messages(doc)
    if not msgs:
        return False
    head = msgs[:_SNIFF_RECORDS]
    if not all(isinstance(m, dict) and m.get("role") in _ROLES and "tool_calls" not in m for m in head):
        return False
    return any(_signature(m) for m in head)


def _signature(m: dict[str, Any]) -> bool:
    text = content_text(m.get("content"))
    if m["role"] == "assistant":
        return "```mswea_bash_command" in text
    return m["role"] == "user" and text.lstrip().startswith("<returncode>")


def read(text: str, path: str | None = None) -> Transcript:
    doc = parse_json(text, path, _EXPECTED)
    raw_msgs = as_messages(doc)
    if raw_msgs is None:
        raise FormatError(f"expected {_EXPECTED}, found {type(doc).__name__}", path=path)
    messages: list[Message] = []
    pending: str | None = None
    for i, raw in enumerate(raw_msgs):
        if not isinstance(raw, dict) or raw.get("role") not in _ROLES:
            raise FormatError(f"expected a message with role one of {', '.join(_ROLES)}", path=path,
                              record=f"messages[{i}]")
        body = content_text(raw.get("content"))
        meta = {k: v for k, v in raw.items() if k not in ("role", "content")}
        blocks: list[Block]
        if raw["role"] == "assistant":
            blocks, pending = _assistant(i, body)
        elif raw["role"] == "user" and pending:
            blocks, pending = [ToolResult(pending, body)], None
        else:
            blocks = [Text(body)]
        messages.append(Message(str(i), raw["role"], tuple(blocks), meta=meta))
    check_pairing(messages, path)
    meta = {k: v for k, v in doc.items() if k != "messages"} if isinstance(doc, dict) else {}
    return Transcript(mark_unanswered(messages), NAME, path, meta=meta)


def _assistant(i: int, body: str) -> tuple[list[Block], str | None]:
    actions = list(_ACTION.finditer(body))
    if len(actions) != 1:
        return [Text(body)], None          # rejected by mini-swe-agent: no command ran
    action = actions[0]
    thought = (body[: action.start()] + body[action.end():]).strip()
    call_id = f"mswea-{i}"
    blocks: list[Block] = [Text(thought)] if thought else []
    blocks.append(ToolCall(call_id, SHELL_TOOL, {"command": action.group(1)}))
    return blocks, call_id
