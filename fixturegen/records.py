"""Claude Code JSONL records for synthetic sessions, with a running token estimate.

Records follow the shapes of real `~/.claude/projects/*.jsonl` files: a `parentUuid` chain, one
content block per assistant record (records of one API response share `message.id` and `usage`),
tool results in user records with `toolUseResult` and `sourceToolAssistantUUID`. `toolUseResult`
carries the structured fields without repeating large contents (the real files repeat them; readers
use `message.content`), which keeps checked-in fixtures small.
"""

from __future__ import annotations

import base64
import json
import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

CLAUDE_CODE_VERSION = "2.1.39"
MODEL = "claude-sonnet-4-5-20250929"
# Characters per cl100k token, measured on the generator's own output (see fixtures/README.md):
# prose and code near 4, numbered file reads and logs denser because of digits and punctuation.
CHARS_PER_TOKEN = {"prose": 4.5, "code": 3.8, "read": 3.33, "log": 2.54}
# The token counter adds these per message and per tool call (worksurface.core.tokens).
MESSAGE_OVERHEAD = 4
TOOL_CALL_OVERHEAD = 8
# Beyond this many characters a structured toolUseResult keeps only a preview of its text.
TOOL_RESULT_PREVIEW_CHARS = 400
REJECTION = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
             "was a file edit, the new_string was NOT written to the file). STOP what you are doing and "
             "wait for the user to tell you how to proceed.")
INTERRUPTED = "[Request interrupted by user for tool use]"


def estimate(text: str, kind: str = "prose") -> float:
    return len(text) / CHARS_PER_TOKEN[kind]


@dataclass
class Call:
    """One tool call of a response and the result the harness gives it."""

    name: str
    input: dict[str, Any]
    result: str
    kind: str = "prose"  # how the result text tokenizes (a CHARS_PER_TOKEN key)
    is_error: bool = False
    tool_use_result: Any = None
    rejected: bool = False


