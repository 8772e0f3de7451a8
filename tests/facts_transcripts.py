"""Transcripts for the facts and structured-summarizer tests: the real Claude Code sessions (parsed
once per test session with the project's adapter) and a small builder for hand-made ones."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from worksurface.formats import read_transcript
from worksurface.core.model import Message, Text, ToolCall, ToolResult
from shared import TRANSCRIPTS as _TRANSCRIPTS

TRANSCRIPTS = _TRANSCRIPTS
CLAUDE_CODE = TRANSCRIPTS / "claude-code"
LONG_SESSIONS = ("258c7280-ae70-4798-800f-63464d01a85d.jsonl", "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")
SMALL_SESSIONS = ("short.jsonl", "tool_heavy.jsonl", "subagent.jsonl")


@lru_cache(maxsize=None)
def load(name: str) -> tuple[tuple[Message, ...], tuple[tuple[str | None, str], ...]]:
    """(messages, queued user inputs) of a Claude Code transcript in `claude-code/`."""
    t = read_transcript(CLAUDE_CODE / name, format="claude-code")
    return tuple(t.messages), tuple(t.queued_inputs)


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
