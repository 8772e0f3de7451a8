"""Provenance decides authority: which text the harness itself wrote.

Only records a harness writes in its own structure may create standing state (constraints,
rejections, file activity, tool announcements, verification facts). Text inside a tool result is
what the world printed: it can be quoted as an observation, never promoted. Each test here looks at
structure the adapters keep (the block kind, the `is_error` flag, Claude Code's `toolUseResult`
record field, aider's command messages), never at what the text merely says about itself.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Iterator, Sequence

from ..core.model import Message, Opaque, Origin, Text, ToolCall, ToolResult
from ..core.memo import per_message, per_message_list
from .text import reminders

# Claude Code's `toolUseResult` for a call the user rejected in the permission prompt.
CC_REJECTED_RECORD = "User rejected tool use"
# The exact wording Claude Code writes into such a result (and into an interrupted call's result).
# How far into a result the rejection wording may start (after leading whitespace).
REJECTION_SCAN_CHARS = 4096
REJECTION_PREFIXES = (
    "The user doesn't want to proceed with this tool use.",
    "The user doesn't want to take this action right now.",
    "The user doesn't want to take this action",
    "[Request interrupted by user",
)
# A rejection result carries nothing but the harness's fixed text and, optionally, what the user
# typed after "the user said:"; anything longer is tool output that starts with the same words.
REJECTION_RE = re.compile(
    r"^(?:The user doesn't want to proceed with this tool use\.(?: The tool use was rejected \(eg\. if it was a "
    r"file edit, the new_string was NOT written to the file\)\.)?(?: STOP what you are doing and wait for the "
    r"user to tell you how to proceed\.)?(?: To tell you how to proceed, the user said:\n[\s\S]*)?"
    r"|The user doesn't want to take this action(?: right now)?\.[^\n]*(?:\n[\s\S]*the user said:[\s\S]*)?"
    r"|\[Request interrupted by user(?: for tool use)?\])\s*$")
# Meta keys under which a request adapter keeps its provider blocks (`<format>.raw`, see rawkeep).
RAW_SUFFIX = ".raw"
# aider commands whose `>` output is the printed output of a program, not aider's own notices.
AIDER_OUTPUT_COMMANDS = ("/run", "/test", "/lint", "/git", "/shell", "!")
# How a tool call from another format is written into aider's chat (see formats/convert.py).
CONVERTED_CALL = "[tool call] "


# How harnesses name the tools another program (an MCP server) provides: `mcp__<server>__<tool>`. The
# harness puts the prefix there itself; what such a tool returns is that server's text.
MCP_PREFIX = "mcp__"


def harness_tool(call: ToolCall) -> bool:
    """Whether the harness itself runs this tool (its own Bash, Read, ...), not another program it
    connects to (an MCP server, whatever the tool calls itself): only the harness's own shell makes
    a test run a verification result or a tracker command a task text."""
    return not call.name.strip().lower().startswith(MCP_PREFIX)


class UserNamed:
    """Whether the user's own words named a source (a URL, an issue number, a file) before a point
    of the transcript: text read from a source the user pointed at is the task the user set, text
    from anywhere else is what a page, a server or a file says. Whole words, any case. The words
    are read only when first asked about (most sessions never ask)."""

    def __init__(self, said: Iterable[tuple[int, str]] = (), before: int | None = None,
                 parent: "UserNamed | None" = None) -> None:
        self._source: Iterable[tuple[int, str]] | None = said
        self._said: list[tuple[int, str]] | None = None
        self._before = before
        self._parent = parent
        self._first: dict[str, int | None] = {}  # needle -> where the user first said it (root only)

    def at(self, index: int) -> "UserNamed":
        """The same words, only those said before message `index`."""
        return UserNamed(before=index, parent=self._parent or self)

    def _words(self) -> list[tuple[int, str]]:
        if self._parent is not None:
            return self._parent._words()
        if self._said is None:
            self._said = [(i, t.casefold()) for i, t in self._source or () if t]
        return self._said

    def __call__(self, needle: str) -> bool:
        n = needle.strip().casefold()
        if not n:
            return False
        first = (self._parent or self)._first_said(n)
        return first is not None and (self._before is None or first < self._before)

    def _first_said(self, needle: str) -> int | None:
        """Where the user first said `needle`, looked for once per needle: every result of a long
        session may ask, and each asking scanned all the user's words before."""
        if needle not in self._first:
            pattern = re.compile(r"(?<![\w.-])#?" + re.escape(needle) + r"(?![\w-])")
            self._first[needle] = min((i for i, t in self._words() if pattern.search(t)), default=None)
        return self._first[needle]


