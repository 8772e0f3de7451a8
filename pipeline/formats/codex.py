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

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator, Sequence

from ..core import strictjson
from ..core.errors import FormatError
from ..core.model import ROLES, Block, Image, Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult, canonical_json
from ..core.tokens import TokenCounter
from ..core.calibration import Calibration, calibrate
from ..core.view import STANDING
from .base import Keep, Transcript
from .damaged import DamagedLine, ParsedLine, first_record, lines, orphaned_by, parsed_lines
from .validate import mark_unanswered

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
# Lone UTF-16 surrogates (truncated tool output) cannot be written as UTF-8; such lines are escaped.
_SURROGATE = re.compile("[\ud800-\udfff]")


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
    return Transcript(mark_unanswered(messages), NAME, path, reader.extras, reader.meta)


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


# ----------------------------------------------------------------------------------------- write


def write(transcript: Transcript, messages: Sequence[Message] | None = None) -> str:
    """JSONL for `messages` (default: the transcript's), with the transcript's extras after the
    messages they followed; extras whose message is not written are dropped with it.

    A view with a compaction of worksurface's is written as Codex writes its own: its `compacted`
    record carries the standing context verbatim and is followed by the latest turn_context; the
    token_count events, which measured the context before it, give way to one at the end that
    measures the compacted view (so a resumed Codex does not compact it again)."""
    msgs = list(transcript.messages if messages is None else messages)
    new = next((i for i in range(len(msgs) - 1, -1, -1)
                if _is_boundary(msgs[i]) and _own_compacted(msgs[i]) is None), None)
    anchored: dict[str | None, list[dict[str, Any] | DamagedLine]] = defaultdict(list)
    for anchor, record in transcript.extras:
        if new is None or not _is_token_count(record):
            anchored[anchor].append(record)
    writer = _Writer(_uses_ordinals(transcript))
    for record in anchored.pop(None, []):
        writer.emit(record)
    i = 0
    while i < len(msgs):
        message = msgs[i]
        if _is_boundary(message):
            j = i + 1
            owned = _own_compacted(message)
            if owned is not None:  # Codex's compaction (or one read back): its items follow it
                while j < len(msgs) and msgs[j].meta.get("codex_compacted") == message.id:
                    j += 1
                writer.emit(_kept_compacted(message, owned, msgs[i + 1:j]))
            else:
                while j < len(msgs) and (msgs[j].origin not in (Origin.CONVERSATION, Origin.BOUNDARY)
                                         or _is_standing(msgs[j])):
                    j += 1  # worksurface's summary and reinjected messages, and the standing context
                writer.emit(_new_compacted(message, _restated(msgs[:i]), msgs[i + 1:j], writer.last_timestamp))
                context = _latest(transcript, _is_turn_context)
                if context is not None and not any(r is context for m in msgs[i:] for r in anchored.get(m.id, ())):
                    writer.emit(context)  # the turn settings Codex resumes with (model, cwd, policies)
            for m in msgs[i:j]:
                for record in anchored.pop(m.id, []):
                    writer.emit(record)
            i = j
            continue
        for record in _message_records(message, writer.last_timestamp, writer.names):
            writer.emit(record)
        for record in anchored.pop(message.id, []):
            writer.emit(record)
        i += 1
    if new is not None:
        measured = _view_usage(transcript, _restated(msgs[:new]) + msgs[new:], writer.last_timestamp)
        if measured is not None:
            writer.emit(measured)
    return "".join(writer.lines)


def _is_token_count(record: Any) -> bool:
    if not isinstance(record, dict) or record.get("type") != "event_msg":
        return False
    payload = record.get("payload")
    return isinstance(payload, dict) and payload.get("type") == "token_count"


def _is_turn_context(record: Any) -> bool:
    return isinstance(record, dict) and record.get("type") == "turn_context"


def _latest(transcript: Transcript, kind: Any) -> dict[str, Any] | None:
    """The newest extra of a kind as of the transcript's last message (a cut transcript keeps the
    extras of the messages it cut off; they are not part of it)."""
    ids = {m.id for m in transcript.messages}
    found = [r for anchor, r in transcript.extras if (anchor is None or anchor in ids) and kind(r)]
    return found[-1] if found else None


def _is_standing(message: Message) -> bool:
    """Standing context (developer and permissions messages, AGENTS.md, environment context): a
    compaction carries it in its `compacted` record verbatim, as Codex's own does."""
    return message.role == "system" and message.origin is Origin.CONVERSATION and not _is_boundary(message)


