"""SWE-agent `.traj` files (read-only): `history` is what the model saw, so messages come from it.

An assistant message with native `tool_calls` gives those calls; one with only an `action` (text
tool formats) gives Text(thought) + ToolCall(id "swe-{index}", input {"command": action}) named after
the SWE-agent interface command it runs (`open`, `edit`, `find_file`, ...) or `bash` for a plain
shell line, so toolkinds can classify it; the next user/tool message is that call's result.
`trajectory` (action/observation/thought per step) repeats the history and is not re-read.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import FormatError
from ..model import Block, Message, Text, ToolCall, ToolResult
from .base import Transcript
from .jsondoc import content_text, parse_json, peek_json
from .validate import CallIds, check_pairing, mark_unanswered

NAME = "swe-agent"
WRITABLE = False

_EXPECTED = 'a SWE-agent trajectory object with a "history" list'
_ROLES = ("system", "user", "assistant", "tool")
# Commands of SWE-agent's own interface (tools/ bundles and CTF tools); any other first word is a
# shell command line and the call is named `bash`.
_INTERFACE_COMMANDS = frozenset({
    "open", "goto", "scroll_up", "scroll_down", "create", "edit", "insert", "append", "search_dir",
    "search_file", "find_file", "filemap", "submit", "exit_forfeit", "str_replace_editor",
    "set_cursors", "decompile", "disassemble", "debug_start", "debug_add_breakpoint",
    "debug_continue", "debug_step", "debug_exec", "debug_stop", "connect_start",
    "connect_sendline", "connect_exec", "connect_stop", "review_on_submit",
})
SHELL_TOOL = "bash"
# History keys the message model represents; the rest (agent, message_type, is_demo, ...) go to meta.
_MODELED = ("role", "content", "thought", "action", "tool_calls", "tool_call_ids")
# How many history entries sniffing looks at.
_SNIFF_RECORDS = 5


def sniff(text: str, path: str | None) -> bool:
    doc = peek_json(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
        return False
    head = doc["history"][:_SNIFF_RECORDS]
    return bool(head) and all(isinstance(m, dict) and "role" in m and ("agent" in m or "message_type" in m)
                              for m in head)


def read(text: str, path: str | None = None) -> Transcript:
    doc = parse_json(text, path, _EXPECTED)
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
        raise FormatError(f"expected {_EXPECTED}", path=path)
    history = doc["history"]
    messages: list[Message] = []
    pending: str | None = None       # synthesized call waiting for its observation
    ids = CallIds()
    for i, raw in enumerate(history):
        record = f"history[{i}]"
        if not isinstance(raw, dict) or raw.get("role") not in _ROLES:
            raise FormatError(f"expected a message with role one of {', '.join(_ROLES)}", path=path,
                              record=record)
        role = raw["role"]
        meta = {k: v for k, v in raw.items() if k not in _MODELED}
        body = content_text(raw.get("content"))
        if role == "assistant":
            blocks, pending = _assistant(i, raw, body, ids, path, record)
        elif role == "tool":
            answered = [ids.result(str(c)) for c in raw.get("tool_call_ids") or ()]
            answered = answered or ([pending] if pending else [])
            if not answered:
                raise FormatError("tool message without tool_call_ids", path=path, record=record)
            blocks, pending = [ToolResult(cid, body) for cid in answered], None
        elif role == "user" and pending:
            blocks, pending = [ToolResult(pending, body)], None
        else:
            blocks = [Text(body)]
        messages.append(Message(str(i), role, tuple(blocks), meta=meta))
    check_pairing(messages, path)
    steps = doc.get("trajectory")
    meta = {k: v for k, v in doc.items() if k not in ("history", "trajectory")}
    meta["steps"] = len(steps) if isinstance(steps, list) else 0
    return Transcript(mark_unanswered(messages), NAME, path, meta=meta)


def _assistant(i: int, raw: dict[str, Any], body: str, ids: CallIds, path: str | None,
               record: str) -> tuple[list[Block], str | None]:
    """Blocks of an assistant entry, and the id of a synthesized call that awaits an observation."""
    native = raw.get("tool_calls")
    if native:
        blocks: list[Block] = [Text(body)] if body.strip() else []
        for k, tc in enumerate(native):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if not (isinstance(fn, dict) and isinstance(tc.get("id"), str)):
                raise FormatError('expected a tool call {"id", "function": {"name", "arguments"}}',
                                  path=path, record=f"{record}.tool_calls[{k}]")
            name = str(fn.get("name", ""))
            blocks.append(ToolCall(ids.call(tc["id"]), name, _arguments(fn.get("arguments"))))
        return blocks, None
    action = raw.get("action")
    if not isinstance(action, str):
        return [Text(body)], None
    thought = raw.get("thought")
    thought = thought if isinstance(thought, str) else body
    call_id = f"swe-{i}"
    words = action.split()
    name = words[0] if words and words[0] in _INTERFACE_COMMANDS else SHELL_TOOL
    blocks = [Text(thought)] if thought.strip() else []
    blocks.append(ToolCall(call_id, name, {"command": action}))
    return blocks, call_id


def _arguments(args: Any) -> dict[str, Any]:
    if isinstance(args, dict):
        return args
    try:
        value = json.loads(args) if isinstance(args, str) else None
    except json.JSONDecodeError:
        value = None
    return value if isinstance(value, dict) else {"_raw": args}