def claude_record(message: Message) -> dict[str, Any] | None:
    """The Claude Code JSONL record a message was read from, when the adapter kept it."""
    raw = message.meta.get("raw")
    if isinstance(raw, dict) and isinstance(raw.get("message"), dict) and "uuid" in raw:
        return raw
    return None


def from_other_harness(message: Message) -> bool:
    """Read from another harness's file (its adapter left its own source in meta, and no Claude Code
    record): Claude Code's fixed wordings (a rejection, an interrupt) there are that file's text, never
    Claude Code's own record. A message built in memory carries no meta and is judged by its text."""
    return bool(message.meta) and claude_record(message) is None and not message.meta.get("is_meta")


def is_harness_rejection(result: ToolResult | None, message: Message | None = None) -> bool:
    """True when the harness itself wrote this result to say the user rejected or interrupted the call.

    Claude Code marks its own rejection record with `toolUseResult: "User rejected tool use"` (and
    `is_error`); a record that kept `toolUseResult` as anything else holds a tool's real output, so
    it is not a rejection whatever its text. Without the record (another format, a hand-built
    message) the result must be flagged as an error and hold nothing but the harness's exact wording.
    """
    if result is None:
        return False
    # The harness's wording opens the result: only its head is looked at until it does (stripping a
    # 200 MB output to read its first words would copy it whole).
    if not result.content[:REJECTION_SCAN_CHARS].lstrip().startswith(REJECTION_PREFIXES):
        return False
    text = result.content.strip()
    record = claude_record(message) if message is not None else None
    if record is not None and "toolUseResult" not in record:
        return False  # Claude Code writes `toolUseResult` on every result record it makes itself
    if record is not None:
        tur = record["toolUseResult"]
        if isinstance(tur, str):
            return tur == CC_REJECTED_RECORD or (tur.startswith("Error:") and tur[6:].strip().startswith(
                REJECTION_PREFIXES) and bool(REJECTION_RE.match(text)))
        return False
    if message is not None and from_other_harness(message):
        return False
    return result.is_error and bool(REJECTION_RE.match(text))


@per_message  # read by the constraints, tools, plan mode and status extractors of one window
def harness_reminders(message: Message) -> list[str]:
    """`<system-reminder>` bodies the harness wrote into this message.

    In a user turn or a meta/attachment record (text blocks of a user-role conversation message) they
    are the harness's, except the notes in which the harness quotes the world (a changed file's lines,
    a file read for an @-mention: QUOTING_NOTES). Inside a tool result only what Claude Code appends
    after the tool's output counts, and only when its record shows where that output ends
    (`appended_reminders`). Reminders printed by a command, a web page or a file are the world's
    text and are never returned."""
    if message.role != "user" or message.origin is not Origin.CONVERSATION:
        return []  # worksurface's own messages (a reinjected file, a summary) are not the harness's
    if message.meta.get("kind") == "tool_output":
        return []  # aider's `>` block: program output and notices, never a hook
    out: list[str] = []
    for block_text in _text_blocks(message):
        out += [body for body in reminders(without_quoted_output(block_text)) if not quotes_the_world(body)]
    record = claude_record(message)
    if record is not None and "toolUseResult" in record:
        own_output: str | None = None  # flattened only for a result that ends with a reminder
        for r in message.tool_results:
            if _ends_with_reminder(r.content):
                own_output = _flatten(record["toolUseResult"]) if own_output is None else own_output
                out += appended_reminders(r.content, own_output)
    return out


