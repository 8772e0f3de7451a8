"""Sidechains: the sub-agents' own transcripts, linked to the parent call that launched each one.

Claude Code writes a sub-agent's history as `<session-id>/subagents/agent-<agentId>.jsonl` beside the
session file (seed 003: a sub-agent's full history belongs in its own sidechain, not in the parent's
context). A file is linked to the parent's Task/Agent call by, in order of trust: the agent id in the
call's result record (`toolUseResult.agentId`), the prompt (the sidechain's first user message is
the call's prompt), and time (the sidechain starts just after the call). `agent-acompact-*` files are
Claude Code's own compaction calls: they have no parent call and are listed as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from rapidfuzz import fuzz

from ..core.errors import WorksurfaceError
from ..facts.subagents import AGENT, SubagentTask, subagent_tasks
from ..formats import read_transcript
from ..formats.base import Transcript
from ..core.model import Message
from ..core.tokens import TokenCounter

SUBAGENTS_DIR = "subagents"
SIDECHAIN_GLOB = "agent-*.jsonl"
COMPACTION_PREFIX = "agent-acompact-"
# A prompt match: the sidechain's first message and the call's prompt agree this closely (rapidfuzz
# ratio); Claude Code copies the prompt verbatim, so anything lower is another task.
PROMPT_MATCH = 90
# A time match: the sidechain's first record within this many seconds after the call (Claude Code
# starts the sub-agent at once; a minute allows for a slow hook).
TIME_WINDOW_SECONDS = 60.0
BY_AGENT_ID, BY_PROMPT, BY_TIME = "agent id", "prompt", "time"


@dataclass(frozen=True)
class Sidechain:
    """One sidechain file: who ran it, its goal (the first user message, in full), its size."""

    path: str
    agent_id: str
    goal: str
    messages: int
    tokens: int
    started: str | None
    ended: str | None
    model: str | None
    compaction: bool
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "agent_id": self.agent_id, "goal": self.goal, "messages": self.messages,
                "tokens": self.tokens, "started": self.started, "ended": self.ended, "model": self.model,
                "compaction": self.compaction, "error": self.error}


@dataclass(frozen=True)
class Link:
    """A parent task and the sidechain that ran it (None when no file matched)."""

    task: SubagentTask
    sidechain: Sidechain | None
    matched_by: str | None

    def to_json(self) -> dict[str, Any]:
        t = self.task
        return {"call_id": t.call_id, "message_id": t.message_id, "index": t.index, "agent_type": t.agent_type,
                "description": t.description, "goal": t.prompt, "state": t.state,
                "mode": "background" if t.background else "foreground", "task_id": t.task_id,
                "result": t.result, "reported_tokens": t.tokens, "tool_uses": t.tool_uses,
                "sidechain": self.sidechain.to_json() if self.sidechain else None, "matched_by": self.matched_by}


@dataclass(frozen=True)
class SidechainTree:
    """The parent's sub-agent calls with their sidechains, and the files no call launched."""

    folder: str | None
    links: tuple[Link, ...]
    unlinked: tuple[Sidechain, ...]

    def to_json(self) -> dict[str, Any]:
        return {"folder": self.folder, "agents": [link.to_json() for link in self.links],
                "unlinked": [s.to_json() for s in self.unlinked]}


def sidechain_folder(session_path: str | Path) -> Path:
    """`<dir>/<session-id>/subagents` for a Claude Code session file `<dir>/<session-id>.jsonl`."""
    p = Path(session_path)
    return p.parent / p.stem / SUBAGENTS_DIR


def _agent_id(path: Path) -> str:
    return path.stem.removeprefix("agent-")


def _first_text(messages: Sequence[Message]) -> str:
    for m in messages:
        if m.role == "user" and m.text.strip():
            return m.text.strip()
    return ""


