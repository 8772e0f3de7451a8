"""OpenHands event streams: a JSON list of action and observation events.

- agent actions with `tool_call_metadata` -> one assistant message per model response (actions from
  one response are grouped): Text(what the model said) + ToolCall(tool_call_id, function_name,
  arguments from the model response, else the action's args);
- an observation with `tool_call_metadata` (or a `cause` pointing at such an action) -> a tool
  message with the ToolResult (command output keeps its prefix/suffix as the model saw it);
- `message` actions from the user / agent -> user / assistant text; a `system` action -> system;
- everything else (agent state changes, "No observation" acks, ...) -> Transcript.extras.
A call whose observation never came (`finish`, a run that ended) is flagged meta `interrupted`.

Write gives an unchanged message its source events back, with the extras after the message they
followed (equal JSON for an unmodified file), and makes the rest as OpenHands records them: one
action event per call with the model response in `tool_call_metadata`, an observation (`error` for a
failed call) caused by it, `message` actions for text, a `system` action. worksurface's own messages
are such events marked with `worksurface_origin`, which read restores.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..core import strictjson
from ..core.errors import FormatError
from ..core.model import Block, Image, Message, Origin, Role, Text, ToolCall, ToolResult
from .base import Transcript
from .convert import mark_origin, origin_of
from .jsondoc import content_text, expect, parse_json, peek_json
from .validate import check_pairing, mark_unanswered

NAME = "openhands"
WRITABLE = True

_EXPECTED = "an OpenHands event list (objects with source and action or observation)"
# Action args that are OpenHands bookkeeping, not arguments the model gave (fallback path only).
_NON_ARGUMENTS = frozenset({"thought", "impl_source", "translated_ipython_code", "confirmation_state",
                            "blocking", "hidden", "security_risk"})
_SNIFF_RECORDS = 5
# JSON types of the event fields read (None, i.e. absent or null, is always accepted).
_EVENT_FIELDS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("id", (int, str)), ("cause", (int, str)), ("source", str), ("action", str), ("observation", str),
    ("message", str), ("content", (str, list)), ("args", dict), ("extras", dict),
    ("tool_call_metadata", dict))
_ARGS_FIELDS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("content", (str, list)), ("thought", str), ("image_urls", list))
_TCM_FIELDS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("function_name", str), ("tool_call_id", str), ("model_response", dict))
SOURCE = f"{NAME}.source"             # message meta: the events it was read from
# The OpenHands action (and observation) type of a call, by function name; others use the name.
_ACTIONS = {"execute_bash": ("run", "run"), "execute_ipython_cell": ("run_ipython", "run_ipython"),
            "str_replace_editor": ("edit", "edit"), "browser": ("browse_interactive", "browse"),
            "think": ("think", "think"), "finish": ("finish", "null")}


@dataclass
class _Draft:
    """A message being assembled (actions of one model response arrive as several events)."""

    id: str
    role: Role
    blocks: list[Block] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    origin: Origin = Origin.CONVERSATION


def sniff(text: str, path: str | None) -> bool:
    doc = peek_json(text)
    if not isinstance(doc, list) or not doc:
        return False
    return all(isinstance(e, dict) and "source" in e and ("action" in e or "observation" in e)
               for e in doc[:_SNIFF_RECORDS])


def read(text: str, path: str | None = None) -> Transcript:
    doc = parse_json(text, path, _EXPECTED)
    if not isinstance(doc, list):
        raise FormatError(f"expected {_EXPECTED}, found {type(doc).__name__}", path=path)
    drafts: list[_Draft] = []
    extras: list[tuple[str | None, Any]] = []
    by_response: dict[str, _Draft] = {}     # model response id -> its assistant message
    call_of_event: dict[Any, str] = {}      # action event id -> tool call id
    for i, ev in enumerate(doc):
        if not isinstance(ev, dict) or not ("action" in ev or "observation" in ev):
            raise FormatError("expected an event object with an action or observation", path=path,
                              record=f"[{i}]")
        _check_event(ev, path, f"[{i}]")
        eid = str(ev.get("id", i))
        tcm = ev.get("tool_call_metadata")
        stamp = {"timestamp": ev["timestamp"]} if "timestamp" in ev else {}
        if "action" in ev and isinstance(tcm, dict) and ev.get("source") == "agent":
            call = _call(ev, tcm, path, i)
            call_of_event[ev.get("id")] = call.id
            rid = str((tcm.get("model_response") or {}).get("id") or eid)
            draft = by_response.get(rid)
            if draft is None:
                draft = _Draft(eid, "assistant", _said(ev, tcm), {"events": [], **stamp})
                by_response[rid] = draft
                drafts.append(draft)
            draft.blocks.append(call)
            draft.meta["events"].append(eid)
        elif "observation" in ev and (_tool_call_id(tcm) or ev.get("cause") in call_of_event):
            cid = _tool_call_id(tcm) or call_of_event[ev.get("cause")]
            result = ToolResult(cid, _observed(ev), is_error=ev.get("observation") == "error")
            drafts.append(_Draft(eid, "tool", [result], {"observation": ev.get("observation"), **stamp}))
        elif ev.get("action") == "message" and ev.get("source") in ("user", "agent"):
            role: Role = "user" if ev["source"] == "user" else "assistant"
            drafts.append(_Draft(eid, role, _message_blocks(ev), {"event": "message", **stamp}))
        elif ev.get("action") == "system":
            system = content_text((ev.get("args") or {}).get("content"))
            drafts.append(_Draft(eid, "system", [Text(system)], stamp))
        else:
            extras.append((drafts[-1].id if drafts else None, ev))
            continue
        draft = next(d for d in reversed(drafts) if eid == d.id or eid in d.meta.get("events", ()))
        draft.meta.setdefault(SOURCE, []).append(ev)
        draft.origin = origin_of(ev, path, f"[{i}]")
    messages = [Message(d.id, d.role, tuple(d.blocks), d.origin, meta=d.meta) for d in drafts]
    check_pairing(messages, path)
    return Transcript(mark_unanswered(messages), NAME, path, extras=extras)


def _check_event(ev: dict[str, Any], path: str | None, record: str) -> None:
    """Reject, naming the event, a field whose JSON type is not the one OpenHands writes (a list
    where an object belongs, a number as content, ...) instead of failing later or guessing."""
    for key, kind in _EVENT_FIELDS:
        expect(ev.get(key), kind, path, record, key)
    for key, kind in _ARGS_FIELDS:
        expect((ev.get("args") or {}).get(key), kind, path, record, f"args.{key}")
    metadata = expect((ev.get("extras") or {}).get("metadata"), dict, path, record, "extras.metadata")
    for key in ("prefix", "suffix"):
        expect((metadata or {}).get(key), str, path, record, f"extras.metadata.{key}")
    tcm = ev.get("tool_call_metadata") or {}
    for key, kind in _TCM_FIELDS:
        expect(tcm.get(key), kind, path, record, f"tool_call_metadata.{key}")
    response = tcm.get("model_response") or {}
    expect(response.get("id"), (str, int), path, record, "tool_call_metadata.model_response.id")
    choices = expect(response.get("choices"), list, path, record, "tool_call_metadata.model_response.choices")
    for k, choice in enumerate(choices or ()):
        where = f"tool_call_metadata.model_response.choices[{k}]"
        message = (expect(choice, dict, path, record, where) or {}).get("message")
        message = expect(message, dict, path, record, f"{where}.message") or {}
        expect(message.get("content"), (str, list), path, record, f"{where}.message.content")
        calls = expect(message.get("tool_calls"), list, path, record, f"{where}.message.tool_calls")
        for j, tc in enumerate(calls or ()):
            call_where = f"{where}.message.tool_calls[{j}]"
            function = (expect(tc, dict, path, record, call_where) or {}).get("function")
            function = expect(function, dict, path, record, f"{call_where}.function") or {}
            expect(function.get("arguments"), (str, dict), path, record, f"{call_where}.function.arguments")


def _tool_call_id(tcm: Any) -> str | None:
    cid = tcm.get("tool_call_id") if isinstance(tcm, dict) else None
    return cid if isinstance(cid, str) else None


def _call(ev: dict[str, Any], tcm: dict[str, Any], path: str | None, i: int) -> ToolCall:
    cid = _tool_call_id(tcm)
    if cid is None:
        raise FormatError("tool_call_metadata without a tool_call_id", path=path, record=f"[{i}]")
    name = tcm.get("function_name") or ev.get("action") or ""
    for tc in _response_message(tcm).get("tool_calls") or ():
        if isinstance(tc, dict) and tc.get("id") == cid:
            args = (tc.get("function") or {}).get("arguments")
            try:
                value = strictjson.loads(args) if isinstance(args, str) else args
            except ValueError:  # broken JSON, or a number it would not write back
                value = {"_raw": args}
            if isinstance(value, dict):
                return ToolCall(cid, name, value)
    args = {k: v for k, v in (ev.get("args") or {}).items() if k not in _NON_ARGUMENTS}
    return ToolCall(cid, name, args)


def _response_message(tcm: dict[str, Any]) -> dict[str, Any]:
    choices = (tcm.get("model_response") or {}).get("choices") or [{}]
    msg = choices[0].get("message") if isinstance(choices[0], dict) else None
    return msg if isinstance(msg, dict) else {}


def _said(ev: dict[str, Any], tcm: dict[str, Any]) -> list[Block]:
    """What the model wrote alongside its calls: the response text, else the action's thought."""
    thought = (ev.get("args") or {}).get("thought")
    said = content_text(_response_message(tcm).get("content"))
    said = said or (thought if isinstance(thought, str) else "")
    return [Text(said)] if said.strip() else []


