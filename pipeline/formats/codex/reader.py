"""Reading a Codex CLI rollout into messages (the format is described in the package's docstring)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator, Sequence

from ...core import strictjson
from ...core.errors import FormatError
from ...core.model import ROLES, Block, Image, Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult, canonical_json
from ...core.view import STANDING
from ..base import Keep, Transcript, keeps_line
from ..damaged import DamagedLine, ParsedLine, first_record, lines, orphaned_by, parsed_lines
from ..validate import mark_unanswered

NAME = "codex"
WRITABLE = True

# Record kinds a rollout starts with or is made of; sniffing needs one of them on the first line.
SNIFF_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
# The record-level key carrying what worksurface needs to read its own records back.
MARK = "worksurface"
MADE_BY_CODEX = "codex"
MADE_BY_WORKSURFACE = "worksurface"
# Boundary meta a worksurface compacted record carries for reading back (autocompact's figures).
BOUNDARY_FIGURES = ("trigger", "pre_tokens", "post_tokens", "epoch", "covered", "summarizer", "stage")
# Text of the boundary message for a Codex compaction (the record itself has no such text).
CODEX_BOUNDARY_TEXT = "[Conversation compacted by Codex]"
# A user-role message Codex itself wrote: its content kinds are not "user.*", or (older versions,
# which do not record kinds) it opens with one of these tags.
HARNESS_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
                    "<turn_aborted>", "<user_shell_command>", "<skills_instructions>")
# Of those, the ones that report one event rather than stand for the session (not carried by a compaction).
TRANSIENT_PREFIXES = ("<turn_aborted>", "<user_shell_command>")
# Content kinds Codex marks as typed by the user (internal_chat_message_metadata_passthrough).
USER_KIND_PREFIX = "user."
# The shell tool's name when the model used the built-in local_shell_call item.
LOCAL_SHELL = "local_shell"
# A response's items share meta RESPONSE_META (as Claude Code's records of one API message share
# `api_message_id`): this prefix and the id of its first item.
RESPONSE_META = "api_message_id"
RESPONSE_PREFIX = "response:"
# Placeholder ordinal of a new record; the writer numbers records (or drops it for older files).
NEW_ORDINAL = -1


class _RecordError(ValueError):
    """A bad record; `read` adds the path and line."""


# ----------------------------------------------------------------------------------------- sniff


def sniff(text: str, path: str | None) -> bool:
    """The first non-empty line is a rollout record: a known `type` with an object `payload`."""
    record = first_record(text)
    return (isinstance(record, dict) and record.get("type") in SNIFF_TYPES
            and isinstance(record.get("payload"), dict) and "timestamp" in record)


# ------------------------------------------------------------------------------------------ read


@dataclass
class _Reader:
    path: str | None
    messages: list[Message] = field(default_factory=list)
    extras: list[tuple[str | None, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    used_ids: set[str] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)
    results: list[tuple[str, int, str]] = field(default_factory=list)
    unmeasured: dict[str, Any] | None = None  # the newest assistant meta no token_count measured yet
    open_boundary: dict[str, Any] | None = None  # the newest Codex boundary still waiting for post_tokens
    last_usage_total: int | None = None
    cwd: str | None = None
    measured: set[int] = field(default_factory=set)  # message counts at which a token_count ended a response
    keep: Keep | None = None  # what is kept of each message (base.Keep); it keeps the message's meta object

    @property
    def last_id(self) -> str | None:
        return self.messages[-1].id if self.messages else None

    def unique(self, wanted: str) -> str:
        mid, n = wanted, 1
        while mid in self.used_ids:
            n += 1
            mid = f"{wanted}~{n}"
        self.used_ids.add(mid)
        return mid

    def add(self, message: Message, number: int) -> None:
        self.messages.append(self.keep(message) if self.keep is not None else message)
        for block in message.blocks:
            if isinstance(block, ToolCall):
                self.calls.add(block.id)
            elif isinstance(block, ToolResult):
                self.results.append((block.call_id, number, message.id))
        if message.role == "assistant" and not message.meta.get("compact_boundary"):
            self.unmeasured = message.meta  # type: ignore[assignment]

    def record(self, record: dict[str, Any], number: int) -> None:
        kind = record.get("type")
        if not isinstance(kind, str):
            raise _RecordError("record has no string 'type'")
        payload = record.get("payload")
        if kind == "response_item":
            if not isinstance(payload, dict):
                raise _RecordError("response_item without an object 'payload'")
            self.add(self._item_message(record, payload, None), number)
        elif kind == "compacted":
            if not isinstance(payload, dict):
                raise _RecordError("compacted record without an object 'payload'")
            for message in self._compacted(record, payload):
                self.add(message, number)
        else:
            self.extras.append((self.last_id, record))
            if isinstance(payload, dict):
                self._note(kind, payload)

    def _note(self, kind: str, payload: dict[str, Any]) -> None:
        """Session facts from non-message records: cwd, model, context window, usage."""
        if kind in ("session_meta", "turn_context") and isinstance(payload.get("cwd"), str):
            self.cwd = payload["cwd"]
        if kind == "session_meta":
            for key in ("id", "cli_version", "originator", "model_provider"):
                if key in payload:
                    self.meta.setdefault("session_id" if key == "id" else key, payload[key])
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            self.meta["model"] = payload["model"]
        elif kind == "event_msg" and payload.get("type") == "token_count":
            self.measured.add(len(self.messages))  # a response was measured: it ended
            info = payload.get("info")
            if not isinstance(info, dict):
                return
            window = info.get("model_context_window")
            if isinstance(window, int):
                self.meta["context_window"] = window
            last = info.get("last_token_usage")
            if not isinstance(last, dict):
                return
            total = last.get("total_tokens")
            if self.open_boundary is not None and isinstance(total, int):
                self.open_boundary["post_tokens"] = total  # Codex's count of the compacted history
                self.open_boundary = None
            elif self.unmeasured is not None:
                self.unmeasured["usage"] = dict(last)
                if self.unmeasured.get("compaction_output"):
                    total = None  # the summarizer's call: not the size of the conversation
                self.unmeasured = None
            if isinstance(total, int):
                self.last_usage_total = total

    # -- response items --------------------------------------------------------------------------

    def _item_message(self, record: dict[str, Any] | None, payload: dict[str, Any],
                      in_compacted: str | None, forced_id: str | None = None,
                      mark: dict[str, Any] | None = None) -> Message:
        role, blocks, extra = item_parts(payload)
        mark = mark if mark is not None else (record or {}).get(MARK) or {}
        if not isinstance(mark, dict):
            raise _RecordError(f"'{MARK}' must be an object")
        origin = _origin(mark.get("origin"))
        if "role" in mark:
            role = _role(mark["role"])
        prefix = f"{in_compacted}:" if in_compacted else ""
        mid = forced_id or mark.get("id") or self.unique(prefix + _natural_id(payload))
        if forced_id or mark.get("id"):
            self.used_ids.add(mid)
        meta: dict[str, Any] = {"raw": record if in_compacted is None else payload, "cwd": self.cwd, **extra}
        passthrough = payload.get("internal_chat_message_metadata_passthrough")
        if isinstance(passthrough, dict) and isinstance(passthrough.get("turn_id"), str):
            meta["turn_id"] = passthrough["turn_id"]  # the task_started / task_complete turn it belongs to
        if record is not None:
            meta["timestamp"] = record.get("timestamp")
            if isinstance(record.get("metadata"), dict) and record["metadata"].get("compaction_output"):
                meta["compaction_output"] = True  # the summarizer's answer, superseded by `compacted`
        if in_compacted is not None:
            meta["codex_compacted"] = in_compacted
        return Message(mid, role, blocks, origin, meta)  # type: ignore[arg-type]

    # -- compaction ------------------------------------------------------------------------------

    def _compacted(self, record: dict[str, Any], payload: dict[str, Any]) -> Iterator[Message]:
        summary = payload.get("message", "")
        history = payload.get("replacement_history")
        if not isinstance(summary, str):
            raise _RecordError("compacted 'message' must be a string")
        if history is not None and not (isinstance(history, list) and all(isinstance(i, dict) for i in history)):
            raise _RecordError("compacted 'replacement_history' must be a list of objects")
        mark = record.get(MARK) or {}
        if not isinstance(mark, dict):
            raise _RecordError(f"'{MARK}' must be an object")
        boundary = mark.get("boundary") or {}
        made_by = boundary.get("made_by") or MADE_BY_CODEX
        bid = boundary.get("id") or self.unique(f"compacted-{payload.get('window_id') or _digest(payload)}")
        self.used_ids.add(bid)
        meta: dict[str, Any] = {
            "raw": record, "timestamp": record.get("timestamp"), "cwd": self.cwd, "compact_boundary": True,
            "made_by": made_by, "trigger": boundary.get("trigger") or payload.get("trigger"),
            "pre_tokens": boundary.get("pre_tokens", self.last_usage_total),
            "post_tokens": boundary.get("post_tokens"),
            "window_number": payload.get("window_number")}
        for key, value in boundary.items():
            if key not in ("id", "text", "origin"):
                meta.setdefault(key, value)  # worksurface's own figures (epoch, summarizer, ...)
        origin = _origin(boundary.get("origin"))
        text = boundary.get("text") or CODEX_BOUNDARY_TEXT
        yield Message(bid, "system", (Text(text),), origin, meta)
        if made_by == MADE_BY_CODEX:
            self.open_boundary = meta
        self.unmeasured = None
        items = history if history is not None else [_summary_item(summary)]
        marks = mark.get("items") or [{} for _ in items]
        if not isinstance(marks, list) or len(marks) != len(items):
            raise _RecordError(f"'{MARK}.items' must list one entry per replacement_history item")
        for item, item_mark in zip(items, marks):
            if item_mark.get("restates"):
                continue  # a copy of a message written before the boundary: already read there
            message = self._item_message(None, item, bid, mark=item_mark)
            if history is None:
                message.meta["synthetic"] = True  # type: ignore[index]
            if _is_summary_item(item, summary):
                # Codex writes the summary as a user message of its own making: it is the compact
                # summary, not standing context, whatever its content kinds say.
                meta = {k: v for k, v in message.meta.items() if k not in ("is_meta", "codex_role", STANDING)}
                role = item_mark.get("role", "user")
                message = Message(message.id, role, message.blocks, message.origin,
                                  {**meta, "is_compact_summary": True})
            yield message


def item_parts(payload: dict[str, Any]) -> tuple[str, tuple[Block, ...], dict[str, Any]]:
    """(role, blocks, extra meta) of a response item: a pure function, so `write` can re-derive it."""
    kind = payload.get("type")
    if kind == "message":
        role = payload.get("role")
        content = payload.get("content")
        if not isinstance(role, str):
            raise _RecordError("message item without a string 'role'")
        if not isinstance(content, list):
            raise _RecordError("message item 'content' must be a list")
        blocks = tuple(_part(p) for p in content)
        if role == "developer" or role == "system":
            return "system", blocks, {"codex_role": role, STANDING: True}
        if role == "user":
            if _harness_written(payload, blocks):
                first = next((b.text for b in blocks if isinstance(b, Text)), "").lstrip()
                standing = not first.startswith(TRANSIENT_PREFIXES)
                return "system", blocks, {"codex_role": "user", "is_meta": True, **({STANDING: True} if standing else {})}
            return "user", blocks, {}
        if role == "assistant":
            return "assistant", blocks, {}
        raise _RecordError(f"message item with unknown role {role!r}")
    if kind == "reasoning":
        summary = payload.get("summary") or []
        texts = [s.get("text", "") for s in summary if isinstance(s, dict)]
        content = payload.get("content") or []
        texts += [c.get("text", "") for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)]
        signature = payload.get("encrypted_content")
        return "assistant", (Thinking("\n".join(texts), signature if isinstance(signature, str) else None),), {}
    if kind in CALL_TYPES:
        return "assistant", (_call(payload),), {}
    if kind in OUTPUT_TYPES:
        return "tool", (_output(payload),), {}
    if isinstance(kind, str):
        return "assistant", (Opaque(json.dumps(_visible(payload), ensure_ascii=False)),), {"item_type": kind}
    raise _RecordError("response item without a string 'type'")


def _part(part: Any) -> Block:
    if not isinstance(part, dict):
        raise _RecordError(f"content part is a {type(part).__name__}, not an object")
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
        return Text(part["text"])
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        url = part["image_url"]
        match = re.match(r"data:([^;]+);base64,(.*)", url, re.S)
        if match:
            return Image(match.group(1), match.group(2))
        return Image(data=url, source="url")
    return Opaque(json.dumps(part, ensure_ascii=False))


def _harness_written(payload: dict[str, Any], blocks: tuple[Block, ...]) -> bool:
    passthrough = payload.get("internal_chat_message_metadata_passthrough")
    kinds = passthrough.get("content_item_kinds") if isinstance(passthrough, dict) else None
    if isinstance(kinds, list) and kinds:
        return not any(isinstance(k, str) and k.startswith(USER_KIND_PREFIX) for k in kinds)
    first = next((b.text for b in blocks if isinstance(b, Text)), "")
    return first.lstrip().startswith(HARNESS_PREFIXES)


def _call(payload: dict[str, Any]) -> ToolCall:
    kind = payload["type"]
    call_id = payload.get("call_id") or (payload.get("id") if kind == "local_shell_call" else None)
    if not isinstance(call_id, str):
        raise _RecordError(f"{kind} without a string 'call_id'")
    if kind == "function_call":
        name, arguments = payload.get("name"), payload.get("arguments", "")
        if not isinstance(name, str) or not isinstance(arguments, str):
            raise _RecordError(f"function_call {call_id}: 'name' and 'arguments' must be strings")
        try:
            args = strictjson.loads(arguments) if arguments.strip() else {}
        except ValueError:
            args = None
        # Arguments that are not a JSON object (a model's malformed call) are kept as the text it sent.
        return ToolCall(call_id, name, args if isinstance(args, dict) else {"arguments": arguments})
    if kind == "custom_tool_call":
        name, text = payload.get("name"), payload.get("input", "")
        if not isinstance(name, str) or not isinstance(text, str):
            raise _RecordError(f"custom_tool_call {call_id}: 'name' and 'input' must be strings")
        return ToolCall(call_id, name, {"input": text})
    action = payload.get("action")
    if not isinstance(action, dict):
        raise _RecordError(f"local_shell_call {call_id} without an object 'action'")
    return ToolCall(call_id, LOCAL_SHELL, action)


def _output(payload: dict[str, Any]) -> ToolResult:
    call_id = payload.get("call_id")
    if not isinstance(call_id, str):
        raise _RecordError(f"{payload['type']} without a string 'call_id'")
    output = payload.get("output")
    is_error = False
    if isinstance(output, dict):  # older rollouts: {"content": ..., "success": bool}
        is_error = output.get("success") is False
        output = output.get("content", output.get("body", ""))
    images: list[Image] = []
    if isinstance(output, list):
        parts = []
        for item in output:
            block = _part(item)
            if isinstance(block, Image):
                images.append(block)
            else:
                parts.append(block.text if isinstance(block, Text) else block.json_text)  # type: ignore[union-attr]
        text = "\n".join(parts)
    elif isinstance(output, str):
        text = output
    elif output is None:
        text = ""
    else:
        raise _RecordError(f"{payload['type']} {call_id}: 'output' must be a string, list or object")
    return ToolResult(call_id, text, is_error, tuple(images))


def _visible(payload: dict[str, Any]) -> dict[str, Any]:
    """An unmodelled item as the model would get it back (Codex's own bookkeeping left out)."""
    return {k: v for k, v in payload.items() if k != "internal_chat_message_metadata_passthrough"}


def _natural_id(payload: dict[str, Any]) -> str:
    """The item's own id, else one made from its call id or content (stable across rewrites)."""
    if isinstance(payload.get("id"), str) and payload["id"]:
        return str(payload["id"])
    kind = payload.get("type")
    if kind in OUTPUT_TYPES and isinstance(payload.get("call_id"), str):
        return f"{payload['call_id']}.output"
    if kind in CALL_TYPES and isinstance(payload.get("call_id"), str):
        return str(payload["call_id"])
    return f"{kind}-{_digest(payload)}"


def _digest(value: Any) -> str:
    return hashlib.blake2b(canonical_json(value).encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def _origin(value: Any) -> Origin:
    if value is None:
        return Origin.CONVERSATION
    try:
        return Origin(value)
    except ValueError:
        raise _RecordError(f"unknown {MARK} origin {value!r}") from None


def _role(value: Any) -> str:
    if value not in ROLES:
        raise _RecordError(f"unknown {MARK} role {value!r}")
    return str(value)


def _call_id_of(record: dict[str, Any], kinds: frozenset[str]) -> str | None:
    """The call id of a response_item record of one of these kinds (calls or outputs), if any."""
    payload = record.get("payload")
    if record.get("type") != "response_item" or not isinstance(payload, dict) or payload.get("type") not in kinds:
        return None
    call_id = payload.get("call_id") or payload.get("id")
    return call_id if isinstance(call_id, str) else None


def _summary_item(summary: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": summary}]}


def _is_summary_item(item: dict[str, Any], summary: str) -> bool:
    if item.get("type") != "message" or item.get("role") != "user" or not summary:
        return False
    texts = [p.get("text") for p in item.get("content") or [] if isinstance(p, dict)]
    return summary in texts


def read(text: str, path: str | None = None) -> Transcript:
    return read_records(parsed_lines(lines(text)), path)


def read_records(parsed: Iterable[ParsedLine], path: str | None = None, keep: Keep | None = None) -> Transcript:
    """`read` from lines already split and parsed, in one pass (see claude_code.read_records)."""
    reader = _Reader(path, keep=keep)
    damaged: list[DamagedLine] = []
    readable_calls: set[str] = set()
    kept_lines: dict[int, tuple[Any, str]] = {}
    for number, line, record in parsed:
        if isinstance(record, DamagedLine):
            damaged.append(record)
            reader.extras.append((reader.last_id, record))  # skipped, and written back as it was
            continue
        call = _call_id_of(record, CALL_TYPES)
        if call:
            readable_calls.add(call)
        answered = _call_id_of(record, OUTPUT_TYPES) if damaged else None
        lost = orphaned_by(answered, damaged) if answered and answered not in readable_calls else None
        if lost is not None:
            # Its call is on a damaged line: shown, it would answer nothing. Kept in the file as read.
            reader.extras.append((reader.last_id, DamagedLine(
                number, line, f"answers tool call {answered!r}, whose record (line {lost.line}) is damaged")))
            continue
        if keep is None and keeps_line(line):
            kept_lines[id(record)] = (record, line)
        try:
            reader.record(record, number)
        except _RecordError as exc:
            payload = record.get("payload")
            rid = payload.get("id") or payload.get("call_id") if isinstance(payload, dict) else None
            raise FormatError(str(exc), path=path, line=number,
                              record=rid if isinstance(rid, str) else None) from None
    for call_id, number, mid in reader.results:
        if call_id not in reader.calls:
            raise FormatError(f"tool output for call id {call_id!r}, which never appears in the file",
                              path=path, line=number, record=mid)
    messages = group_responses(reader.messages, reader.measured)
    return Transcript(mark_unanswered(messages), NAME, path, reader.extras, reader.meta, lines=kept_lines)


def group_responses(messages: Sequence[Message], ends: set[int] | frozenset[int] = frozenset()) -> list[Message]:
    """Responses items (reasoning, text, calls) carry no response id: one model response is a run
    of assistant items, up to the next other item (a tool output, a user turn) or an index in `ends`
    (where a token_count measured it). Its items share meta RESPONSE_META, as Claude Code's records of
    one API message share `api_message_id`, so its reasoning is known to lead to its calls."""
    out: list[Message] = []
    response: str | None = None
    for i, m in enumerate(messages):
        if i in ends or m.role != "assistant" or m.meta.get("compact_boundary"):
            response = None
        if m.role == "assistant" and not m.meta.get("compact_boundary"):
            response = response or RESPONSE_PREFIX + m.id
            if m.meta.get(RESPONSE_META) != response:
                m = replace(m, meta={**m.meta, RESPONSE_META: response})
        out.append(m)
    return out
