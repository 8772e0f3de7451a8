"""Answering one hook call from Claude Code or Codex.

- SessionStart with source `compact` (right after the harness's own compaction): the working surface
  rebuilt from worksurface's ledger of the whole transcript (standing constraints, tried-and-excluded
  approaches, plan, files with their current contents from the hook's cwd, skills, tools announced
  mid-session, what else the summary had no room for, a status baseline), skipping what the harness's
  own summary and re-attached files show, as the reply's `additionalContext`.
- PreCompact: the ledger is brought up to date (so the SessionStart call that follows folds only
  what is new) and the boundaries the transcript holds are noted (so SessionStart knows the new one).
  Nothing is printed: Claude Code would take PreCompact's output as compaction instructions.
- Every other event: no reply.

Both clients cut a hook's `additionalContext` past 10,000 characters by default (Claude Code 2.1 then
shows a 2 KB preview and a file path). The surface is rendered within `max_chars` instead, its most
valuable parts first (the reinjectors' priority order); when the full surface (`hook.surface_tokens`)
is larger, it is kept as an artifact of the hook's session and the reply says how to fetch it.

One session directory per harness session keeps the ledger between calls (see `session.homes`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..core.artifacts import how_to_fetch
from ..core.config import Config
from ..core.model import Message
from ..core.errors import FormatError, HookError, SessionError
from ..formats import read_transcript
from ..formats.base import Transcript
from ..session import homes
from ..subagents.agents import agent_of
from .payload import PRE_COMPACT, HookInput, session_start_reply
from .shown import harness_boundaries, harness_view

if TYPE_CHECKING:
    from ..session.session import Session

log = logging.getLogger("worksurface.hooks")

# Session meta key: the harness boundaries the transcript held when PreCompact ran.
BOUNDARIES_KEY = "hook_boundaries_before_compaction"
# What both clients pass to the model whole by default (Claude Code 2.1's cap; Codex's default
# `additionalContextLimit`).
DEFAULT_MAX_CHARS = 10_000
# Tries at a smaller budget before the surface fits `max_chars` (each costs milliseconds: the ledger
# is already folded).
FIT_TRIES = 4
FIT_MARGIN = 0.95
HEADER = ("[worksurface] The working surface after this compaction, rebuilt from worksurface's ledger of the "
          "whole session: what the summary may have dropped, verbatim where quoted.")


@dataclass(frozen=True)
class Client:
    """A harness that runs worksurface as a command hook: its transcript format and where the
    session directory for one of its sessions lives."""

    name: str
    format: str
    session_dir: Callable[[HookInput], Path]


def _claude_code_dir(payload: HookInput) -> Path:
    if payload.transcript_path is None:
        raise HookError(f"{payload.event} hook input has no transcript_path")
    return homes.claude_session_folder(payload.transcript_path)


def _codex_dir(payload: HookInput) -> Path:
    try:
        return homes.codex_session_folder(payload.session_id)
    except ValueError as exc:
        raise HookError(str(exc)) from None


CLIENTS: dict[str, Client] = {
    "claude-code": Client("claude-code", "claude-code", _claude_code_dir),
    "codex": Client("codex", "codex", _codex_dir),
}


def answer(client: Client, payload: HookInput, *, sessions: Path | None = None, config: Config | None = None,
           max_chars: int = DEFAULT_MAX_CHARS) -> dict[str, Any] | None:
    """The reply to print for `payload` (None: print nothing). `sessions` puts the session
    directories under one folder instead of the client's own; `config` defaults to the
    configuration found from the hook's cwd, with the cwd as the workspace files are read from;
    `max_chars` is what the client passes to the model whole."""
    if not (payload.after_compaction or payload.event == PRE_COMPACT) or payload.transcript_path is None:
        return None
    transcript = _read(client, payload.transcript_path)
    directory = _session_dir(client, payload, sessions)
    cfg = config or Config.load(payload.cwd if payload.cwd and Path(payload.cwd).is_dir() else None)
    if payload.cwd and cfg.workspace_root is None:
        cfg = cfg.with_overrides(workspace_root=payload.cwd)
    from ..session.session import Session  # LangGraph is slow to import: only a call that needs it pays
    from ..session.surface import fold_ledger

    with Session.open(directory, config=cfg, agent=agent_of(transcript)) as session:
        if payload.event == PRE_COMPACT:
            fold_ledger(session, transcript)
            session.store.set_meta(BOUNDARIES_KEY, harness_boundaries(transcript.messages))
            return None
        known = session.store.get_meta(BOUNDARIES_KEY)
        shown = harness_view(transcript, None if known is None else set(known))
        text = fitted_surface(session, transcript, shown, cfg.hook.surface_tokens, max_chars)
        session.store.set_meta(BOUNDARIES_KEY, None)
    log.info("%s %s: a surface of %d characters after a view of %d messages", client.name, payload.event,
             len(text or ""), len(shown))
    return None if text is None else session_start_reply(text)


def fitted_surface(session: "Session", transcript: Transcript, shown: Sequence[Message], budget: int,
                   max_chars: int) -> str | None:
    """The surface text within `max_chars` (None: nothing to restore). When the full surface at
    `budget` is longer, a smaller budget is rendered, and the full one is kept as an artifact the
    text says how to fetch."""
    from ..session.surface import rebuild_surface

    full = rebuild_surface(session, transcript, shown, budget)
    if not full.messages:
        return None
    text = f"{HEADER}\n\n{full.text()}"
    if len(text) <= max_chars:
        return text
    kept = session.store.put_artifact(text, kind="surface", meta={"tokens": full.tokens})
    pointer = (f"\n\n[The whole working surface ({full.tokens} tokens: every file's content, every rule) is "
               f"artifact {kept.id}: {how_to_fetch(kept.id, kept.path)}.]")
    room = max_chars - len(pointer)
    for _ in range(FIT_TRIES):
        budget = max(1, int(budget * room / len(text) * FIT_MARGIN))
        surface = rebuild_surface(session, transcript, shown, budget)
        text = f"{HEADER}\n\n{surface.text()}" if surface.messages else HEADER
        if len(text) <= room:
            break
    if len(text) > room:  # still over after the tries: cut at the end of a line
        text = text[:room].rsplit("\n", 1)[0]
    return text + pointer


def _read(client: Client, path: Path) -> Transcript:
    try:
        return read_transcript(path, format=client.format)
    except FormatError as exc:
        raise HookError(f"cannot read the {client.name} transcript: {exc}") from None


def _session_dir(client: Client, payload: HookInput, sessions: Path | None) -> Path:
    try:
        directory = (client.session_dir(payload) if sessions is None
                     else sessions / client.name / homes.safe_id(payload.session_id))
        homes.check_home(directory)
    except (ValueError, SessionError) as exc:
        raise HookError(str(exc)) from None
    return directory