def _view_usage(transcript: Transcript, sent: Sequence[Message], timestamp: str | None) -> dict[str, Any] | None:
    """A token_count event for the compacted view: the rollout's newest one with `last_token_usage`
    set to the view's size (worksurface's count plus what the rollout's usage says Codex adds, as
    `calibration.calibrate` fits it); the running totals and the window stay. None when the rollout has
    no token_count to start from."""
    base = _latest(transcript, _is_token_count)
    info = base["payload"].get("info") if base is not None else None
    if base is None or not isinstance(info, dict):
        return None
    counter = TokenCounter()
    # Fitted on the whole rollout: its earliest requests show the fixed part (a compaction's live part
    # starts with what Codex carried, which is not fixed); later compactions start their own segments.
    fitted = calibrate(transcript.messages, counter) or Calibration(0, 1.0, 0)
    size = fitted.size(counter.messages(sent))
    last = info.get("last_token_usage")
    usage = {k: 0 for k in last} if isinstance(last, dict) else {}
    usage.update(input_tokens=size, cached_input_tokens=0, output_tokens=0, total_tokens=size)
    record: dict[str, Any] = {"timestamp": timestamp or base.get("timestamp"), "ordinal": NEW_ORDINAL,
                              "type": "event_msg", "payload": {**base["payload"], "info": {**info, "last_token_usage": usage}},
                              MARK: {"estimated": True}}
    if record["timestamp"] is None:
        del record["timestamp"]
    return record


@dataclass
class _Writer:
    ordinals: bool
    lines: list[str] = field(default_factory=list)
    last_timestamp: str | None = None
    names: "_Names" = field(default_factory=lambda: _Names())

    def emit(self, record: dict[str, Any] | DamagedLine) -> None:
        if isinstance(record, DamagedLine):
            self.lines.append(record.text + "\n")  # as read; the newline lets the next record start a line
            return
        if "ordinal" in record and self.ordinals and record["ordinal"] != len(self.lines):
            # Codex pages a rollout by ordinal: keep them consecutive when records were dropped.
            record = {**record, "ordinal": len(self.lines)}
        elif record.get("ordinal") == NEW_ORDINAL:  # a file without ordinals (older Codex)
            record = {k: v for k, v in record.items() if k != "ordinal"}
        if isinstance(record.get("timestamp"), str):
            self.last_timestamp = record["timestamp"]
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        if _SURROGATE.search(line):
            line = json.dumps(record, separators=(",", ":"))
        self.lines.append(line + "\n")


def _uses_ordinals(transcript: Transcript) -> bool:
    return any(isinstance(r, dict) and "ordinal" in r for _, r in transcript.extras[:1])


def _is_boundary(message: Message) -> bool:
    return message.origin is Origin.BOUNDARY or bool(message.meta.get("compact_boundary"))


def _own_raw(message: Message) -> dict[str, Any] | None:
    """The rollout record a message was read from (another format's `raw` is not one)."""
    raw = message.meta.get("raw")
    if isinstance(raw, dict) and raw.get("type") == "response_item" and isinstance(raw.get("payload"), dict):
        return raw
    return None


def _own_compacted(message: Message) -> dict[str, Any] | None:
    raw = message.meta.get("raw")
    if isinstance(raw, dict) and raw.get("type") == "compacted" and isinstance(raw.get("payload"), dict):
        return raw
    return None


def _stamp(message: Message, fallback: str | None) -> str | None:
    stamp = message.meta.get("timestamp")
    return stamp if isinstance(stamp, str) else fallback


@dataclass
class _Names:
    """The ids reading the written records back gives them (`_Reader.unique` numbers repeated
    items: `reasoning-<digest>~2`, ...), so a record names its message's id only where reading it
    back would give another one (a copy before it was not written)."""

    used: set[str] = field(default_factory=set)

    def read_as(self, natural: str) -> str:
        mid, n = natural, 1
        while mid in self.used:
            n += 1
            mid = f"{natural}~{n}"
        return mid


def _message_records(message: Message, timestamp: str | None, names: _Names) -> list[dict[str, Any]]:
    """The response_item record(s) of a message outside a compaction."""
    raw = _own_raw(message)
    if raw is not None:
        payload = kept_payload(message, raw["payload"])
        if payload is not None:
            kept = raw if payload is raw["payload"] else {**raw, "payload": payload}
            marked = _mark_record(kept, message, names.read_as(_natural_id(payload)))
            names.used.add(message.id)  # read back under its own id: natural, or named in the mark
            return [marked]
    payloads = encode_message(message)
    stamp = _stamp(message, timestamp)
    out = []
    for n, payload in enumerate(payloads):
        record: dict[str, Any] = {"timestamp": stamp, "ordinal": NEW_ORDINAL, "type": "response_item",
                                  "payload": payload}
        if stamp is None:
            del record["timestamp"]
        read_as = names.read_as(_natural_id(payload))
        out.append(_mark_record(record, message, read_as) if n == 0 else record)
        names.used.add(message.id if n == 0 else read_as)
    return out


