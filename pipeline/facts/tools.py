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
from typing import Sequence

from ..model import Message
from ..toolkinds import tool_kind
from .calls import tool_calls
from .files import file_activity
from .provenance import converted_outputs, harness_reminders, structured_tool_references

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
    for i, m in enumerate(messages):
        if i in outputs:
            continue
        names = structured_tool_references(m)
        if names:
            unique = tuple(names)
            out.append(Announcement("tools", unique, ", ".join(unique), m.id, i))
        if m.role != "user":
            continue
        for body in harness_reminders(m):
            low = body.lower()
            for kind, markers in ANNOUNCE_MARKERS.items():
                if any(marker in low for marker in markers):
                    mentioned = tuple(dict.fromkeys(re.findall(r"\bmcp__\w+", body)))
                    out.append(Announcement(kind, mentioned, body[:MAX_ANNOUNCEMENT_CHARS], m.id, i))
                    break
    return out
