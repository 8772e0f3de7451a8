"""The tools, skills and agents the session used, and tools or MCP servers announced mid-session.

After a compaction these are what the agent would otherwise not know it has (seed 004: tools delta,
agent listing, MCP instructions, invoked skills).
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from typing import Sequence

from ..model import Message, Opaque
from ..toolkinds import tool_kind
from .calls import tool_calls
from .files import file_activity
from .text import reminders

# Claude Code puts an invoked skill's text in the next meta user message, which starts like this.
SKILL_BODY_PREFIX = "Base directory for this skill"
# How many messages after a Skill result its body may arrive in.
SKILL_BODY_WINDOW = 3
SKILL_FILE = "skill.md"
TOOL_REFERENCE_RE = re.compile(r'"type"\s*:\s*"tool_reference"[^}]*?"tool_name"\s*:\s*"([^"]+)"'
                               r'|"tool_name"\s*:\s*"([^"]+)"[^}]*?"type"\s*:\s*"tool_reference"')
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
    for i, m in enumerate(messages):
        names: list[str] = []
        for r in m.tool_results:
            names += [a or b for a, b in TOOL_REFERENCE_RE.findall(r.content)]
        for b in m.blocks:
            if isinstance(b, Opaque):
                names += _opaque_tool_names(b)
        if names:
            unique = tuple(dict.fromkeys(names))
            out.append(Announcement("tools", unique, ", ".join(unique), m.id, i))
        if m.role != "user":
            continue
        for body in reminders(m.text) + [r for res in m.tool_results for r in reminders(res.content)]:
            low = body.lower()
            for kind, markers in ANNOUNCE_MARKERS.items():
                if any(marker in low for marker in markers):
                    mentioned = tuple(dict.fromkeys(re.findall(r"\bmcp__\w+", body)))
                    out.append(Announcement(kind, mentioned, body[:MAX_ANNOUNCEMENT_CHARS], m.id, i))
                    break
    return out


def _opaque_tool_names(block: Opaque) -> list[str]:
    try:
        value = json.loads(block.json_text)
    except ValueError:
        return []
    items = value if isinstance(value, list) else [value]
    names = []
    for item in items:
        if isinstance(item, dict):
            if item.get("type") == "tool_reference" and isinstance(item.get("tool_name"), str):
                names.append(item["tool_name"])
            content = item.get("content")
            if isinstance(content, list):
                names += [c["tool_name"] for c in content if isinstance(c, dict)
                          and c.get("type") == "tool_reference" and isinstance(c.get("tool_name"), str)]
    return names