def _mark_record(record: dict[str, Any], message: Message, read_as: str) -> dict[str, Any]:
    """Add (or drop) the `worksurface` key: only what reading the record would not give back
    (`read_as`: the id reading it would give)."""
    role, _, _ = item_parts(record["payload"])
    mark: dict[str, Any] = {}
    if message.id != read_as:
        mark["id"] = message.id
    if message.origin is not Origin.CONVERSATION:
        mark["origin"] = message.origin.value
    if message.role != role:
        mark["role"] = message.role
    if mark == (record.get(MARK) or {}):
        return record
    record = {k: v for k, v in record.items() if k != MARK}
    if mark:
        record[MARK] = mark
    return record


def kept_payload(message: Message, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The source payload if the message still equals it, else the payload with the new content;
    None when the change does not fit one item (write it afresh)."""
    role, blocks, _ = item_parts(payload)
    if message.blocks == blocks:
        return payload
    if len(message.blocks) != 1 and payload.get("type") != "message":
        return None
    kind = payload.get("type")
    if kind == "message" and all(isinstance(b, (Text, Image, Opaque)) for b in message.blocks):
        return {**payload, "content": [_encode_part(b, payload.get("role")) for b in message.blocks]}
    block = message.blocks[0] if message.blocks else None
    if kind in OUTPUT_TYPES and isinstance(block, ToolResult):
        return {**payload, "call_id": block.call_id, "output": _encode_output(block, payload.get("output"))}
    if kind in CALL_TYPES and isinstance(block, ToolCall):
        new = encode_block(block)
        return {**payload, **{k: v for k, v in new.items() if k not in ("type", "id")}} if new["type"] == kind else None
    if kind == "reasoning" and isinstance(block, Thinking):
        return {**payload, "summary": [{"type": "summary_text", "text": block.text}], "content": None,
                "encrypted_content": block.signature}
    return None


def encode_message(message: Message) -> list[dict[str, Any]]:
    """Response items for a message that has no rollout record of its own."""
    out: list[dict[str, Any]] = []
    parts: list[Block] = []

    def flush() -> None:
        if parts:
            role = message.meta.get("codex_role") or {"system": "developer", "tool": "user"}.get(
                message.role, message.role)
            out.append({"type": "message", "role": role, "content": [_encode_part(b, role) for b in parts]})
            parts.clear()

    for block in message.blocks:
        if isinstance(block, (Text, Image)) or (isinstance(block, Opaque) and message.role != "assistant"):
            parts.append(block)
            continue
        flush()
        out.append(encode_block(block))
    flush()
    if not out:
        out.append({"type": "message", "role": "assistant" if message.role == "assistant" else "user",
                    "content": []})
    return out


def encode_block(block: Block) -> dict[str, Any]:
    if isinstance(block, ToolCall):
        if block.name == LOCAL_SHELL:
            return {"type": "local_shell_call", "call_id": block.id, "status": "completed",
                    "action": dict(block.input)}
        if set(block.input) == {"input"} and isinstance(block.input["input"], str):
            return {"type": "custom_tool_call", "call_id": block.id, "name": block.name,
                    "input": block.input["input"]}
        return {"type": "function_call", "name": block.name,
                "arguments": json.dumps(dict(block.input), ensure_ascii=False), "call_id": block.id}
    if isinstance(block, ToolResult):
        return {"type": "function_call_output", "call_id": block.call_id, "output": _encode_output(block, None)}
    if isinstance(block, Thinking):
        return {"type": "reasoning", "summary": [{"type": "summary_text", "text": block.text}], "content": None,
                "encrypted_content": block.signature}
    if isinstance(block, Opaque):
        value = block.value
        return value if isinstance(value, dict) and "type" in value else {
            "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": block.json_text}]}
    return {"type": "message", "role": "assistant", "content": [_encode_part(block, "assistant")]}


def _encode_part(block: Block, role: Any) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "output_text" if role == "assistant" else "input_text", "text": block.text}
    if isinstance(block, Image):
        url = block.data if block.source == "url" else f"data:{block.media_type};base64,{block.data}"
        return {"type": "input_image", "image_url": url}
    if isinstance(block, Opaque):
        value = block.value
        return value if isinstance(value, dict) else {"type": "input_text", "text": block.json_text}
    return {"type": "input_text", "text": json.dumps(encode_block(block), ensure_ascii=False)}


def _encode_output(block: ToolResult, original: Any) -> Any:
    if not block.images and not isinstance(original, list):
        return block.content
    parts: list[dict[str, Any]] = []
    if block.content or not block.images:
        parts.append({"type": "input_text", "text": block.content})
    parts.extend(_encode_part(i, "user") for i in block.images)
    return parts


# -- compaction records -------------------------------------------------------------------------


def _item_payload(message: Message) -> dict[str, Any]:
    """One replacement_history item for a message (its own item when it still fits)."""
    raw = message.meta.get("raw")
    source = raw.get("payload") if isinstance(raw, dict) and raw.get("type") == "response_item" else (
        raw if isinstance(raw, dict) and "type" in raw and "payload" not in raw else None)
    if isinstance(source, dict):
        try:
            kept = kept_payload(message, source)
        except _RecordError:
            kept = None
        if kept is not None:
            return {k: v for k, v in kept.items()}
    items = encode_message(message)
    return items[0]


def _item_mark(message: Message, payload: dict[str, Any], boundary_id: str) -> dict[str, Any]:
    role, _, _ = item_parts(payload)
    mark: dict[str, Any] = {"id": message.id}
    if message.origin is not Origin.CONVERSATION:
        mark["origin"] = message.origin.value
    if message.role != role:
        mark["role"] = message.role
    return mark


def _kept_compacted(boundary: Message, raw: dict[str, Any], items: Sequence[Message]) -> dict[str, Any]:
    """A compacted record read from the file: as it was while its items are unchanged."""
    payload = raw["payload"]
    history = payload.get("replacement_history")
    mark = raw.get(MARK) or {}
    restated = [m for m in mark.get("items", []) if m.get("restates")]
    if history is None:
        originals: list[dict[str, Any]] = []
    else:
        originals = [h for h, m in zip(history, mark.get("items") or [{}] * len(history)) if not m.get("restates")]
    if history is None and len(items) == 1 and items[0].meta.get("synthetic"):
        if items[0].blocks == (Text(payload.get("message", "")),):
            return raw
    elif len(items) == len(originals) and all(
            item_parts(o)[1] == m.blocks for o, m in zip(originals, items)):
        return raw
    # Items changed: rebuild replacement_history from the messages (restated copies kept first).
    kept_restated = [h for h, m in zip(history or [], mark.get("items") or []) if m.get("restates")]
    new_items = [_item_payload(m) for m in items]
    new_payload = {k: v for k, v in payload.items() if k != "replacement_history_metadata"}
    new_payload["replacement_history"] = kept_restated + new_items
    summary = next((m for m in items if m.meta.get("is_compact_summary")), None)
    if summary is not None:
        new_payload["message"] = summary.text
    record = {**raw, "payload": new_payload}
    marks = restated + [_item_mark(m, p, boundary.id) for m, p in zip(items, new_items)]
    record[MARK] = {**mark, "boundary": mark.get("boundary") or _boundary_mark(boundary), "items": marks}
    return record


def _boundary_mark(boundary: Message) -> dict[str, Any]:
    """How worksurface reads the boundary back: its id, text, origin and figures."""
    meta = boundary.meta
    mark = {"id": boundary.id, "text": boundary.text, "origin": boundary.origin.value,
            "made_by": meta.get("made_by") or MADE_BY_WORKSURFACE}
    mark.update({k: meta[k] for k in BOUNDARY_FIGURES if meta.get(k) is not None})
    return mark


def _restated(before: Sequence[Message]) -> list[Message]:
    """What Codex must still send from before a new boundary: the live messages before it that are
    standing context (system role: developer instructions, environment context), as Codex itself
    keeps them in its replacement_history."""
    start = 0
    for i in range(len(before) - 1, -1, -1):
        if _is_boundary(before[i]):
            start = i + 1
            break
    return [m for m in before[start:] if _is_standing(m)]


def _new_compacted(boundary: Message, restated: Sequence[Message], head: Sequence[Message],
                   timestamp: str | None) -> dict[str, Any]:
    """A `compacted` record for a boundary worksurface made, shaped as Codex writes its own."""
    summary = next((m for m in head if m.origin is Origin.SUMMARY or m.meta.get("is_compact_summary")), None)
    restated_items = [_item_payload(m) for m in restated]
    items = [_item_payload(m) for m in head]
    payload: dict[str, Any] = {"message": summary.text if summary is not None else "",
                               "replacement_history": restated_items + items}
    marks = [{"restates": m.id} for m in restated] + [_item_mark(m, p, boundary.id) for m, p in zip(head, items)]
    boundary_mark = _boundary_mark(boundary)
    record: dict[str, Any] = {"timestamp": _stamp(boundary, timestamp), "ordinal": NEW_ORDINAL, "type": "compacted",
                              "payload": payload, MARK: {"boundary": boundary_mark, "items": marks}}
    if record["timestamp"] is None:
        del record["timestamp"]
    return record
