"""How users give requests besides typing them: slash commands (Claude Code's `<command-name>` records
and the prompt the harness expands a command into), answers to the agent's questions, the words
typed when rejecting a tool call, and the harness notices that arrive where user input does.

Each reading looks at the structure the harness wrote (the command markup of a user record, the meta
record after it, a rejection record, the `toolUseResult` of a question), never at what a tool printed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..core.model import Message, Origin, ToolResult, is_user_turn
from .provenance import claude_record, is_harness_rejection
from .text import one_line, units

# Claude Code's markup of a slash command in a user record.
COMMAND_TAG_RE = re.compile(r"<command-(name|message|args)>(.*?)</command-\1>", re.S)
# What the harness writes after a command it ran itself (`/clear`, `/model`, `/mcp`): no request.
LOCAL_OUTPUT_PREFIXES = ("<local-command-stdout>", "<local-command-stderr>")
# The expanded prompt or the local output follows the command within this many records.
EXPANSION_WINDOW = 2
# How the harness introduces the user's words in a rejected call's result.
USER_SAID = "the user said:"
# The harness's own text when the user chose to clarify the agent's questions instead of answering
# them: its questions and the user's answers follow.
CLARIFY_PREFIX = "The user wants to clarify these questions."
QUESTIONS_ASKED = "Questions asked:"
# The request a command expanded into is named by its first sentence, cut to this many characters.
MAX_GIST_CHARS = 200
# The command that asks the harness to compact; what is typed after it shapes the summary (the
# compaction's instructions) and is never a request to the agent.
COMPACT_COMMAND = "/compact"
# XML-like tags a command's prompt is organised in (`<objective>`): structure, not words.
PROMPT_TAG_RE = re.compile(r"</?[a-z_][\w-]*>")


@dataclass(frozen=True)
class SlashCommand:
    """A slash command a user turn invoked: its name (`/security:review`) and what was typed after it."""

    name: str
    args: str


def slash_command(text: str) -> SlashCommand | None:
    """The command a user turn's text invokes, when the text is nothing but the harness's command
    markup (text beside the markup is the user's own words, read as typed)."""
    tags = {k: v.strip() for k, v in COMMAND_TAG_RE.findall(text)}
    if not tags.get("name") or COMMAND_TAG_RE.sub("", text).strip():
        return None
    name = tags["name"] if tags["name"].startswith("/") else "/" + tags["name"]
    return SlashCommand(name, tags.get("args", ""))


def command_expansion(messages: Sequence[Message], index: int) -> Message | None:
    """The prompt the harness expanded the command at `index` into (a meta user record right after
    it), or None: the command ran in the harness (local output follows) or expanded into nothing."""
    for m in messages[index + 1: index + 1 + EXPANSION_WINDOW]:
        if m.role != "user" or m.origin is not Origin.CONVERSATION or m.tool_results:
            return None
        text = m.text.strip()
        if text.startswith(LOCAL_OUTPUT_PREFIXES):
            return None
        if m.meta.get("is_meta") and text:
            return m
    return None


def ran_locally(messages: Sequence[Message], index: int) -> bool:
    """The harness ran the command at `index` itself and printed its output (no request to the agent)."""
    for m in messages[index + 1: index + 1 + EXPANSION_WINDOW]:
        if m.role == "user" and m.text.strip().startswith(LOCAL_OUTPUT_PREFIXES):
            return True
    return False


def command_request(messages: Sequence[Message], index: int) -> str | None:
    """What the user asked with the slash command at `index`, in plain words (`/name args`, and the
    first sentence of the prompt it expanded into), or None when it is not a request to the agent:
    a command the harness ran itself (`/clear`, `/model`), or one with neither arguments nor a prompt."""
    command = slash_command(messages[index].text)
    if command is None or command.name == COMPACT_COMMAND or ran_locally(messages, index):
        return None
    body = command_expansion(messages, index)
    said = f"{command.name} {command.args}".strip()
    if body is None:
        return said if command.args else None
    gist = prompt_gist(body.text)
    return f"{said}\n(the {command.name} command's prompt: {gist})" if gist else said


def compaction_request(messages: Sequence[Message], start: int = 0) -> tuple[int, str] | None:
    """The user's `/compact [instructions]` still waiting for its compaction: (its index, what was typed
    after it), when it is the newest user turn after `start` and no assistant turn follows it."""
    for i in range(len(messages) - 1, start - 1, -1):
        m = messages[i]
        if m.role == "assistant":
            return None
        if is_user_turn(m):
            command = slash_command(m.text)
            return (i, command.args) if command is not None and command.name == COMPACT_COMMAND else None
    return None


def prompt_gist(text: str) -> str:
    """The first sentence of a command's or skill's prompt, without its organising tags."""
    for unit in units(PROMPT_TAG_RE.sub("\n", text)):
        if len(unit.text) >= 20:
            return one_line(unit.text, MAX_GIST_CHARS)
    return ""


def command_bodies(messages: Sequence[Message]) -> list[tuple[str, Message, int]]:
    """(command name, the meta record it expanded into, its index) for every slash command that
    expanded into a prompt: the prompt's instructions bind the work like a skill's."""
    out = []
    for i, m in enumerate(messages):
        if m.role != "user" or m.tool_results or m.meta.get("is_meta"):
            continue
        command = slash_command(m.text)
        if command is None:
            continue
        body = command_expansion(messages, i)
        if body is not None:
            out.append((command.name, body, i + 1 + messages[i + 1:].index(body)))
    return out


def is_task_notification(text: str) -> bool:
    """A harness notice about a background task that arrived as queued input: Claude Code's
    `<task-notification>` block, or the JSON record it queues when a background task starts or ends
    (`{"task_id": .., "tool_use_id": .., "description": .., "task_type": ..}`). Never the user's words."""
    s = text.strip()
    if s.startswith("<task-notification>"):
        return True
    if not (s.startswith("{") and s.endswith("}")):
        return False
    try:
        value = json.loads(s)
    except ValueError:
        return False
    return isinstance(value, dict) and "task_id" in value and bool({"task_type", "tool_use_id"} & value.keys())


def rejection_words(result: ToolResult, message: Message) -> str | None:
    """What the user typed when rejecting a tool call (the harness's rejection record quotes it after
    "the user said:"), or None. When the user chose to clarify the agent's questions, the questions
    and the answers the user gave are what they said."""
    if not is_harness_rejection(result, message):
        return None
    text = result.content
    at = text.find(USER_SAID)
    if at < 0:
        return None
    words = text[at + len(USER_SAID):].strip()
    if words.startswith(CLARIFY_PREFIX):
        asked = words.find(QUESTIONS_ASKED)
        words = words[asked + len(QUESTIONS_ASKED):].strip() if asked >= 0 else ""
    return words or None


def question_answers(message: Message) -> list[str]:
    """The user's answers to the agent's questions, from the harness's own record of the question
    tool's result (`toolUseResult.answers`: question -> answer), as `"question" -> answer` lines."""
    record = claude_record(message)
    if record is None or not message.tool_results:
        return []
    result: Any = record.get("toolUseResult")
    if not isinstance(result, dict) or not isinstance(result.get("answers"), dict):
        return []
    return [f'"{one_line(str(q), 300)}" -> {one_line(str(a), 500)}' for q, a in result["answers"].items()
            if str(a).strip()]
