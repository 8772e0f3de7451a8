"""Tools: tools, MCP servers and sub-agent types announced mid-session, re-announced once as the new
baseline (the announcement itself sat in the part the summary replaced).

Each item carries what the model needs to use it again: its name, a one-line purpose, and where its
schema comes from (a deferred tool is loaded with ToolSearch; an MCP tool comes from its server,
whose instructions are restored with it). Items the kept tail already shows, and items a later
announcement removed, are skipped.
"""

from __future__ import annotations

from worksurface.core.config import ReinjectConfig
from worksurface.facts.tools import ToolEntry
from worksurface.core.model import Message
from worksurface.core.escape import escape_tags
from worksurface.engine.reinject import FACTS_READS, MESSAGE_READS, facts_of, is_shown, reinjected, report, shown_text
from worksurface.engine.state import Reinjection, Reinjector, StageContext
from worksurface.core.tokens import truncate_to_tokens

NAME = "tools"
# Headings per announcement kind, in the order they are rendered.
SECTIONS = (("tools", "Tools"), ("mcp", "MCP servers (instructions)"), ("agents", "Sub-agent types"))
# Tokens kept for the wrapper's closing tag and the truncation marker.
WRAPPER_TOKENS = 12


def _line(entry: ToolEntry) -> str:
    line = f"- {entry.name}"
    if entry.purpose:
        line += f": {entry.purpose}"
    if entry.schema:
        line += f" ({entry.schema})"
    return line


def run(view: list[Message], config: ReinjectConfig, ctx: StageContext, budget: int) -> Reinjection:
    src = facts_of(ctx, view)
    before = ctx.counter.messages(view)
    shown = shown_text(view)
    entries: dict[str, dict[str, ToolEntry]] = {kind: {} for kind, _ in SECTIONS}
    for a in src.announced_tools():
        bucket = entries.setdefault(a.kind, {})
        for name in a.removed:
            bucket.pop(name, None)  # no longer available: never re-announce it
        known = {e.name: e for e in a.entries}
        for name in a.names:
            old = bucket.get(name)
            new = known.get(name) or ToolEntry(name)
            # A later bare mention keeps the purpose an earlier listing gave.
            bucket[name] = new if (new.purpose or old is None) else old
    for server in src.mcp_servers():
        entries["mcp"].setdefault(server, ToolEntry(server, "", f"tools named mcp__{server}__*"))
    for use in src.agents_used():
        if use.agent_type:
            entries["agents"].setdefault(use.agent_type, ToolEntry(
                use.agent_type, use.description, "launch with the Task or Agent tool as subagent_type"))
    lines: list[str] = []
    restored, skipped = [], []
    for kind, heading in SECTIONS:
        items = []
        for name, entry in entries.get(kind, {}).items():
            if is_shown(name, shown):
                skipped.append(name)
                continue
            items.append(_line(entry))
            restored.append(name)
        if items:
            lines.append(f"{heading}:")
            lines.extend(items)
    if not lines:
        return Reinjection([], report(NAME, before, 0, [], skipped, [], "no tool announced mid-session"))
    text = "<tools-available>\nAnnounced earlier in this session and still available:\n" + escape_tags(
        "\n".join(lines), "tools-available")
    body = truncate_to_tokens(text, max(0, min(budget, config.tools_tokens) - WRAPPER_TOKENS), marker="\n[...]")
    if not body:
        return Reinjection([], report(NAME, before, 0, [], skipped, restored))
    msg = reinjected(ctx, NAME, "0", body + "\n</tools-available>")
    return Reinjection([msg], report(NAME, before, ctx.counter.message(msg), restored, skipped, []))


REINJECTOR = Reinjector(NAME, run, reads=frozenset({"counter"}) | FACTS_READS | MESSAGE_READS)