def _observed(ev: dict[str, Any]) -> str:
    """The observation as the model got it: command output with its prefix and suffix notes."""
    run = ev.get("observation") == "run"
    # An empty non-command observation (e.g. an edit) reaches the model as its summary message.
    content = content_text(ev.get("content")) or ("" if run else ev.get("message") or "")
    meta = (ev.get("extras") or {}).get("metadata")
    if run and isinstance(meta, dict):
        content = f"{meta.get('prefix') or ''}{content}{meta.get('suffix') or ''}"
    return content


def _message_blocks(ev: dict[str, Any]) -> list[Block]:
    args = ev.get("args") or {}
    content = args.get("content")
    text = content if isinstance(content, str) else str(ev.get("message") or "")   # both checked: str
    images = [Image(data=u, source="url") for u in args.get("image_urls") or () if isinstance(u, str)]
    return [Text(text), *images]


# ---- write -----------------------------------------------------------------------------------

def write(transcript: Transcript, messages: Sequence[Message] | None = None) -> str:
    msgs = list(transcript.messages if messages is None else messages)
    own = transcript.format == NAME
    anchored: dict[str | None, list[Any]] = defaultdict(list)
    for anchor, ev in transcript.extras if own else ():
        anchored[anchor].append(ev)
    writer = _Writer({m.id: m for m in transcript.messages} if own else {}, transcript)
    events: list[Any] = list(anchored.pop(None, []))
    for m in msgs:
        events.extend(writer.message(m))
        events.extend(anchored.pop(m.id, []))
    return json.dumps(events, ensure_ascii=False, indent=2)


