"""SWE-agent `.traj` files: `history` is what the model saw, so messages come from it.

An assistant message with native `tool_calls` gives those calls; one with only an `action` (text
tool formats) gives Text(thought) + ToolCall(id "swe-{index}", input {"command": action}) named after
the SWE-agent interface command it runs (`open`, `edit`, `find_file`, ...) or `bash` for a plain
shell line, so toolkinds can classify it; the next user/tool message is that call's result.
`trajectory` (action/observation/thought per step) repeats the history and is not re-read; it is
kept (Transcript.meta `trajectory`) and written back as it was: it records the run, not the context.

Write gives an unchanged message its source entry back (equal JSON for an unmodified file) and makes
the rest as SWE-agent does: a call read from a text action (id `swe-N`, input one command line) that
has a result (or ends the view) as a text action (`thought`, `action`, the command in a fence
in `content`) answered by the next user message; any other call as native `tool_calls` answered by
`tool` messages. worksurface's own messages are entries marked with `worksurface_origin`, which read
restores. A file made from another format gets a trajectory of its calls and results.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from ..core import strictjson
from ..core.errors import FormatError
from ..core.model import Block, Message, Text, ToolCall, ToolResult
from .base import Transcript
from .convert import ORIGIN_FIELD, mark_origin, origin_of
from .turns import Results
from .jsondoc import expect, parse_json, peek_json, text_of
from .validate import CallIds, check_pairing, mark_unanswered

NAME = "swe-agent"
WRITABLE = True

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
SOURCE = f"{NAME}.source"             # message meta: the history entry it was read from
TRAJECTORY = "trajectory"             # Transcript.meta: the file's trajectory, as read
READ_COUNT = "_messages"              # Transcript.meta: how many messages the history made
DEFAULT_AGENT = "main"                # SWE-agent 1.x's name for the agent when the source has none


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
        body = text_of(raw.get("content"), path, record)
        expect(raw.get("tool_calls"), list, path, record, "tool_calls")
        expect(raw.get("tool_call_ids"), list, path, record, "tool_call_ids")
        expect(raw.get("action"), str, path, record, "action")
        expect(raw.get("thought"), str, path, record, "thought")
        if role == "assistant":
            blocks, pending = _assistant(i, raw, body, ids, path, record)
        elif role == "tool":
            answered = [ids.result(expect(c, str, path, record, "a tool_call_ids entry"))
                        for c in raw.get("tool_call_ids") or ()]
            answered = answered or ([pending] if pending else [])
            if not answered:
                raise FormatError("tool message without tool_call_ids", path=path, record=record)
            blocks, pending = [ToolResult(cid, body) for cid in answered], None
        elif role == "user" and pending:
            blocks, pending = [ToolResult(pending, body)], None
        else:
            blocks = [Text(body)]
        meta[SOURCE] = raw
        messages.append(Message(str(i), role, tuple(blocks), origin_of(raw, path, record), meta=meta))
    check_pairing(messages, path)
    steps = doc.get("trajectory")
    meta = {k: v for k, v in doc.items() if k not in ("history", "trajectory")}
    meta["steps"] = len(steps) if isinstance(steps, list) else 0
    if "trajectory" in doc:
        meta[TRAJECTORY] = steps
    meta[READ_COUNT] = len(messages)
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
            name = expect(fn.get("name"), str, path, f"{record}.tool_calls[{k}]", "function.name") or ""
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
        value = strictjson.loads(args) if isinstance(args, str) else None
    except ValueError:  # broken JSON, or a number it would not write back
        value = None
    return value if isinstance(value, dict) else {"_raw": args}


# ---- write -----------------------------------------------------------------------------------

# History entry keys that write derives from the message (the rest of a source entry is kept).
_SYNTHESIZED_ID = re.compile(r"swe-\d+")
_DERIVED = frozenset({"role", "content", "thought", "action", "tool_calls", "tool_call_ids", ORIGIN_FIELD})


def write(transcript: Transcript, messages: Sequence[Message] | None = None) -> str:
    msgs = list(transcript.messages if messages is None else messages)
    own = transcript.format == NAME
    writer = _Writer({m.id: m for m in transcript.messages} if own else {}, Results(msgs, transcript.path),
                     _agent(transcript.messages))
    writer.last = msgs[-1] if msgs else None
    for m in msgs:
        writer.message(m)
    doc = {k: v for k, v in transcript.meta.items() if k not in ("steps", READ_COUNT)} if own else {}
    if "steps" not in transcript.meta:  # not read from a SWE-agent file: the steps of this history
        doc[TRAJECTORY] = writer.steps
    elif isinstance(doc.get(TRAJECTORY), list) and (transcript.meta.get(READ_COUNT)
                                                   != len(transcript.messages)):
        # Cut at a point (the history's first messages): the steps taken up to there, one per action.
        actions = sum(1 for m in transcript.messages if m.role == "assistant" and m.tool_calls)
        doc[TRAJECTORY] = doc[TRAJECTORY][:actions]
    return json.dumps({**doc, "history": writer.history}, ensure_ascii=False, indent=2)


def _agent(messages: Sequence[Message]) -> str:
    for m in messages:
        source = m.meta.get(SOURCE)
        if isinstance(source, dict) and isinstance(source.get("agent"), str):
            return source["agent"]
    return DEFAULT_AGENT


class _Writer:
    def __init__(self, originals: dict[str, Message], results: Results, agent: str) -> None:
        self.originals, self.results, self.agent = originals, results, agent
        self.history: list[Any] = []
        self.steps: list[dict[str, Any]] = []
        self.last: Message | None = None     # a call in it may stay unanswered as a text action

    def _unchanged(self, m: Message) -> bool:
        return self.originals.get(m.id) == m and isinstance(m.meta.get(SOURCE), dict)

    def _entry(self, m: Message, role: str, content: str, **fields: Any) -> dict[str, Any]:
        source = m.meta.get(SOURCE)
        base = ({k: v for k, v in source.items() if k not in _DERIVED} if isinstance(source, dict)
                else {"agent": self.agent})
        return mark_origin({"role": role, "content": content, **fields, **base}, m)

    def message(self, m: Message) -> None:
        if m.role == "assistant" and m.tool_calls:
            self._calls(m)
            return
        pending = [r for r in m.tool_results if not self.results.given(r)]
        if self._unchanged(m) and not (m.tool_results and not pending):
            self.history.append(m.meta[SOURCE])
            return
        for r in pending:       # results of native calls, one tool message each
            self.history.append(self._entry(m, "tool", r.content, tool_call_ids=[r.call_id]))
        text = "\n\n".join(b.text for b in m.blocks if isinstance(b, Text))
        if any(isinstance(b, Text) for b in m.blocks):   # a message left empty is not written
            self.history.append(self._entry(m, "user" if m.role == "tool" else m.role, text))

    def _calls(self, m: Message) -> None:
        said = "\n\n".join(b.text for b in m.blocks if isinstance(b, Text) and b.text.strip())
        calls = m.tool_calls
        action = _text_action(calls[0]) if len(calls) == 1 else None
        if action is not None and not self.results.has(calls[0].id) and m is not self.last:
            action = None       # unanswered mid-view: a text action would take the next message as output
        if self._unchanged(m) and (action is not None or not _text_action_source(m)):
            self.history.append(m.meta[SOURCE])
        elif action is not None:
            fence = f"```\n{action.rstrip(chr(10))}\n```"
            self.history.append(self._entry(m, "assistant", f"{said}\n\n{fence}" if said else fence,
                                            thought=said, action=action))
        else:
            native = [{"id": c.id, "type": "function",
                       "function": {"name": c.name, "arguments": _args_json(c)}} for c in calls]
            self.history.append(self._entry(m, "assistant", said, thought=said,
                                            action="\n".join(_describe(c) for c in calls), tool_calls=native))
        for c in calls:
            result = self.results.take(c.id) if action is not None else None
            if result is not None:
                self.history.append(self._result(result, "user"))
            self.steps.append({"action": action if action is not None else _describe(c),
                               "observation": self._observation(c.id), "response": said, "thought": said})

    def _result(self, result: ToolResult, role: str) -> dict[str, Any]:
        source = self.results.message_of(result)
        if self._unchanged(source) and len(source.blocks) == 1:
            return source.meta[SOURCE]
        return self._entry(source, role, result.content)

    def _observation(self, call_id: str) -> str:
        result = self.results.result_of(call_id)
        return result.content if result is not None else ""


def _text_action(call: ToolCall) -> str | None:
    """The command of a call read from a text action (a synthesized id; a provider's id is kept by
    writing the call natively)."""
    command = call.input.get("command")
    if not (_SYNTHESIZED_ID.fullmatch(call.id) and set(call.input) == {"command"} and isinstance(command, str)):
        return None
    words = command.split()
    name = words[0] if words and words[0] in _INTERFACE_COMMANDS else SHELL_TOOL
    return command if call.name == name else None


def _text_action_source(m: Message) -> bool:
    source = m.meta.get(SOURCE)
    return isinstance(source, dict) and not source.get("tool_calls") and isinstance(source.get("action"), str)


def _args_json(c: ToolCall) -> str:
    inp = dict(c.input)
    raw = inp.get("_raw")
    return raw if set(inp) == {"_raw"} and isinstance(raw, str) else json.dumps(inp, ensure_ascii=False)


def _describe(c: ToolCall) -> str:
    """A call as one line for the `action` field and the trajectory."""
    return f"{c.name} {_args_json(c)}"