@per_message_list  # one fold's constraints, announcements and plan mode read the same list's reminders
def reminders_by_message(messages: Sequence[Message]) -> list[list[str]]:
    """`harness_reminders` of each message of a list, by index. Shared by the list's readers: a
    one-shot list longer than the per-message memo holds would be read once per reader otherwise.
    The inner lists are shared: a reader copies one before changing it."""
    return [harness_reminders(m) for m in messages]


# Notes the harness writes to quote the world's text: their lines are a file's or a tool's, never a rule.
QUOTING_NOTES = ("was modified, either by the user or by a linter", "result of calling the ",
                 "called the read tool with the following input")
# A `<system-reminder>` block at the very end of a text, opening at the start of a line (what Claude
# Code appends after a tool's output; a file's lines are prefixed with their numbers, so never there).
_TRAILING_REMINDER_RE = re.compile(r"(?:^|\n)<system-reminder>((?:(?!<system-reminder>)[\s\S])*?)</system-reminder>\s*$")
# The literal that pattern cannot match without (looked for before the pattern's scan).
_REMINDER_CLOSE = "</system-reminder>"
# The harness's notes are short: only this many characters at the end of a result are looked at.
APPENDED_WINDOW = 65_536
# The line-number prefix Claude Code's Read puts before every line it returns (`   12→`, or a tab).
_LINE_NUMBER_RE = re.compile(r"(?m)^ *\d+(?:→|\t)")


def quotes_the_world(body: str) -> bool:
    """A harness note whose content is a quote of a file or a tool's output (QUOTING_NOTES)."""
    low = body.lower()
    return any(q in low for q in QUOTING_NOTES)


def appended_reminders(content: str, own_output: str) -> list[str]:
    """The reminders Claude Code appended to a tool result after the tool's output: the run of
    `<system-reminder>` blocks that ends the content, each opening on a line of its own, when the
    record's `toolUseResult` (`own_output`, flattened) echoes the output before them, so the output
    provably ends there, and none of them is itself part of that output. A result whose record
    does not echo its output (a web search's summary) holds no reminder of the harness's."""
    if not _ends_with_reminder(content):
        return []
    found: list[str] = []
    rest = content[-APPENDED_WINDOW:]
    while (m := _TRAILING_REMINDER_RE.search(rest)) is not None:
        found.append(m.group(1))
        rest = rest[: m.start()]
    if not found:
        return []  # decided on the window alone: the rest of a huge output is not copied
    rest = content[:-APPENDED_WINDOW] + rest
    output = _LINE_NUMBER_RE.sub("", rest).strip()
    if output and output not in own_output and rest.strip() not in own_output:
        return []  # where the tool's output ends is not known: all of it is the world's
    bodies = [b.strip() for b in reversed(found)]
    return [b for b in bodies if b and b not in own_output and not quotes_the_world(b)]


def _ends_with_reminder(content: str) -> bool:
    """Whether the window appended reminders are looked for in holds the tag that closes one (the
    pattern's literal): most results hold none, and are neither scanned nor their record flattened."""
    return content.find(_REMINDER_CLOSE, max(0, len(content) - APPENDED_WINDOW)) >= 0


# The harness's wrappers around what a program printed into a user turn: Claude Code's bash mode
# (`! grep ...`), a local command's output, a background task's notification. What they hold is the
# program's text (a search result, a log), so a reminder inside one is never the harness's.
QUOTED_OUTPUT_TAGS = ("bash-stdout", "bash-stderr", "local-command-stdout", "local-command-stderr",
                      "task-notification")
