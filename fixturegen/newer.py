"""Synthetic Claude Code 2.1.2xx sessions (issue 56): a `fixturegen` session rewritten into what the
newer Claude Code writes, for the corpus gate and the format tests.

On top of the base session: the version and the model the user chose on every assistant record
(`requestedModel`, e.g. `claude-opus-4-6[1m]`), a `custom-title` first and, after the first prompt,
attachment records stamped before it (environment, a SessionStart hook's context, the deferred tools
announced: ToolSearch, SendMessage, MCP browser tools); at about two thirds, a manual
`/compact <instructions>` queued, then Claude Code's boundary with its full metadata (postTokens,
durationMs, cumulativeDroppedTokens, preservedSegment, preservedMessages naming the last turn by id,
and in allUuids one id no record holds, as real files do), the summary, and the next prompt hung on
the summary as Claude Code writes it (it relinks the kept turn on load); later usage drops by what
the compaction removed; `last-prompt`, `mode` and `tools-used` records; and a closing turn that loads a
tool with ToolSearch, drives an MCP browser tool, messages a teammate with SendMessage and launches a
sub-agent named by its model. The shapes are those the pinned Claude Code (2.1.328) writes. Same
arguments, same bytes.
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import datetime, timedelta
from typing import Any

from . import generate_records

VERSION = "2.1.217"
COMPACT_AT = 0.66  # the share of the base session's records before the manual compaction
INSTRUCTIONS = "focus on the failing tests and the files changed"
HOOK_RULE = "Never commit directly to main: open a branch for every change."
DEFERRED = ["CronCreate", "NotebookEdit", "SendMessage", "WebFetch", "WebSearch",
            "mcp__claude-in-chrome__navigate", "mcp__claude-in-chrome__read_page"]
MISSING_ID = "0f0f0f0f-0000-4000-8000-000000000000"  # named in allUuids, held by no record


def newer_records(tokens: int, seed: int = 0, *, model: str = "claude-opus-4-6[1m]") -> list[dict[str, Any]]:
    """The records of a 2.1.2xx session of about `tokens` tokens before its compaction (see the module)."""
    base = generate_records(tokens, seed)
    rng = random.Random(seed * 7919 + 56)
    ids = _Ids(rng)
    for r in base:
        if "version" in r:
            r["version"] = VERSION
        if r.get("type") == "assistant":
            r["requestedModel"] = model
    records = _opening(base, ids)
    records = _compaction(records, ids)
    return _closing(records, ids, model)


def newer_jsonl(tokens: int, seed: int = 0, *, model: str = "claude-opus-4-6[1m]") -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in newer_records(tokens, seed, model=model))


class _Ids:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def tool(self) -> str:
        return "toolu_01" + "".join(self.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789")
                                    for _ in range(22))


def _stamp(timestamp: str, seconds: float) -> str:
    at = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ") + timedelta(seconds=seconds)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def _envelope(like: dict[str, Any], kind: str, parent: str | None, uid: str, timestamp: str,
              **fields: Any) -> dict[str, Any]:
    keys = ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch", "slug")
    return {"parentUuid": parent, **{k: like[k] for k in keys if k in like}, "type": kind, **fields,
            "uuid": uid, "timestamp": timestamp}


def _is_prompt(r: dict[str, Any]) -> bool:
    return r.get("type") == "user" and not r.get("isMeta") and isinstance(r["message"]["content"], str)


def _opening(records: list[dict[str, Any]], ids: _Ids) -> list[dict[str, Any]]:
    """A title first; after the first prompt, attachments stamped before it (out of time order)."""
    first = next(i for i, r in enumerate(records) if _is_prompt(r))
    prompt = records[first]
    attachments = [
        {"type": "environment", "snapshot": {"workingDirectory": prompt["cwd"], "platform": "linux", "shell": "bash"}},
        {"type": "hook_additional_context", "hookEvent": "SessionStart", "content": [HOOK_RULE]},
        {"type": "deferred_tools_delta", "addedNames": DEFERRED, "addedLines": DEFERRED, "removedNames": []},
    ]
    made, parent = [], prompt["uuid"]
    for n, attachment in enumerate(attachments):
        made.append(_envelope(prompt, "attachment", parent, ids.uuid(), _stamp(prompt["timestamp"], -0.003 + n * 0.001),
                              attachment=attachment))
        parent = made[-1]["uuid"]
    for r in records[first + 1:]:
        if r.get("parentUuid") == prompt["uuid"]:
            r["parentUuid"] = parent
            break
    title = {"type": "custom-title", "customTitle": "orders service: pagination and rounding",
             "sessionId": prompt["sessionId"]}
    return [title, *records[:first + 1], *made, *records[first + 1:]]


def _context(r: dict[str, Any]) -> int:
    usage = r["message"]["usage"]
    return int(usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"])


def _compaction(records: list[dict[str, Any]], ids: _Ids) -> list[dict[str, Any]]:
    """A manual /compact before the prompt at about COMPACT_AT, keeping the turn before it verbatim."""
    prompts = [i for i, r in enumerate(records) if _is_prompt(r)]
    at = next((i for i in prompts if i >= len(records) * COMPACT_AT), prompts[-1])
    head = max(i for i in prompts if i < at)
    kept = [r for r in records[head:at] if "uuid" in r]
    last = next(r for r in reversed(records[:at]) if r.get("type") == "assistant")
    before_kept = next(r for r in reversed(records[:head]) if r.get("type") == "assistant")
    pre = _context(last)
    summary_text = (
        "This session is being continued from a previous conversation that ran out of context. The summary "
        "below covers the earlier portion of the conversation.\n\nSummary:\n1. Primary Request and Intent: "
        "the user asked for changes to the orders service (pagination, rounding) under standing rules: don't "
        "touch migrations/, pytest not unittest, run `make lint` before committing.\n2. Files and Code: the "
        "orders and billing modules and their tests.\n3. Pending: the tests the user asked to focus on.\n\n"
        "The messages after this summary are the most recent messages from before compaction, kept verbatim.")
    summary_tokens = len(summary_text) // 4
    dropped = max(0, _context(before_kept) - summary_tokens)
    post = pre - dropped
    uuids = [r["uuid"] for r in kept]
    boundary_id, summary_id = ids.uuid(), ids.uuid()
    stamp = _stamp(last["timestamp"], 30)
    session = last["sessionId"]
    queued = [
        {"type": "last-prompt", "lastPrompt": records[head]["message"]["content"][:200], "leafUuid": kept[-1]["uuid"],
         "sessionId": session},
        {"type": "mode", "mode": "normal", "sessionId": session},
        {"type": "queue-operation", "operation": "enqueue", "timestamp": _stamp(stamp, -2), "sessionId": session,
         "content": f"/compact {INSTRUCTIONS}"},
        {"type": "queue-operation", "operation": "dequeue", "timestamp": _stamp(stamp, -1.9), "sessionId": session},
    ]
    boundary = _envelope(last, "system", None, boundary_id, stamp, subtype="compact_boundary",
                         content="Conversation compacted", isMeta=False, level="info",
                         logicalParentUuid=kept[-1]["uuid"], compactMetadata={
                             "trigger": "manual", "preTokens": pre, "durationMs": 48_312,
                             "preservedSegment": {"headUuid": uuids[0], "anchorUuid": summary_id, "tailUuid": uuids[-1]},
                             "preservedMessages": {"anchorUuid": summary_id, "uuids": uuids,
                                                   "allUuids": [*uuids, MISSING_ID]},
                             "postTokens": post, "cumulativeDroppedTokens": dropped})
    summary = _envelope(last, "user", boundary_id, summary_id, _stamp(stamp, -0.002),
                        message={"role": "user", "content": summary_text}, isVisibleInTranscriptOnly=True,
                        isCompactSummary=True)
    nxt = records[at]
    nxt["parentUuid"] = summary_id  # Claude Code hangs the next record on the anchor and relinks on load
    for r in records[at:]:
        if r.get("type") == "assistant":
            usage = r["message"]["usage"]
            usage["cache_read_input_tokens"] = max(0, usage["cache_read_input_tokens"] - dropped)
    return [*records[:at], *queued, boundary, summary, *records[at:]]


def _closing(records: list[dict[str, Any]], ids: _Ids, model: str) -> list[dict[str, Any]]:
    """A last turn with the newer tools and a sub-agent named by its model."""
    last = next(r for r in reversed(records) if "uuid" in r)
    answered = next(r for r in reversed(records) if r.get("type") == "assistant")
    context = _context(answered)
    stamp, parent, out = last["timestamp"], last["uuid"], []
    calls = [("ToolSearch", {"query": "select:mcp__claude-in-chrome__navigate", "max_results": 1},
              "Loaded: mcp__claude-in-chrome__navigate"),
             ("mcp__claude-in-chrome__navigate", {"url": "http://localhost:8000/orders?page=2"},
              "Navigated to http://localhost:8000/orders?page=2 (200): 20 orders listed, next-page link present"),
             ("SendMessage", {"to": "reviewer", "message": "Pagination fix is on branch fix/orders-page."},
              "Message delivered to reviewer"),
             ("Agent", {"description": "Check rounding tests", "prompt": "Run the billing tests and report failures.",
                        "model": "haiku"},
              "The billing tests pass: 12 passed in 0.41s.")]

    def add(kind: str, **fields: Any) -> dict[str, Any]:
        nonlocal stamp, parent
        stamp = _stamp(stamp, 2)
        record = _envelope(last if "cwd" in last else answered, kind, parent, ids.uuid(), stamp, **fields)
        parent = record["uuid"]
        out.append(record)
        return record

    add("user", message={"role": "user", "content": "Check the orders page in the browser, tell the reviewer, "
                                                     "and have a quick agent run the billing tests."})
    for n, (name, args, result) in enumerate(calls):
        context += 60
        call_id = ids.tool()
        call = add("assistant", requestedModel=model, message={
            "model": answered["message"]["model"], "id": f"msg_01ws56close{n:02d}", "type": "message",
            "role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": name, "input": args}],
            "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": 6, "cache_creation_input_tokens": 120, "cache_read_input_tokens": context - 126,
                      "output_tokens": 40}})
        add("user", message={"role": "user", "content": [{"tool_use_id": call_id, "type": "tool_result",
                                                          "content": result}]},
            toolUseResult={"stdout": result}, sourceToolAssistantUUID=call["uuid"])
    context += 60
    add("assistant", requestedModel=model, message={
        "model": answered["message"]["model"], "id": "msg_01ws56closeend", "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": "The page lists 20 orders with a next link; the reviewer has the branch "
                                             "and the billing tests pass."}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 6, "cache_creation_input_tokens": 120, "cache_read_input_tokens": context - 126,
                  "output_tokens": 30}})
    session = last["sessionId"]
    tail = [{"type": "last-prompt", "lastPrompt": out[0]["message"]["content"][:200], "leafUuid": parent,
             "sessionId": session},
            {"type": "tools-used", "tools": [c[0] for c in calls], "sessionId": session}]
    return [*records, *out, *tail]
