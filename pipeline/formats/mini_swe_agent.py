"""mini-swe-agent trajectories: a list of {role, content}, or an object with `messages`.

An assistant message with exactly one bash block (```mswea_bash_command or ```bash: mini-swe-agent
runs a response only when it holds exactly one) -> Text(the rest of the response) +
ToolCall("mswea-{index}", "bash", {"command": ...}); the user message right after it is the
observation (`<returncode>` / `<output>`, a timeout notice, or the final submission) -> ToolResult.

Write gives an unchanged message its source entry back (equal JSON for an unmodified file) and makes
the rest in mini-swe-agent's shape: one bash block per assistant turn, each followed by its output
as a user message (several calls in one message become consecutive turns); calls other than a shell
command were made text by convert.py; worksurface's own messages are entries marked with
`worksurface_origin`, which read restores.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from ..core.errors import FormatError
from ..core.model import Block, Message, Text, ToolCall, ToolResult
from .base import Transcript
from .convert import ORIGIN_FIELD, mark_origin, origin_of, shell_command
from .turns import Results
from .jsondoc import as_messages, content_text, parse_json, peek_json, text_of
from .validate import check_pairing, mark_unanswered

NAME = "mini-swe-agent"
WRITABLE = True

_EXPECTED = 'a JSON list of {role, content} messages or an object with a "messages" list'
_ROLES = ("system", "user", "assistant")
_ACTION = re.compile(r"```(?:mswea_bash_command|bash)[ \t]*\n(.*?)\n?```", re.DOTALL)
SHELL_TOOL = "bash"
_FORMAT_TAG = "mini-swe-agent"        # prefix of `trajectory_format` in saved runs
_SNIFF_RECORDS = 8
SOURCE = f"{NAME}.source"             # message meta: the entry it was read from
SHAPE = "_shape"                      # Transcript.meta: "list" or "object" (a document with `messages`)
TRAJECTORY_FORMAT = f"{_FORMAT_TAG}-1"   # what mini-swe-agent 1.x writes in saved runs
FENCE = "mswea_bash_command"          # the info string of the bash block written for a call


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
        body = text_of(raw.get("content"), path, f"messages[{i}]")
        meta = {k: v for k, v in raw.items() if k not in ("role", "content")}
        blocks: list[Block]
        if raw["role"] == "assistant":
            blocks, pending = _assistant(i, body)
        elif raw["role"] == "user" and pending:
            blocks, pending = [ToolResult(pending, body)], None
        else:
            blocks = [Text(body)]
        meta[SOURCE] = raw
        messages.append(Message(str(i), raw["role"], tuple(blocks), origin_of(raw, path, f"messages[{i}]"),
                                meta=meta))
    check_pairing(messages, path)
    meta = {k: v for k, v in doc.items() if k != "messages"} if isinstance(doc, dict) else {}
    meta[SHAPE] = "object" if isinstance(doc, dict) else "list"
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


# ---- write -----------------------------------------------------------------------------------

def write(transcript: Transcript, messages: Sequence[Message] | None = None) -> str:
    msgs = list(transcript.messages if messages is None else messages)
    own = transcript.format == NAME
    originals = {m.id: m for m in transcript.messages} if own else {}
    results = Results(msgs, transcript.path)
    entries: list[Any] = []
    for m in msgs:
        entries.extend(_entries(m, originals, results, transcript.path))
    if transcript.meta.get(SHAPE) is None:  # not read from a file: the saved-run shape, which names
        # the format (a bare list of messages may look like any chat)
        return json.dumps({"trajectory_format": TRAJECTORY_FORMAT, "messages": entries}, ensure_ascii=False,
                          indent=2)
    doc = {k: v for k, v in transcript.meta.items() if k != SHAPE}
    if transcript.meta.get(SHAPE) == "object":
        return json.dumps({**doc, "messages": entries}, ensure_ascii=False, indent=2)
    return json.dumps(entries, ensure_ascii=False, indent=2)


def _entries(m: Message, originals: dict[str, Message], results: Results, path: str | None) -> list[Any]:
    """The entries for one message: its source entry when unchanged, else new ones; each shell call
    is followed by its result."""
    unchanged = originals.get(m.id) == m and isinstance(m.meta.get(SOURCE), dict)
    if m.role != "assistant" or not m.tool_calls:
        if unchanged and not (m.tool_results and all(results.given(r) for r in m.tool_results)):
            return [m.meta[SOURCE]]
        texts = [r.content for r in m.tool_results if not results.given(r)]
        texts += [b.text for b in m.blocks if isinstance(b, Text)]
        if not texts:
            return []
        role = "user" if m.role == "tool" else m.role
        return [_entry(m, role, "\n\n".join(texts))]
    out: list[Any] = []
    said = "\n\n".join(b.text for b in m.blocks if isinstance(b, Text) and b.text.strip())
    for k, call in enumerate(m.tool_calls):
        command = shell_command(call)
        if command is None:
            raise FormatError(f"call {call.name!r} is not a shell command; mini-swe-agent runs only bash",
                              path=path, record=m.id)
        if unchanged and len(m.tool_calls) == 1:
            out.append(m.meta[SOURCE])
        else:
            thought = said if k == 0 else ""
            block = f"```{FENCE}\n{command}\n```"
            out.append(_entry(m, "assistant", f"{thought}\n\n{block}" if thought else block))
        result = results.take(call.id)
        if result is not None:
            out.append(_result_entry(result, results, originals))
    return out


def _entry(m: Message, role: str, content: str) -> dict[str, Any]:
    """A new entry; a message read from this format keeps its other fields."""
    source = m.meta.get(SOURCE)
    base = ({k: v for k, v in source.items() if k not in ("role", "content", ORIGIN_FIELD)}
            if isinstance(source, dict) else {})
    return mark_origin({"role": role, "content": content, **base}, m)


def _result_entry(result: ToolResult, results: Results, originals: dict[str, Message]) -> dict[str, Any]:
    source = results.message_of(result)
    unchanged = originals.get(source.id) == source and len(source.blocks) == 1
    if unchanged and isinstance(source.meta.get(SOURCE), dict):
        return source.meta[SOURCE]
    return _entry(source, "user", result.content)
