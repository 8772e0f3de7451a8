"""The tools, skills and agents the session used, and tools or MCP servers announced mid-session.

After a compaction these are what the agent would otherwise not know it has (seed 004: tools delta,
agent listing, MCP instructions, invoked skills). Announcements come only from the harness's own
structure (provenance.py): `tool_reference` blocks, and reminders the harness wrote; a tool's printed
output that looks like either announces nothing.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..core.model import Message, Origin, Text
from ..core.toolkinds import tool_kind
from .calls import tool_calls
from .commands import command_bodies
from .files import file_activity
from .provenance import converted_outputs, reminders_by_message, structured_tool_references

# Claude Code puts an invoked skill's text in the next meta user message, which starts like this.
SKILL_BODY_PREFIX = "Base directory for this skill"
# How many messages after a Skill result its body may arrive in.
SKILL_BODY_WINDOW = 3
SKILL_FILE = "skill.md"
# Reminder text that announces tools, agents or MCP server instructions.
ANNOUNCE_MARKERS = {
    "mcp": ("mcp server instructions", "mcp server", "mcp__"),
    "tools": ("deferred tool", "tools are now available", "new tools", "available-deferred-tools"),
    "agents": ("available agent types", "agent types", "subagent_type"),
}
MAX_ANNOUNCEMENT_CHARS = 4000
# Claude Code attachment records (`{"type": "attachment", "attachment": {...}}`, kept by the adapter
# in Transcript.extras) that change what the model can call: the harness's own structure.
ATTACHMENT_KINDS = {"deferred_tools_delta": "tools", "mcp_instructions_delta": "mcp",
                    "agent_listing_delta": "agents"}
# Where a deferred tool's schema comes from: Claude Code sends only its name until ToolSearch loads it.
DEFERRED_SCHEMA = "deferred: load with ToolSearch"
# An older Claude Code lists deferred tools one per line inside this tag in a harness message.
DEFERRED_TAG_RE = re.compile(r"<available-deferred-tools>\s*([\s\S]*?)\s*</available-deferred-tools>")
# One announced item per line: `Name`, `- Name: purpose`, `Name - purpose`, `"Name": purpose`.
ENTRY_LINE_RE = re.compile(r"^\s*(?:[-*•]\s*)?[\"'`]?([A-Za-z][\w.:-]*?)[\"'`]?\s*(?:(?::|—|–|\s-)\s*(.*))?$")
# A one-line purpose is cut here: it says what the tool is for, the schema says the rest.
PURPOSE_CHARS = 160
# MCP server instructions kept per server (the model needs their gist, not a manual).
MCP_INSTRUCTION_CHARS = 1200
# One-line purposes of Claude Code's built-in tools that it defers (announced by name only).
KNOWN_PURPOSES = {
    "WebFetch": "fetch a URL and answer a prompt about its content",
    "WebSearch": "search the web",
    "NotebookEdit": "edit a cell of a Jupyter notebook",
    "NotebookRead": "read a Jupyter notebook",
    "TodoWrite": "write the session's todo list",
    "Task": "launch a sub-agent", "Agent": "launch a sub-agent",
    "BashOutput": "read the output of a background shell job",
    "KillShell": "stop a background shell job", "KillBash": "stop a background shell job",
    "TaskOutput": "read the output of a background task",
    "ExitPlanMode": "present the plan for approval and leave plan mode",
    "EnterPlanMode": "enter plan mode",
    "AskUserQuestion": "ask the user a multiple-choice question",
    "ListMcpResourcesTool": "list the resources of connected MCP servers",
    "ReadMcpResourceTool": "read a resource of an MCP server",
    "Skill": "invoke a skill", "SlashCommand": "run a slash command",
    "LSP": "query the language server (definitions, references, diagnostics)",
}


@dataclass(frozen=True)
class ToolEntry:
    """One announced tool, agent type or MCP server: what the model needs to use it after a
    compaction (its name, what it is for, and where its schema or instructions come from)."""

    name: str
    purpose: str = ""
    schema: str = ""


@dataclass(frozen=True)
class ToolUsage:
    name: str
    kind: str
    calls: int
    failures: int
    last_index: int


@dataclass(frozen=True)
class SkillUse:
    """A skill the agent invoked (Skill tool) or read (a SKILL.md file), with its text if seen."""

    name: str
    content: str | None
    message_id: str
    index: int
    source: str


@dataclass(frozen=True)
class AgentUse:
    agent_type: str
    description: str
    message_id: str
    index: int


@dataclass(frozen=True)
class Announcement:
    """Tools, agents or MCP instructions made known mid-session; `kind` is tools, agents or mcp."""

    kind: str
    names: tuple[str, ...]
    text: str
    message_id: str
    index: int
    entries: tuple[ToolEntry, ...] = ()   # the names with purpose and schema source, when known
    removed: tuple[str, ...] = ()         # names this announcement says are no longer available


def tool_usage(messages: Sequence[Message]) -> list[ToolUsage]:
    """Each tool by name: kind, calls, failures; most used first."""
    stats: dict[str, list[int]] = {}
    kinds: dict[str, str] = {}
    for rec in tool_calls(messages):
        s = stats.setdefault(rec.name, [0, 0, 0])
        s[0] += 1
        s[1] += int(rec.failed)
        s[2] = rec.index
        kinds[rec.name] = tool_kind(rec.call)
    out = [ToolUsage(n, kinds[n], s[0], s[1], s[2]) for n, s in stats.items()]
    out.sort(key=lambda u: (-u.calls, u.name))
    return out


def mcp_servers(messages: Sequence[Message]) -> list[str]:
    """MCP servers whose tools were called (`mcp__server__tool`), in order of first use."""
    out: list[str] = []
    for rec in tool_calls(messages):
        parts = rec.name.split("__")
        if len(parts) >= 3 and parts[0] == "mcp" and parts[1] not in out:
            out.append(parts[1])
    return out


def skills_invoked(messages: Sequence[Message]) -> list[SkillUse]:
    """Skills invoked or read, newest first, each once (its latest use)."""
    found: dict[str, SkillUse] = {}
    for rec in tool_calls(messages):
        if tool_kind(rec.call) != "skill" or rec.result is None or rec.rejected:
            continue
        name = str(rec.call.input.get("skill") or rec.call.input.get("name") or rec.target or rec.name)
        start = rec.result_index if rec.result_index is not None else rec.index
        body = _skill_body(messages, start)
        found[name] = SkillUse(name, body, rec.message_id, rec.index, "Skill tool")
    # A slash command the user ran expands into its prompt: the instructions bind like a skill's.
    for name, expansion, index in command_bodies(messages):
        found[name] = SkillUse(name, expansion.text.strip(), expansion.id, index, "slash command")
    for fact in file_activity(messages):
        if posixpath.basename(fact.path).lower() == SKILL_FILE and "read" in fact.actions:
            name = posixpath.basename(posixpath.dirname(fact.path)) or fact.path
            prior = found.get(name)
            if prior is None or prior.index < fact.last_index:
                found[name] = SkillUse(name, fact.content, fact.last_message_id, fact.last_index, fact.path)
    return sorted(found.values(), key=lambda s: (-s.index, s.name))


def _skill_body(messages: Sequence[Message], start: int) -> str | None:
    for m in messages[start + 1: start + 1 + SKILL_BODY_WINDOW]:
        if m.role == "user" and m.text.lstrip().startswith(SKILL_BODY_PREFIX):
            return m.text.strip()
    return None


def agents_used(messages: Sequence[Message]) -> list[AgentUse]:
    """Subagents launched (Task/Agent calls), oldest first."""
    out = []
    for rec in tool_calls(messages):
        if tool_kind(rec.call) == "agent":
            inp = rec.call.input
            kind = str(inp.get("subagent_type") or inp.get("agent_type") or "general")
            out.append(AgentUse(kind, str(inp.get("description") or ""), rec.message_id, rec.index))
    return out


def announced_tools(messages: Sequence[Message]) -> list[Announcement]:
    """Tools loaded by reference (tool search results), and reminders announcing tools, agents or MCP
    server instructions; oldest first."""
    out: list[Announcement] = []
    outputs = converted_outputs(messages)
    said_by_harness = reminders_by_message(messages)
    for i, m in enumerate(messages):
        if i in outputs:
            continue
        names = structured_tool_references(m)
        if names:
            unique = tuple(names)
            entries = tuple(_entry(n, "", "loaded by ToolSearch") for n in unique)
            out.append(Announcement("tools", unique, ", ".join(unique), m.id, i, entries))
        if m.role != "user":
            continue
        bodies = list(said_by_harness[i])  # extended below: the shared list stays as it is
        if not m.tool_results and not m.meta.get("kind") and m.origin is Origin.CONVERSATION:
            # A harness message listing deferred tools in its own tag (not inside a tool's output).
            bodies += [f"<available-deferred-tools>{t}</available-deferred-tools>"
                       for b in m.blocks if isinstance(b, Text) for t in DEFERRED_TAG_RE.findall(b.text)
                       if not any(t in r for r in bodies)]
        for body in bodies:
            low = body.lower()
            for kind, markers in ANNOUNCE_MARKERS.items():
                if any(marker in low for marker in markers):
                    entries = _reminder_entries(kind, body)
                    mentioned = tuple(dict.fromkeys([e.name for e in entries] +
                                                    re.findall(r"\bmcp__\w+", body)))
                    out.append(Announcement(kind, mentioned, body[:MAX_ANNOUNCEMENT_CHARS], m.id, i, entries))
                    break
    return out


def _entry(name: str, purpose: str, schema: str) -> ToolEntry:
    purpose = " ".join(purpose.split())[:PURPOSE_CHARS] or KNOWN_PURPOSES.get(name, "")
    if not schema and name.startswith("mcp__") and len(name.split("__")) >= 3:
        schema = f"MCP server {name.split('__')[1]}"
    return ToolEntry(name, purpose, schema)


def _reminder_entries(kind: str, body: str) -> tuple[ToolEntry, ...]:
    """The items a harness reminder lists, one per line (a deferred-tools tag, or a listing with
    purposes); prose lines are not items."""
    if kind == "mcp":
        # Claude Code's MCP instructions: `## server` headings, each followed by its instructions.
        sections = re.findall(r"^##\s+(\S+)\s*\n([\s\S]*?)(?=^##\s|\Z)", body, re.M)
        if sections:
            return tuple(ToolEntry(name, " ".join(text.split())[:MCP_INSTRUCTION_CHARS], f"MCP server {name}")
                         for name, text in sections)
    tagged = DEFERRED_TAG_RE.search(body)
    lines = tagged.group(1).splitlines() if tagged else body.splitlines()
    schema = DEFERRED_SCHEMA if kind == "tools" and ("deferred" in body.lower()) else ""
    if kind == "agents":
        schema = "launch with the Task or Agent tool as subagent_type"
    out: dict[str, ToolEntry] = {}
    for line in lines:
        m = ENTRY_LINE_RE.match(line)
        # Outside a deferred-tools tag only a bulleted line (or an MCP tool name) is an item: a prose
        # line such as "Usage: ..." is not a tool.
        if m is None or (not tagged and not line.strip().startswith(("-", "*", "•"))
                         and not m.group(1).startswith("mcp__")):
            continue
        if len(m.group(1)) < 2 or m.group(1).lower() in ("the", "note", "use", "available"):
            continue
        out.setdefault(m.group(1), _entry(m.group(1), m.group(2) or "", schema))
    return tuple(out.values())


def attachment_announcements(extras: Sequence[tuple[int, Any]]) -> list[Announcement]:
    """Claude Code's own attachment records that change what the model can call, as
    `(index of the message they follow, record)`: deferred tools added or removed, MCP server
    instructions, agent types listed. Harness structure, so they announce; oldest first."""
    out: list[Announcement] = []
    for index, record in extras:
        if not isinstance(record, dict) or record.get("type") != "attachment":
            continue
        att = record.get("attachment")
        if not isinstance(att, dict) or att.get("type") not in ATTACHMENT_KINDS:
            continue
        kind = ATTACHMENT_KINDS[att["type"]]
        ident = str(record.get("uuid") or f"attachment-{index}-{att['type']}")
        if kind == "tools":
            added, lines, removed = _strs(att.get("addedNames")), _strs(att.get("addedLines")), _strs(att.get("removedNames"))
            purposes = _purposes(added, lines)
            entries = tuple(_entry(n, purposes.get(n, ""), DEFERRED_SCHEMA) for n in added)
        elif kind == "mcp":
            added, removed = _strs(att.get("addedNames")), _strs(att.get("removedNames"))
            blocks = _strs(att.get("addedBlocks"))
            entries = tuple(ToolEntry(n, _block_for(n, blocks, i)[:MCP_INSTRUCTION_CHARS], f"MCP server {n}")
                            for i, n in enumerate(added))
        else:
            added, lines, removed = _strs(att.get("addedTypes")), _strs(att.get("addedLines")), _strs(att.get("removedTypes"))
            purposes = _purposes(added, lines)
            entries = tuple(_entry(n, purposes.get(n, ""), "launch with the Task or Agent tool as subagent_type")
                            for n in added)
        if not entries and not removed:
            continue
        text = "\n".join(f"{e.name}: {e.purpose}" if e.purpose else e.name for e in entries)
        out.append(Announcement(kind, tuple(e.name for e in entries), text[:MAX_ANNOUNCEMENT_CHARS], ident,
                                index, entries, tuple(removed)))
    return out


def _strs(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str) and v.strip()] if isinstance(value, list) else []


def _purposes(names: Sequence[str], lines: Sequence[str]) -> dict[str, str]:
    """Purpose per name from listing lines such as `- Explore: Fast agent for ...`."""
    out: dict[str, str] = {}
    for line in lines:
        m = ENTRY_LINE_RE.match(line)
        if m and m.group(1) in names and m.group(2):
            out.setdefault(m.group(1), m.group(2))
    return out


def _block_for(name: str, blocks: Sequence[str], position: int) -> str:
    """The instruction block of MCP server `name`: the one that names it, else the same position."""
    named = [b for b in blocks if name in b[:200]]
    if named:
        return " ".join(named[0].split())
    return " ".join(blocks[position].split()) if position < len(blocks) else ""
