"""Small builders for hand-made transcripts in tests (a coding session's typical shapes)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from worksurface.core.model import Message, Text, ToolCall, ToolResult
from shared import SHARED as _SHARED

SHARED = _SHARED
TRANSCRIPTS = SHARED / "transcripts"
LONG_CC = sorted((TRANSCRIPTS / "claude-code").glob("*-*-*-*-*.jsonl")) if TRANSCRIPTS.exists() else []


class Convo:
    """Appends messages with deterministic ids: `c.user("..")`, `c.tool("Read", {...}, "out")`."""

    def __init__(self, prefix: str = "m") -> None:
        self.messages: list[Message] = []
        self._ids = itertools.count()
        self.prefix = prefix

    def _id(self) -> str:
        return f"{self.prefix}{next(self._ids)}"

    def system(self, text: str) -> "Convo":
        self.messages.append(Message(self._id(), "system", (Text(text),)))
        return self

    def user(self, text: str) -> "Convo":
        self.messages.append(Message(self._id(), "user", (Text(text),)))
        return self

    def say(self, text: str) -> "Convo":
        self.messages.append(Message(self._id(), "assistant", (Text(text),)))
        return self

    def tool(self, name: str, input: dict[str, Any], output: str, is_error: bool = False,
             text: str | None = None) -> str:
        call_id = f"call-{self.prefix}-{len(self.messages)}"
        blocks = ((Text(text),) if text else ()) + (ToolCall(call_id, name, input),)
        self.messages.append(Message(self._id(), "assistant", blocks))
        self.messages.append(Message(self._id(), "user", (ToolResult(call_id, output, is_error),)))
        return call_id


def words(n: int, seed: int = 0) -> str:
    """About n tokens of varied text (distinct per seed so outputs are not duplicates)."""
    vocab = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma"]
    return " ".join(f"{vocab[(i * 7 + seed) % len(vocab)]}{(i * 31 + seed * 17) % 997}" for i in range(n // 2))


def read_and_test_rounds(rounds: int, request: str, read_words: int) -> Convo:
    """`request`, then per round a read of one of three files, a passing test run and a line of prose."""
    c = Convo().user(request)
    for i in range(rounds):
        c.tool("Read", {"file_path": f"/repo/p{i % 3}.py"}, words(read_words, seed=i))
        c.tool("Bash", {"command": "pytest -q"}, f"{i + 1} passed in 0.1s")
        c.say(f"step {i} done")
    return c

