"""aider `.aider.chat.history.md` chat logs (read-only).

aider writes user input as `#### ` lines, its own notices and command output as `> ` lines, and the
model's replies as plain markdown (SEARCH/REPLACE edit blocks included). So:
- consecutive `####` lines -> one user message (a blank line ends it: the next `####` is new input);
  input starting with `/` is an aider command (meta kind "command");
- `>` lines (blank lines between them included) -> a user message with meta kind "tool_output":
  harness output the model may see, not tool results, since aider makes no tool calls. aider marks
  only the first line of a multi-line notice; the notice goes on until a line with the hard break;
- everything else -> assistant text; inside a code fence `####` / `>` lines are the reply's own,
  unless they end in aider's hard break (then the reply was cut off inside the block).
`# aider chat started at ...` starts a session (meta session_start on its first message). Published
example chats wrap the chat in `<div class="chat-transcript">`; only those parts are read and the
prose around them goes to Transcript.extras. Ids are positions: "0", "1", ...
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import FormatError
from ..model import Message, Text
from .base import Transcript

NAME = "aider"
WRITABLE = False

_SESSION = "# aider chat started at "
_USER = "####"
_TOOL = ">"
_HARD_BREAK = "  "          # aider ends user and tool lines with two spaces (a markdown line break)
_CHAT_DIV = re.compile(r'^<div class="chat-transcript"')
_FENCE = re.compile(r"^(`{3,}|~{3,})")   # at column 0: indented ones are code inside code
_SNIFF_CHARS = 20_000       # aider markers appear near the top; published examples after a short intro
_SNIFF = re.compile(r"^(# aider chat started at |#### )", re.MULTILINE)


def sniff(text: str, path: str | None) -> bool:
    head = text[:_SNIFF_CHARS]
    return head.lstrip()[:1] not in ("[", "{") and _SNIFF.search(head) is not None


class _Parser:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.extras: list[tuple[str | None, Any]] = []
        self.sessions: list[str] = []
        self.kind: str | None = None        # "user", "tool" or "assistant": the segment being read
        self.lines: list[str] = []
        self.fence: str | None = None       # the open fence's marker inside assistant text
        self.tool_continues = False         # a multi-line notice: only its first line has "> "
        self.session_start: str | None = None

    def feed(self, line: str) -> None:
        if self.fence is not None and _written_by_aider(line):
            self.fence = None               # a reply cut off (^C) inside a code block
        if self.fence is not None:
            self._fence_line(line)
        elif self.tool_continues and line.strip() and not (_is(line, _USER) or _is(line, _TOOL)):
            self.lines.append(_unbreak(line))
            self.tool_continues = not line.endswith(_HARD_BREAK)
        elif line.startswith(_SESSION):
            self.flush()
            self.session_start = line[len(_SESSION):].strip()
            self.sessions.append(self.session_start)
        elif _is(line, _USER):
            if self.kind != "user":
                self.flush()
                self.kind = "user"
            self.lines.append(_unbreak(line[len(_USER) + 1:] if line.startswith(_USER + " ") else ""))
        elif _is(line, _TOOL):
            if self.kind != "tool":
                self.flush()
                self.kind = "tool"
            self.lines.append(_unbreak(line[len(_TOOL) + 1:] if line.startswith(_TOOL + " ") else ""))
            self.tool_continues = not line.endswith(_HARD_BREAK)
        elif not line.strip():
            self.tool_continues = False
            if self.kind == "user":
                self.flush()
            elif self.kind is not None:
                self.lines.append("")
        else:
            if self.kind != "assistant":
                self.flush()
                self.kind = "assistant"
            self._fence_line(line)

    def _fence_line(self, line: str) -> None:
        self.lines.append(line)
        m = _FENCE.match(line)
        if m is None:
            return
        if self.fence is None:
            self.fence = m.group(1)
        elif line.strip() == m.group(1) and m.group(1).startswith(self.fence):
            self.fence = None               # closed by the same character, at least as long

    def flush(self) -> None:
        if self.kind is None:
            return
        body = "\n".join(self.lines)
        body = body.strip("\n") if self.kind != "assistant" else body.strip()
        meta: dict[str, Any] = {}
        if self.kind == "tool":
            meta["kind"] = "tool_output"
        elif self.kind == "user" and body.startswith("/"):
            meta["kind"] = "command"
        if self.session_start is not None:
            meta["session_start"] = self.session_start
            self.session_start = None
        role = "assistant" if self.kind == "assistant" else "user"
        self.messages.append(Message(str(len(self.messages)), role, (Text(body),), meta=meta))
        self.kind, self.lines, self.fence, self.tool_continues = None, [], None, False

    def outside(self, prose: list[str]) -> None:
        if any(p.strip() for p in prose):
            after = self.messages[-1].id if self.messages else None
            self.extras.append((after, {"markdown": "\n".join(prose)}))


def _is(line: str, prefix: str) -> bool:
    return line == prefix or line.startswith(prefix + " ")


def _written_by_aider(line: str) -> bool:
    """A user or tool line as aider's history writer makes it (with its hard break), which a code
    block in a reply would not contain: it ends a reply that was cut off inside that block."""
    return (_is(line, _USER) or _is(line, _TOOL)) and line.endswith(_HARD_BREAK)


def _unbreak(text: str) -> str:
    return text[: -len(_HARD_BREAK)] if text.endswith(_HARD_BREAK) else text


def read(text: str, path: str | None = None) -> Transcript:
    if text.lstrip()[:1] in ("[", "{") or "\x00" in text:
        raise FormatError("expected aider chat history markdown, found JSON or binary data", path=path,
                          line=1)
    parser = _Parser()
    lines = text.splitlines()
    if any(_CHAT_DIV.match(line) for line in lines):
        _read_divs(parser, lines)
    else:
        for line in lines:
            parser.feed(line)
        parser.flush()
    if not parser.messages:
        raise FormatError("no aider chat found (no '#### ' user lines or chat-transcript blocks)", path=path)
    return Transcript(parser.messages, NAME, path, extras=parser.extras, meta={"sessions": parser.sessions})


def _read_divs(parser: _Parser, lines: list[str]) -> None:
    """Published examples: the chat is inside chat-transcript divs, the rest is prose."""
    prose: list[str] = []
    inside = False
    for line in lines:
        if not inside and _CHAT_DIV.match(line):
            parser.outside(prose)
            prose, inside = [], True
        elif inside and line.strip() == "</div>" and parser.fence is None:
            parser.flush()
            inside = False
        elif inside:
            parser.feed(line)
        else:
            prose.append(line)
    parser.flush()
    parser.outside(prose)
