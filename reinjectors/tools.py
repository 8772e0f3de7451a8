"""Tools: tools, MCP servers and sub-agents announced mid-session, re-announced once as the new
baseline (the announcement itself sat in the part the summary replaced)."""

from __future__ import annotations

from typing import Sequence

from worksurface.config import ReinjectConfig
from worksurface.model import Message
from worksurface.reinject import escape_wrapped, facts_of, is_shown, reinjected, report, shown_text
from worksurface.state import Reinjection, StageContext
from worksurface.tokens import truncate_to_tokens

NAME = "tools"


def run(view: list[Message], config: ReinjectConfig, ctx: StageContext, budget: int) -> Reinjection:
    src = facts_of(ctx, view)
    before = ctx.counter.messages(view)
    shown = shown_text(view)
    lines: list[str] = []
    restored, skipped = [], []
    for a in src.announced_tools():
        names = [n for n in a.names if not is_shown(n, shown)]
        if not names:
            skipped.extend(a.names)
            continue
        lines.append(f"- {a.kind}: {', '.join(names)}")
        restored.extend(names)
    servers = [s for s in src.mcp_servers() if not is_shown(s, shown)]
    if servers:
        lines.append(f"- MCP servers in use: {', '.join(servers)}")
        restored.extend(servers)
    agents = {a.agent_type for a in src.agents_used()}
    agents = sorted(a for a in agents if a and not is_shown(a, shown))
    if agents:
        lines.append(f"- sub-agents used: {', '.join(agents)}")
        restored.extend(agents)
    if not lines:
        return Reinjection([], report(NAME, before, 0, [], skipped, [], "no tool announced mid-session"))
    text = "<tools-available>\nAnnounced earlier in this session and still available:\n" + escape_wrapped(
        "\n".join(lines), "tools-available")
    body = truncate_to_tokens(text, max(0, min(budget, config.tools_tokens) - 12), marker="\n[...]")
    if not body:
        return Reinjection([], report(NAME, before, 0, [], skipped, restored))
    msg = reinjected(NAME, "0", body + "\n</tools-available>")
    return Reinjection([msg], report(NAME, before, ctx.counter.message(msg), restored, skipped, []))