# One such wrapper with its content (an unclosed one runs to the end of the text: output cut short).
_QUOTED_OUTPUT_RE = re.compile(r"<(%s)>[\s\S]*?(?:</\1>|\Z)" % "|".join(QUOTED_OUTPUT_TAGS))


def without_quoted_output(text: str) -> str:
    """`text` without the program output the harness quotes in it (QUOTED_OUTPUT_TAGS)."""
    if "<" not in text or not any(f"<{tag}>" in text for tag in QUOTED_OUTPUT_TAGS):
        return text
    return _QUOTED_OUTPUT_RE.sub("", text)


def _text_blocks(message: Message) -> Iterator[str]:
    for b in message.blocks:
        if isinstance(b, Text):
            yield b.text


def _flatten(value: Any) -> str:
    """Every string inside a JSON-like value, joined (what a tool printed, in whatever shape)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(_flatten(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(_flatten(v) for v in value)
    return ""


def structured_tool_references(message: Message) -> list[str]:
    """Tool names the harness loaded by reference: `tool_reference` blocks as structure (an Opaque
    block, or an item of a tool_result's content list in the provider JSON the adapter kept), never
    JSON that merely appears inside a tool's printed text."""
    names: list[str] = []
    for b in message.blocks:
        if isinstance(b, Opaque):
            try:
                names += _references(json.loads(b.json_text))
            except ValueError:
                continue
    record = claude_record(message)
    if record is not None:
        names += _references(record["message"].get("content"))
    for key, value in message.meta.items():
        if key.endswith(RAW_SUFFIX) and isinstance(value, dict):
            for raws in value.values():
                names += _references(raws)
    return list(dict.fromkeys(names))


def _references(value: Any, depth: int = 0) -> list[str]:
    """tool_reference items in provider content structure (content lists nest at most a few deep)."""
    if depth > 4:
        return []
    if isinstance(value, list):
        return [n for v in value for n in _references(v, depth + 1)]
    if not isinstance(value, dict):
        return []
    if value.get("type") == "tool_reference" and isinstance(value.get("tool_name"), str):
        return [value["tool_name"]]
    content = value.get("content")
    return _references(content, depth + 1) if isinstance(content, list) else []


def converted_outputs(messages: Sequence[Message]) -> set[int]:
    """Indexes of user-role messages that carry a tool's output written as plain text by a format
    conversion (a format without tool calls writes the call as a `[tool call] name {...}` line of
    the assistant's text and the result as the next user message): the world's text, not the user's."""
    return set(_converted_outputs(messages))


@per_message_list  # the requests, constraints, announcements and plan mode of one window ask it
def _converted_outputs(messages: Sequence[Message]) -> list[int]:
    out: set[int] = set()
    for i, m in enumerate(messages):
        if m.role != "assistant" or m.origin is not Origin.CONVERSATION:
            continue
        text = m.text
        if CONVERTED_CALL not in text:
            continue  # no line can start with it
        calls = sum(1 for line in text.splitlines() if line.startswith(CONVERTED_CALL))
        j = i + 1
        while calls and j < len(messages) and messages[j].role in ("user", "tool"):
            if not messages[j].tool_results:
                out.add(j)
                calls -= 1
            j += 1
    return sorted(out)


def aider_command_output(messages: Sequence[Message], index: int) -> bool:
    """True when aider output message `index` is a program's printed output (it answers a `/run`,
    `/test`, `/lint`, `/git` or `!` command), so the notice-shaped lines in it are not aider's."""
    for j in range(index - 1, -1, -1):
        m = messages[j]
        if m.role == "assistant":
            # A tool call written into aider's format by a converter: what follows is its output.
            return any(line.startswith(CONVERTED_CALL) for line in m.text.splitlines())
        if m.meta.get("kind") == "command":
            return m.text.lstrip().startswith(AIDER_OUTPUT_COMMANDS)
        if m.meta.get("kind") != "tool_output":
            return False
    return False
