"""aider `.aider.chat.history.md` chat logs.

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

Write: an unmodified transcript gives back the text it was read from; otherwise the chat is written
as aider's own writer does (`#### ` input lines and `> ` notices ending in its hard break, replies as
plain markdown, a `# aider chat started at` line per session, the prose and chat-transcript divs of
a published example). A line `# worksurface: <origin> <role> <check>` (aider's restore skips `# ` lines)
before a message marks one worksurface made, or a system message, which aider has no place for;
a system message is written as a notice. A model's reply is written verbatim, so it could hold such
a line: a mark counts only when `check` (a digest of the mark's place among the file's marks, the
origin, the role and the text of the message it marks) matches, which a line copied or typed into a
reply does not; any other such line is text of the message it is in. Not held: tool calls (convert.py makes them text), a reply
line that starts with `#### ` or `> ` outside a code block (it reads back as input or a notice).
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from ..core.errors import FormatError
from ..core.model import ROLES, Message, Origin, Role, Text
from .base import Transcript

NAME = "aider"
WRITABLE = True

_SESSION = "# aider chat started at "
_USER = "####"
_TOOL = ">"
_HARD_BREAK = "  "          # aider ends user and tool lines with two spaces (a markdown line break)
_CHAT_DIV = re.compile(r'^<div class="chat-transcript"')
_FENCE = re.compile(r"^(`{3,}|~{3,})")   # at column 0: indented ones are code inside code
_SNIFF_CHARS = 20_000       # aider markers appear near the top; published examples after a short intro
_SNIFF = re.compile(r"^(# aider chat started at |#### )", re.MULTILINE)
_MARK = "# worksurface: "   # + "<origin> <role> <check>": the next message's origin and role
# Transcript.meta: the text read and how many messages it made, written back when nothing changed
# (a transcript cut at a point keeps the meta but not all the messages).
SOURCE_TEXT = "_text"
READ_COUNT = "_messages"
UNKNOWN_START = "(unknown)"  # session start of a file whose first message does not say when
_DIV_OPEN = '<div class="chat-transcript" markdown="1">'
_DIV_CLOSE = "</div>"


def sniff(text: str, path: str | None) -> bool:
    head = text[:_SNIFF_CHARS]
    return head.lstrip()[:1] not in ("[", "{") and _SNIFF.search(head) is not None


class _Parser:
    def __init__(self, honoured: frozenset[int] | None = None) -> None:
        self.messages: list[Message] = []
        self.extras: list[tuple[str | None, Any]] = []
        self.sessions: list[str] = []
        self.kind: str | None = None        # "user", "tool" or "assistant": the segment being read
        self.lines: list[str] = []
        self.fence: str | None = None       # the open fence's marker inside assistant text
        self.tool_continues = False         # a multi-line notice: only its first line has "> "
        self.session_start: str | None = None
        self.mark: _Candidate | None = None  # from a `# worksurface:` line
        # Line numbers of the mark lines to honour (None: every one that parses, to check them).
        self.honoured = honoured
        self.candidates: list[tuple[_Candidate, str]] = []   # each honoured mark and the text it marked

    def feed(self, line: str, number: int = 0) -> None:
        if self.fence is not None and _written_by_aider(line):
            self.fence = None               # a reply cut off (^C) inside a code block
        if self.fence is not None:
            self._fence_line(line)
        elif self.tool_continues and line.strip() and not (_is(line, _USER) or _is(line, _TOOL)):
            self.lines.append(_unbreak(line))
            self.tool_continues = not line.endswith(_HARD_BREAK)
        elif line.startswith(_MARK) and (mark := _marked(line, number)) is not None and (
                self.honoured is None or number in self.honoured):
            self.flush()
            self.mark = mark
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
        role: Role = "assistant" if self.kind == "assistant" else "user"
        origin = Origin.CONVERSATION
        if self.mark is not None:
            self.candidates.append((self.mark, body))
            origin, role, self.mark = self.mark.origin, self.mark.role, None
            meta.pop("kind", None)
        self.messages.append(Message(str(len(self.messages)), role, (Text(body),), origin, meta=meta))
        self.kind, self.lines, self.fence, self.tool_continues = None, [], None, False

    def outside(self, prose: list[str]) -> None:
        if any(p.strip() for p in prose):
            after = self.messages[-1].id if self.messages else None
            self.extras.append((after, {"markdown": "\n".join(prose)}))


@dataclass(frozen=True)
class _Candidate:
    """A `# worksurface: <origin> <role> <check>` line: what it says, and where it is."""

    origin: Origin
    role: Role
    check: str
    line: int


def _marked(line: str, number: int) -> _Candidate | None:
    """The mark a `# worksurface:` line states (not yet checked); None if it is not one."""
    words = line[len(_MARK):].split()
    if len(words) != 3 or words[0] not in {o.value for o in Origin} or words[1] not in ROLES:
        return None
    return _Candidate(Origin(words[0]), words[1], words[2], number)  # type: ignore[arg-type]


def mark_check(ordinal: int, origin: Origin, role: str, text: str) -> str:
    """The check of the `ordinal`-th mark of a file (0 first) on a message: binds the mark to its
    place and to the message's text (whitespace aside: aider's layout changes it)."""
    key = f"{ordinal}\0{origin.value}\0{role}\0{' '.join(text.split())}"
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _verified(candidates: list[tuple[_Candidate, str]]) -> frozenset[int]:
    """The lines of the marks whose check holds, counted in file order (a failed one is text and takes
    no place among the marks)."""
    out: set[int] = set()
    for mark, body in candidates:
        if mark.check == mark_check(len(out), mark.origin, mark.role, body):
            out.add(mark.line)
    return frozenset(out)


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
    lines = text.splitlines()
    parser = _parse(lines, None)
    honoured = _verified(parser.candidates)
    if len(honoured) < len(parser.candidates):
        # A mark line whose check fails is text: read again with only the marks that hold (a mark's
        # message reads the same either way, so their checks still hold).
        parser = _parse(lines, honoured)
    if not parser.messages:
        raise FormatError("no aider chat found (no '#### ' user lines or chat-transcript blocks)", path=path)
    if not any(m.role == "user" and m.meta.get("kind") != "tool_output" for m in parser.messages):
        # Markdown with only notices and prose is not a chat: every aider chat starts with user input.
        raise FormatError("no aider user input found (no '#### ' line): not an aider chat history",
                          path=path)
    return Transcript(parser.messages, NAME, path, extras=parser.extras,
                      meta={"sessions": parser.sessions, SOURCE_TEXT: text, READ_COUNT: len(parser.messages)})


def _parse(lines: list[str], honoured: frozenset[int] | None) -> _Parser:
    parser = _Parser(honoured)
    if any(_CHAT_DIV.match(line) for line in lines):
        _read_divs(parser, lines)
    else:
        for number, line in enumerate(lines):
            parser.feed(line, number)
        parser.flush()
    return parser


def _read_divs(parser: _Parser, lines: list[str]) -> None:
    """Published examples: the chat is inside chat-transcript divs, the rest is prose."""
    prose: list[str] = []
    inside = False
    for number, line in enumerate(lines):
        if not inside and _CHAT_DIV.match(line):
            parser.outside(prose)
            prose, inside = [], True
        elif inside and line.strip() == "</div>" and parser.fence is None:
            parser.flush()
            inside = False
        elif inside:
            parser.feed(line, number)
        else:
            prose.append(line)
    parser.flush()
    parser.outside(prose)


# ---- write -----------------------------------------------------------------------------------

def write(transcript: Transcript, messages: Sequence[Message] | None = None) -> str:
    msgs = list(transcript.messages if messages is None else messages)
    own = transcript.format == NAME
    source = transcript.meta.get(SOURCE_TEXT) if own else None
    if (isinstance(source, str) and transcript.meta.get(READ_COUNT) == len(transcript.messages)
            and _unchanged(msgs, transcript.messages)):
        return source
    prose: dict[str | None, list[str]] = defaultdict(list)
    for anchor, extra in transcript.extras if own else ():
        if isinstance(extra, dict) and isinstance(extra.get("markdown"), str):
            prose[anchor].append(extra["markdown"])
    out = _Writer(divs=bool(prose))
    for text in prose.pop(None, []):
        out.prose(text)
    for m in msgs:
        if m.tool_calls or m.tool_results:
            raise FormatError("aider chat history holds no tool calls or results; write through "
                              "worksurface.formats.dumps, which makes them text", path=transcript.path,
                              record=m.id)
        out.message(m)
        for text in prose.pop(m.id, []):
            out.prose(text)
    return out.text()


def _unchanged(msgs: list[Message], originals: list[Message]) -> bool:
    """The same messages as read (content, origin and the aider kinds that shape the text)."""
    return msgs == originals and all(
        (a.meta.get("kind"), a.meta.get("session_start")) == (b.meta.get("kind"), b.meta.get("session_start"))
        for a, b in zip(msgs, originals))


class _Writer:
    """Lines in aider's chat history layout: each segment followed by one blank line."""

    def __init__(self, divs: bool) -> None:
        self.lines: list[str] = []
        self.divs = divs            # a published example: chat inside chat-transcript divs
        self.inside = False
        self.after_command = False
        self.marks = 0              # marks written so far (each one's check names its place)

    def prose(self, text: str) -> None:
        if self.inside:
            self.lines.append(_DIV_CLOSE)
            self.inside = False
        self.lines.extend(text.split("\n"))

    def message(self, m: Message) -> None:
        text = "\n".join(b.text for b in m.blocks if isinstance(b, Text))
        kind = m.meta.get("kind")
        as_input = m.role == "user" and (kind != "tool_output" or m.is_worksurface)
        if not as_input and not text.strip():
            return                  # a reply or notice without text has no lines in aider's log
        if self.divs and not self.inside:
            self.lines += [_DIV_OPEN, ""]
            self.inside = True
        if isinstance(m.meta.get("session_start"), str):
            self.lines += [_SESSION + m.meta["session_start"], ""]
        if kind == "tool_output" and self.after_command and self.lines and not self.lines[-1]:
            self.lines.pop()        # aider prints a command's output right under it
        self.after_command = kind == "command"
        if m.is_worksurface or m.role == "system":
            check = mark_check(self.marks, m.origin, m.role, text)
            self.lines.append(f"{_MARK}{m.origin.value} {m.role} {check}")
            self.marks += 1
        if as_input:
            self.lines += [f"{_USER} {line}{_HARD_BREAK}" for line in text.split("\n")]
        elif m.role == "assistant":
            self.lines.append(text.strip())
        else:                       # a notice: aider's output, or a message aider has no place for
            self.lines += [f"{_TOOL} {line}{_HARD_BREAK}" if line else "" for line in text.split("\n")]
        self.lines.append("")

    def text(self) -> str:
        if self.inside:
            self.lines.append(_DIV_CLOSE)
        text = "\n".join(self.lines) + "\n"
        if text.lstrip()[:1] in ("[", "{"):     # would read as JSON: start as aider's own files do
            text = f"{_SESSION}{UNKNOWN_START}\n\n{text}"
        return text
