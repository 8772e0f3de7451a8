"""The sub-agent tree, drawn: the session at the root, one branch per sub-agent call it made (Claude
Code's Task/Agent calls: type, what for, state, how big its sidechain grew), and the sidechain files no
call launched (Claude Code's own compaction calls). Inline SVG, as the charts: nothing fetched."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any, Sequence

from .svg import FONT, compact_number

ROW, TOP, TRUNK_X, NODE_X, NODE_W, BAR_X, BAR_W, WIDTH = 30, 34, 18, 40, 440, 500, 200, 720
# Goals and descriptions are cut to this many characters on the page (the JSON keeps what inspect keeps).
GOAL_CHARS = 300
STATE_COLOURS = {"completed": "#009e73", "failed": "#d55e00", "error": "#d55e00", "running": "#e69f00",
                 "async_launched": "#e69f00"}
UNLINKED_COLOUR, UNKNOWN_COLOUR = "#999999", "#0072b2"


def tree_data(tree: dict[str, Any]) -> dict[str, Any]:
    """What the page shows of `SidechainTree.to_json()`: per call its type, description, state, mode, how
    it was matched and its sidechain's size; per file no call launched its size (goals cut short)."""
    def side(s: dict[str, Any] | None) -> dict[str, Any] | None:
        if s is None:
            return None
        return {"file": Path(s["path"]).name, "agent_id": s["agent_id"], "messages": s["messages"],
                "tokens": s["tokens"], "compaction": s["compaction"], "error": s.get("error")}

    agents = [{"call_id": a["call_id"], "index": a["index"], "agent_type": a["agent_type"],
               "description": a.get("description") or "", "goal": (a.get("goal") or "")[:GOAL_CHARS],
               "state": a.get("state") or "", "mode": a.get("mode") or "", "matched_by": a.get("matched_by"),
               "reported_tokens": a.get("reported_tokens"), "sidechain": side(a.get("sidechain"))}
              for a in tree.get("agents", [])]
    return {"folder": tree.get("folder"), "agents": agents,
            "unlinked": [side(s) for s in tree.get("unlinked", [])]}


def _size(agent: dict[str, Any]) -> int:
    side = agent.get("sidechain")
    return int(side["tokens"]) if side else int(agent.get("reported_tokens") or 0)


def tree_svg(data: dict[str, Any]) -> str:
    """The tree as one SVG: a trunk from the session, a node per call (coloured by state, its title the
    goal) with a bar for its sidechain's tokens, and the unlinked files in grey."""
    agents: Sequence[dict[str, Any]] = data["agents"]
    unlinked: Sequence[dict[str, Any]] = data["unlinked"]
    rows = len(agents) + len(unlinked)
    biggest = max([_size(a) for a in agents] + [int(s["tokens"]) for s in unlinked] + [1])
    height = TOP + rows * ROW + 8
    out = [f'<svg class="tree" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="sub-agent tree" style="{FONT}">',
           f'<circle cx="{TRUNK_X}" cy="14" r="6" fill="#000"/>'
           f'<text x="{TRUNK_X + 12}" y="18" font-weight="bold">this session: {len(agents)} sub-agent calls'
           f'{f", {len(unlinked)} files no call launched" if unlinked else ""}</text>']
    if rows:
        out.append(f'<line x1="{TRUNK_X}" y1="20" x2="{TRUNK_X}" y2="{TOP + (rows - 1) * ROW + ROW // 2}" '
                   'stroke="#666" stroke-width="1.5"/>')
    for row, agent in enumerate(agents):
        side = agent["sidechain"]
        label = f"{agent['agent_type']}: {agent['description'] or agent['goal'][:60]}"
        facts = [agent["state"] or "state unknown", agent["mode"]]
        facts.append(f"{side['file']}, {side['messages']} messages" if side else "no sidechain file")
        colour = STATE_COLOURS.get(agent["state"], UNKNOWN_COLOUR)
        out.append(_node(row, "agent", label, " · ".join(f for f in facts if f), colour, _size(agent), biggest,
                         agent["goal"], {"call": agent["call_id"], "state": agent["state"],
                                         "type": agent["agent_type"]}))
    for k, side in enumerate(unlinked):
        why = "Claude Code's compaction call" if side["compaction"] else "no call launched it"
        out.append(_node(len(agents) + k, "unlinked", side["file"], f"{why}, {side['messages']} messages",
                         UNLINKED_COLOUR, int(side["tokens"]), biggest, "", {"file": side["file"]}))
    out.append("</svg>")
    return "".join(out)


def _node(row: int, kind: str, label: str, facts: str, colour: str, tokens: int, biggest: int, title: str,
          attrs: dict[str, str]) -> str:
    y = TOP + row * ROW
    mid = y + ROW // 2
    data = "".join(f' data-{k}="{escape(str(v))}"' for k, v in attrs.items())
    bar = max(1.0, BAR_W * tokens / biggest) if tokens else 0.0
    return (f'<g class="{kind}"{data}><title>{escape(title or label)}</title>'
            f'<line x1="{TRUNK_X}" y1="{mid}" x2="{NODE_X}" y2="{mid}" stroke="#666" stroke-width="1.5"/>'
            f'<rect x="{NODE_X}" y="{y + 3}" width="{NODE_W}" height="{ROW - 6}" rx="4" fill="#fff" '
            f'stroke="{colour}" stroke-width="2"/>'
            f'<text x="{NODE_X + 8}" y="{y + 14}">{escape(_cut(label, 70))}</text>'
            f'<text x="{NODE_X + 8}" y="{y + 25}" fill="#555">{escape(_cut(facts, 80))}</text>'
            f'<rect x="{BAR_X}" y="{y + 9}" width="{bar:.1f}" height="{ROW - 18}" fill="{colour}"/>'
            f'<text x="{BAR_X + bar + 4:.1f}" y="{mid + 4}">{compact_number(tokens)} tokens</text></g>')


def _cut(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def subagents_section(data: dict[str, Any] | None) -> str:
    """The page's Sub-agents section (nothing when the session launched none and no file is beside it)."""
    if not data or not (data["agents"] or data["unlinked"]):
        return ""
    where = (f" Sidechain files in <code>{escape(data['folder'])}</code>." if data.get("folder")
             else " No sidechain files beside the session (the calls alone).")
    return ('<h2>Sub-agents</h2><p>Each call that launched a sub-agent, with the sidechain that ran it '
            f"(the bar: its tokens).{where}</p>" + tree_svg(data))
