"""Real transcripts for the facts and structured-summarizer tests, parsed once per test session.

Uses the project's adapter (`worksurface.formats.read_transcript`) when it imports; otherwise a
minimal Claude Code reader (user/assistant records, queued inputs) good enough for fact extraction.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from worksurface.model import Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult

TRANSCRIPTS = Path(__file__).resolve().parents[1].parent / "shared" / "transcripts"
CLAUDE_CODE = TRANSCRIPTS / "claude-code"
LONG_SESSIONS = ("258c7280-ae70-4798-800f-63464d01a85d.jsonl", "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")
SMALL_SESSIONS = ("short.jsonl", "tool_heavy.jsonl", "subagent.jsonl")


def _result_text(content) -> tuple[str, tuple[Image, ...]]:
    if isinstance(content, str):
        return content, ()
    texts, images = [], []
    for part in content or []:
        if part.get("type") == "text":
            texts.append(part.get("text", ""))
        elif part.get("type") == "image":
            images.append(Image(media_type=part.get("source", {}).get("media_type", "image/png")))
        else:
            texts.append(json.dumps(part))
    return "\n".join(texts), tuple(images)


def _blocks(content) -> list:
    if isinstance(content, str):
        return [Text(content)]
    out = []
    for b in content:
        t = b.get("type")
        if t == "text":
            out.append(Text(b["text"]))
        elif t == "thinking":
            out.append(Thinking(b.get("thinking", ""), b.get("signature")))
        elif t == "tool_use":
            out.append(ToolCall(b["id"], b["name"], b.get("input") or {}))
        elif t == "tool_result":
            text, images = _result_text(b.get("content"))
            out.append(ToolResult(b["tool_use_id"], text, bool(b.get("is_error")), images))
        else:
            out.append(Opaque.of(b))
    return out


def _fallback_read(path: Path) -> tuple[list[Message], list[tuple[str | None, str]]]:
    messages: list[Message] = []
    queued: list[tuple[str | None, str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        kind = rec.get("type")
        if kind == "queue-operation" and rec.get("operation") == "enqueue" and rec.get("content"):
            queued.append((messages[-1].id if messages else None, rec["content"]))
        if kind not in ("user", "assistant"):
            continue
        meta = {"cwd": rec.get("cwd"), "gitBranch": rec.get("gitBranch"),
                "is_meta": bool(rec.get("isMeta")), "is_compact_summary": bool(rec.get("isCompactSummary"))}
        messages.append(Message(rec["uuid"], kind, tuple(_blocks(rec["message"]["content"])), meta=meta))
    return messages, queued


@lru_cache(maxsize=None)
def load(name: str) -> tuple[tuple[Message, ...], tuple[tuple[str | None, str], ...]]:
    """(messages, queued user inputs) of a Claude Code transcript in `claude-code/`."""
    path = CLAUDE_CODE / name
    try:
        from worksurface.formats import read_transcript
        t = read_transcript(path, format="claude-code")
        return tuple(t.messages), tuple(t.queued_inputs)
    except Exception:  # adapter not importable yet, or not able to read this file
        messages, queued = _fallback_read(path)
        return tuple(messages), tuple(queued)


def before_compaction(name: str) -> tuple[tuple[Message, ...], tuple[tuple[str | None, str], ...]]:
    """The session up to its first real compaction summary: what a compaction there would summarize."""
    messages, queued = load(name)
    for i, m in enumerate(messages):
        if m.meta.get("is_compact_summary"):
            ids = {x.id for x in messages[:i]}
            return messages[:i], tuple(q for q in queued if q[0] in ids)
    return messages, queued


class Chat:
    """Hand-built transcripts with deterministic ids: `c.user(..)`, `c.say(..)`, `c.call(name, input, out)`."""

    def __init__(self, cwd: str | None = None) -> None:
        self.messages: list[Message] = []
        self.meta = {"cwd": cwd} if cwd else {}

    def _add(self, role: str, blocks: tuple, **meta) -> Message:
        m = Message(f"m{len(self.messages)}", role, blocks, meta={**self.meta, **meta})
        self.messages.append(m)
        return m

    def user(self, text: str, **meta) -> "Chat":
        self._add("user", (Text(text),), **meta)
        return self

    def say(self, text: str) -> "Chat":
        self._add("assistant", (Text(text),))
        return self

    def call(self, name: str, input: dict, output: str | None, is_error: bool = False,
             text: str | None = None) -> str:
        """A tool call and (unless output is None) its result; returns the call id."""
        call_id = f"c{len(self.messages)}"
        blocks = ((Text(text),) if text else ()) + (ToolCall(call_id, name, input),)
        self._add("assistant", blocks)
        if output is not None:
            self._add("user", (ToolResult(call_id, output, is_error),))
        return call_id

    def bash(self, command: str, output: str, is_error: bool = False) -> str:
        return self.call("Bash", {"command": command}, output, is_error)
