"""Which agent a transcript belongs to, for the per-agent settings (config `agents`): the main agent,
or a sub-agent and, when its parent session shows the call that launched it, that call's sub-agent
type. Claude Code marks every record of a sub-agent's transcript `isSidechain` and keeps the file in
`<session-id>/subagents/` beside the parent session `<session-id>.jsonl`."""

from __future__ import annotations

from pathlib import Path

from ..core.config import MAIN_AGENT, SUBAGENT
from ..core.errors import WorksurfaceError
from ..core.tokens import TokenCounter
from ..facts.subagents import subagent_tasks
from ..formats import read_transcript
from ..formats.base import Transcript
from .sidechains import SUBAGENTS_DIR, link, read_sidechain

# The records read to decide whether a transcript is a sidechain (each of them is marked).
SIDECHAIN_PROBE = 8


def is_sidechain(transcript: Transcript) -> bool:
    """Whether the harness wrote this transcript as a sub-agent's (Claude Code's `isSidechain`)."""
    return any(m.meta.get("is_sidechain") for m in transcript.messages[:SIDECHAIN_PROBE])


def agent_of(transcript: Transcript, counter: TokenCounter | None = None) -> str:
    """MAIN_AGENT, or for a sub-agent's transcript its type as the parent's launching call names it
    (SUBAGENT when the parent session is not beside it, does not read, or shows no such call)."""
    if not is_sidechain(transcript):
        return MAIN_AGENT
    path = Path(transcript.path) if transcript.path else None
    if path is None or path.parent.name != SUBAGENTS_DIR:
        return SUBAGENT
    parent = path.parent.parent.with_suffix(".jsonl")
    try:
        session = read_transcript(parent, "claude-code") if parent.is_file() else None
    except (WorksurfaceError, OSError):
        session = None
    if session is None:
        return SUBAGENT
    own = read_sidechain(path, counter if counter is not None else TokenCounter())
    links, _ = link(subagent_tasks(session.messages, session.queued_inputs), [own])
    return next((x.task.agent_type for x in links if x.sidechain is not None and x.task.agent_type), SUBAGENT)


__all__ = ["agent_of", "is_sidechain"]
