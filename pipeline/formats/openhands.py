"""OpenHands event streams (read-only): a JSON list of action and observation events.

- agent actions with `tool_call_metadata` -> one assistant message per model response (actions from
  one response are grouped): Text(what the model said) + ToolCall(tool_call_id, function_name,
  arguments from the model response, else the action's args);
- an observation with `tool_call_metadata` (or a `cause` pointing at such an action) -> a tool
  message with the ToolResult (command output keeps its prefix/suffix as the model saw it);
- `message` actions from the user / agent -> user / assistant text; a `system` action -> system;
- everything else (agent state changes, "No observation" acks, ...) -> Transcript.extras.
A call whose observation never came (`finish`, a run that ended) is flagged meta `interrupted`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import FormatError
from ..model import Block, Image, Message, Role, Text, ToolCall, ToolResult
from .base import Transcript
from .jsondoc import content_text, parse_json, peek_json
from .validate import check_pairing, mark_unanswered

NAME = "openhands"
WRITABLE = False

_EXPECTED = "an OpenHands event list (objects with source and action or observation)"
# Action args that are OpenHands bookkeeping, not arguments the model gave (fallback path only).
_NON_ARGUMENTS = frozenset({"thought", "impl_source", "translated_ipython_code", "confirmation_state",
                            "blocking", "hidden", "security_risk"})
_SNIFF_RECORDS = 5


@dataclass
class _Draft:
    """A message being assembled (actions of one model response arrive as several events)."""

    id: str
    role: Role
    blocks: list[Block] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


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
            role = "user" if ev["source"] == "user" else "assistant"
            drafts.append(_Draft(eid, role, _message_blocks(ev), {"event": "message", **stamp}))
        elif ev.get("action") == "system":
            system = content_text((ev.get("args") or {}).get("content"))
            drafts.append(_Draft(eid, "system", [Text(system)], stamp))
        else:
            extras.append((drafts[-1].id if drafts else None, ev))
    messages = [Message(d.id, d.role, tuple(d.blocks), meta=d.meta) for d in drafts]
    check_pairing(messages, path)
    return Transcript(mark_unanswered(messages), NAME, path, extras=extras)


def _tool_call_id(tcm: Any) -> str | None:
    cid = tcm.get("tool_call_id") if isinstance(tcm, dict) else None
    return cid if isinstance(cid, str) else None


def _call(ev: dict[str, Any], tcm: dict[str, Any], path: str | None, i: int) -> ToolCall:
    cid = _tool_call_id(tcm)
    if cid is None:
        raise FormatError("tool_call_metadata without a tool_call_id", path=path, record=f"[{i}]")
    name = str(tcm.get("function_name", ev.get("action", "")))
    for tc in _response_message(tcm).get("tool_calls") or ():
        if isinstance(tc, dict) and tc.get("id") == cid:
            args = (tc.get("function") or {}).get("arguments")
            try:
                value = json.loads(args) if isinstance(args, str) else args
            except json.JSONDecodeError:
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
    content = content_text(ev.get("content")) or ("" if run else str(ev.get("message", "")))
    meta = (ev.get("extras") or {}).get("metadata")
    if run and isinstance(meta, dict):
        content = f"{meta.get('prefix') or ''}{content}{meta.get('suffix') or ''}"
    return content


def _message_blocks(ev: dict[str, Any]) -> list[Block]:
    args = ev.get("args") or {}
    text = args.get("content") if isinstance(args.get("content"), str) else str(ev.get("message", ""))
    images = [Image(data=u, source="url") for u in args.get("image_urls") or () if isinstance(u, str)]
    return [Text(text), *images]