class _Writer:
    """Events for messages; new events get ids after every id of the source, and observations
    point (`cause`) at the action event of their call."""

    def __init__(self, originals: dict[str, Message], transcript: Transcript) -> None:
        self.originals = originals
        sources = [ev for m in transcript.messages for ev in m.meta.get(SOURCE, ())]
        sources += [ev for _, ev in transcript.extras]
        ids = [ev["id"] for ev in sources if isinstance(ev, dict) and isinstance(ev.get("id"), int)]
        self.next_id = max(ids, default=-1) + 1
        self.action_of_call: dict[str, Any] = {}
        self.call_names: dict[str, str] = {}
        for ev in sources:
            cid = _tool_call_id(ev.get("tool_call_metadata")) if isinstance(ev, dict) else None
            if cid is not None and "action" in ev:
                self.action_of_call[cid] = ev.get("id")

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def message(self, m: Message) -> list[Any]:
        for c in m.tool_calls:
            self.call_names[c.id] = c.name
        source = m.meta.get(SOURCE)
        if self.originals.get(m.id) == m and isinstance(source, list) and source:
            return list(source)
        stamp = {"timestamp": m.meta["timestamp"]} if isinstance(m.meta.get("timestamp"), str) else {}
        if m.role == "assistant" and m.tool_calls:
            return self._calls(m, stamp)
        events = [self._observation(r, stamp) for r in m.tool_results]
        text = "\n\n".join(b.text for b in m.blocks if isinstance(b, Text))
        images = [_image_url(b) for b in m.blocks if isinstance(b, Image)]
        if images or any(isinstance(b, Text) for b in m.blocks):   # an empty one is not written
            events.append(self._text(m, text, images, stamp))
        return events

    def _text(self, m: Message, text: str, images: list[str], stamp: dict[str, Any]) -> dict[str, Any]:
        ev: dict[str, Any] = {"id": self._id(), **stamp}
        if m.role == "system":
            ev.update(source="agent", action="system", args={"content": text}, message=text)
        else:
            ev.update(source="agent" if m.role == "assistant" else "user", action="message",
                      args={"content": text, "image_urls": images or None, "wait_for_response": False},
                      message=text)
        return mark_origin(ev, m)

    def _calls(self, m: Message, stamp: dict[str, Any]) -> list[Any]:
        said = "\n\n".join(b.text for b in m.blocks if isinstance(b, Text) and b.text.strip())
        calls = [{"id": c.id, "type": "function",
                  "function": {"name": c.name, "arguments": json.dumps(dict(c.input), ensure_ascii=False)}}
                 for c in m.tool_calls]
        response = {"id": f"worksurface-{m.id}",
                    "choices": [{"message": {"role": "assistant", "content": said, "tool_calls": calls}}]}
        events = []
        for k, c in enumerate(m.tool_calls):
            eid = self._id()
            self.action_of_call[c.id] = eid
            events.append(mark_origin({
                "id": eid, **stamp, "source": "agent", "message": said if k == 0 else "",
                "action": _ACTIONS.get(c.name, (c.name, c.name))[0],
                "args": {**dict(c.input), "thought": said if k == 0 else ""},
                "tool_call_metadata": {"function_name": c.name, "tool_call_id": c.id,
                                       "model_response": response, "total_calls_in_response": len(calls)}}, m))
        return events

    def _observation(self, r: ToolResult, stamp: dict[str, Any]) -> dict[str, Any]:
        name = self.call_names.get(r.call_id, "")
        kind = "error" if r.is_error else _ACTIONS.get(name, ("", "run"))[1]
        return {"id": self._id(), **stamp, "source": "agent", "message": r.content,
                "cause": self.action_of_call.get(r.call_id), "observation": kind, "content": r.content, "extras": {},
                "tool_call_metadata": {"function_name": name, "tool_call_id": r.call_id}}


def _image_url(image: Image) -> str:
    return image.data if image.source == "url" else f"data:{image.media_type};base64,{image.data}"