class RecordWriter:
    """Appends records to `records`, keeping the chain, clock, cwd, branch and token estimate."""

    def __init__(self, rng: random.Random, cwd: str, branch: str) -> None:
        self.rng = rng
        self.records: list[dict[str, Any]] = []
        self.tokens = 0.0
        self.cwd = cwd
        self.branch = branch
        self.session_id = self.uuid()
        self.slug = "-".join(rng.choice(w) for w in (("quiet", "brisk", "amber", "lucid"),
                                                      ("folding", "drifting", "humming", "sorting"),
                                                      ("otter", "heron", "maple", "comet")))
        self.clock = datetime(2024, 5, 14, 9, 0, tzinfo=timezone.utc) + timedelta(minutes=rng.randint(0, 600))
        self.parent: str | None = None

    # --- ids, time, envelopes -----------------------------------------------------------------

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _id(self, prefix: str, n: int) -> str:
        alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789"
        return prefix + "".join(self.rng.choice(alphabet) for _ in range(n))

    def _tick(self, low: float = 0.4, high: float = 6.0) -> str:
        self.clock += timedelta(seconds=self.rng.uniform(low, high))
        return self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"

    def _envelope(self, type_: str, **fields: Any) -> dict[str, Any]:
        rec: dict[str, Any] = {"parentUuid": self.parent, "isSidechain": False, "userType": "external",
                               "cwd": self.cwd, "sessionId": self.session_id, "version": CLAUDE_CODE_VERSION,
                               "gitBranch": self.branch}
        if self.records:
            rec["slug"] = self.slug
        rec["type"] = type_
        rec.update(fields)
        rec["uuid"] = self.uuid()
        rec["timestamp"] = self._tick()
        self.records.append(rec)
        self.parent = rec["uuid"]
        return rec

    def snapshot(self) -> tuple[int, float, str, str, str | None, datetime]:
        """State to roll back to when a generated episode turns out too large."""
        return (len(self.records), self.tokens, self.cwd, self.branch, self.parent, self.clock)

    def restore(self, snap: tuple[int, float, str, str, str | None, datetime]) -> None:
        n, self.tokens, self.cwd, self.branch, self.parent, self.clock = snap
        del self.records[n:]

    # --- records ------------------------------------------------------------------------------

    def hook_progress(self, event: str, command: str) -> None:
        tool_use_id = self.uuid()
        self._envelope("progress", data={"type": "hook_progress", "hookEvent": event,
                                         "hookName": f"{event}:startup", "command": command},
                       parentToolUseID=tool_use_id, toolUseID=tool_use_id)

    def user(self, text: str, *, meta: bool = False) -> dict[str, Any]:
        """A user message (the human typing, or with `meta` a harness-injected one such as a skill)."""
        fields: dict[str, Any] = {"message": {"role": "user", "content": text if not meta else
                                              [{"type": "text", "text": text}]}}
        if meta:
            fields["isMeta"] = True
        else:
            fields.update(thinkingMetadata={"maxThinkingTokens": 31999}, todos=[], permissionMode="default")
        rec = self._envelope("user", **fields)
        self.tokens += estimate(text) + MESSAGE_OVERHEAD
        if not meta:
            self.records.insert(len(self.records) - 1, {
                "type": "file-history-snapshot", "messageId": rec["uuid"],
                "snapshot": {"messageId": rec["uuid"], "trackedFileBackups": {}, "timestamp": rec["timestamp"]},
                "isSnapshotUpdate": False})
        return rec

    def interrupted(self) -> None:
        self._envelope("user", message={"role": "user", "content": [{"type": "text", "text": INTERRUPTED}]})
        self.tokens += estimate(INTERRUPTED) + MESSAGE_OVERHEAD

    def respond(self, text: str | None = None, calls: tuple[Call, ...] = (), thinking: str | None = None,
                text_kind: str = "prose") -> None:
        """One API response: optional thinking and text, then tool calls, each its own record; then
        the results, each answering its call's record."""
        blocks: list[tuple[dict[str, Any], float]] = []
        if thinking:
            sig = base64.b64encode(self.rng.getrandbits(8 * 96).to_bytes(96, "big")).decode()
            blocks.append(({"type": "thinking", "thinking": thinking, "signature": sig}, estimate(thinking)))
        if text:
            blocks.append(({"type": "text", "text": text}, estimate(text, text_kind)))
        ids = []
        for call in calls:
            ids.append(self._id("toolu_01", 22))
            spec = call.name + " " + json.dumps(call.input, sort_keys=True, separators=(",", ":"))
            kind = "code" if call.name in ("Edit", "Write") else "prose"
            blocks.append(({"type": "tool_use", "id": ids[-1], "name": call.name, "input": call.input},
                           estimate(spec, kind) + TOOL_CALL_OVERHEAD))
        out_tokens = int(sum(t for _, t in blocks))
        usage = {"input_tokens": self.rng.randint(3, 12), "cache_creation_input_tokens": self.rng.randint(200, 4000),
                 "cache_read_input_tokens": int(self.tokens), "output_tokens": max(1, out_tokens),
                 "service_tier": "standard"}
        message_id, request_id = self._id("msg_01", 22), self._id("req_011C", 18)
        call_records = []
        for block, tokens in blocks:
            rec = self._envelope("assistant", message={
                "model": MODEL, "id": message_id, "type": "message", "role": "assistant", "content": [block],
                "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None, "usage": usage},
                requestId=request_id)
            self.tokens += tokens + MESSAGE_OVERHEAD
            if block["type"] == "tool_use":
                call_records.append(rec["uuid"])
        for call, call_id, source in zip(calls, ids, call_records):
            self.parent = source  # each result answers its own call's record, as Claude Code writes them
            content = REJECTION if call.rejected else call.result
            block = {"tool_use_id": call_id, "type": "tool_result", "content": content}
            if call.is_error or call.rejected:
                block["is_error"] = True
            tur = ("User rejected tool use" if call.rejected else
                   f"Error: {_preview(content)}" if call.is_error else call.tool_use_result)
            self._envelope("user", message={"role": "user", "content": [block]},
                           toolUseResult=tur if tur is not None else {"stdout": _preview(content)},
                           sourceToolAssistantUUID=source)
            self.clock += timedelta(seconds=self.rng.uniform(0.2, 25.0) if call.name == "Bash" else 0.1)
            self.tokens += estimate(content, "prose" if call.rejected else call.kind) + MESSAGE_OVERHEAD


def _preview(text: str) -> str:
    return text if len(text) <= TOOL_RESULT_PREVIEW_CHARS else text[:TOOL_RESULT_PREVIEW_CHARS] + "…"