def read_sidechain(path: Path, counter: TokenCounter) -> Sidechain:
    """A sidechain file's goal and size; a file that does not read is kept with its error."""
    compaction = path.name.startswith(COMPACTION_PREFIX)
    try:
        t = read_transcript(path, "claude-code")
    except (WorksurfaceError, OSError) as exc:
        return Sidechain(str(path), _agent_id(path), "", 0, 0, None, None, None, compaction, str(exc))
    messages = t.messages
    stamps = [s for s in (m.meta.get("timestamp") for m in messages) if isinstance(s, str)]
    model = next((raw["message"].get("model") for m in messages if m.role == "assistant"
                  for raw in [m.meta.get("raw")] if isinstance(raw, dict) and isinstance(raw.get("message"), dict)),
                 None)
    agent_id = next((raw.get("agentId") for m in messages for raw in [m.meta.get("raw")]
                     if isinstance(raw, dict) and raw.get("agentId")), None) or _agent_id(path)
    return Sidechain(str(path), str(agent_id), _first_text(messages), len(messages), counter.messages(messages),
                     min(stamps) if stamps else None, max(stamps) if stamps else None,
                     model if isinstance(model, str) else None, compaction)


def _seconds(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def link(tasks: Sequence[SubagentTask], sidechains: Sequence[Sidechain]) -> tuple[list[Link], list[Sidechain]]:
    """Each agent task with its sidechain (agent id first, then prompt, then time), and the files left."""
    free = [s for s in sidechains if not s.compaction]
    chosen: dict[str, tuple[Sidechain, str]] = {}
    agents = [t for t in tasks if t.kind == AGENT]
    for rule in (BY_AGENT_ID, BY_PROMPT, BY_TIME):
        for t in agents:
            if t.call_id in chosen:
                continue
            match = _match(t, free, rule)
            if match is not None:
                chosen[t.call_id] = (match, rule)
                free.remove(match)
    links = [Link(t, *chosen[t.call_id]) if t.call_id in chosen else Link(t, None, None) for t in agents]
    unlinked = free + [s for s in sidechains if s.compaction]
    return links, unlinked


def _match(task: SubagentTask, free: Sequence[Sidechain], rule: str) -> Sidechain | None:
    if rule == BY_AGENT_ID:
        return next((s for s in free if task.task_id and s.agent_id == task.task_id), None)
    if rule == BY_PROMPT:
        if not task.prompt.strip():
            return None
        scored = [(fuzz.ratio(task.prompt.strip(), s.goal), s) for s in free if s.goal]
        best = max(scored, key=lambda x: x[0], default=None)
        return best[1] if best is not None and best[0] >= PROMPT_MATCH else None
    called = _seconds(task.timestamp)
    if called is None:
        return None
    timed = [(start - called, s) for s in free for start in [_seconds(s.started)]
             if start is not None and 0 <= start - called <= TIME_WINDOW_SECONDS]
    return min(timed, key=lambda x: x[0])[1] if timed else None


def sidechain_tree(transcript: Transcript, counter: TokenCounter | None = None) -> SidechainTree:
    """The tree for a Claude Code session read from a file: its Task/Agent calls (from the ledger's
    extractor) linked to the files in `<session-id>/subagents/`. Other formats, and files without
    such a folder, give the calls alone."""
    counter = counter if counter is not None else TokenCounter()
    tasks = subagent_tasks(transcript.messages, transcript.queued_inputs)
    folder = sidechain_folder(transcript.path) if transcript.path and transcript.format == "claude-code" else None
    files = sorted(folder.glob(SIDECHAIN_GLOB)) if folder is not None and folder.is_dir() else []
    sidechains = [read_sidechain(f, counter) for f in files]
    links, unlinked = link(tasks, sidechains)
    return SidechainTree(str(folder) if files else None, tuple(links), tuple(unlinked))


__all__ = ["BY_AGENT_ID", "BY_PROMPT", "BY_TIME", "Link", "Sidechain", "SidechainTree", "link", "read_sidechain",
           "sidechain_folder", "sidechain_tree"]
