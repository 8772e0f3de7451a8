"""Replaying a transcript as a harness would: one model call after each user turn or tool result that
an assistant message answers, so call k sends the prefix that ends right before that assistant message.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from worksurface.formats import Transcript, read_transcript
from worksurface.core.model import Message
from worksurface.offline.replay import call_points, replay_clock

REPO = Path(__file__).resolve().parents[1]
# Real transcripts are read in place from the shared folder beside the repository, never copied;
# WORKSURFACE_SHARED names another folder.
SHARED = Path(os.environ.get("WORKSURFACE_SHARED", REPO.parent / "shared")).resolve()
CLAUDE_CODE_DIR = SHARED / "transcripts" / "claude-code"
# Other users' long sessions (Claude Code and Codex), which nothing was tuned on: per-call work is
# judged on them too. A sub-agent's file (under `subagents/`) is replayed through its parent's.
FIELD_DIR = SHARED / "transcripts" / "field"
HAND_PROBES_DIR = SHARED / "probes"
# Probes this project labeled itself, blind, on field sessions the shared folder has no probes for (each
# file names its transcript under the shared folder; `<stem>.first-score.json` beside it is the first,
# untuned score, taken right after labeling).
OWN_PROBES_DIR = REPO / "benchmarks" / "probes"
# The two long Claude Code sessions (each has a real compact boundary) and the long generated fixture.
LONG_SESSIONS = ("258c7280", "8463c716")
LONG_FIXTURE = REPO / "fixtures" / "long.jsonl"


@dataclass(frozen=True)
class Source:
    """A transcript to replay: a short name for tables and its file."""

    name: str
    path: Path


@dataclass(frozen=True)
class Call:
    """One replayed model call: its index in the replay, how many messages it sends, its clock."""

    index: int
    size: int
    now: float


def default_sources() -> tuple[list[Source], list[str]]:
    """The long Claude Code sessions (when the shared folder is there) and the long fixture, with a
    note for each one missing."""
    sources, notes = [], []
    for prefix in LONG_SESSIONS:
        found = sorted(CLAUDE_CODE_DIR.glob(f"{prefix}-*.jsonl")) if CLAUDE_CODE_DIR.is_dir() else []
        if found:
            sources.append(Source(f"claude-code {prefix}", found[0]))
        else:
            notes.append(f"claude-code {prefix}: skipped, no {CLAUDE_CODE_DIR}/{prefix}-*.jsonl")
    if LONG_FIXTURE.is_file():
        sources.append(Source("fixture long", LONG_FIXTURE))
    else:
        notes.append(f"fixture long: skipped, {LONG_FIXTURE} is missing")
    return sources, notes


def hand_probe_files() -> list[Path]:
    """Every hand-labeled probe file: the shared folder's (the long sessions' and the field ones), then
    the project's own (benchmarks/probes), first scores aside."""
    found: list[Path] = []
    for folder in (HAND_PROBES_DIR, OWN_PROBES_DIR):
        if folder.is_dir():
            found += sorted(p for p in folder.rglob("*.json") if not p.name.endswith(".first-score.json"))
    return found


def labeled_sources() -> tuple[dict[Path, Path], list[str]]:
    """Transcript path -> its hand probe file, for every probe file whose transcript is in the shared
    folder (a note for each one that is not)."""
    found, notes = {}, []
    for probes in hand_probe_files():
        try:
            name = json.loads(probes.read_text(encoding="utf-8")).get("transcript")
        except (OSError, ValueError, AttributeError):
            notes.append(f"{probes.name}: skipped, not a probe file")
            continue
        target = SHARED / "transcripts" / str(name or "")
        if name and target.is_file():
            found[target.resolve()] = probes
        else:
            notes.append(f"{probes.name}: skipped, its transcript {name!r} is not in {SHARED}")
    return found, notes


def field_sources() -> tuple[list[Source], list[str]]:
    """Every session file under the field folder (sub-agent files aside), named `field <user>/<id>`."""
    if not FIELD_DIR.is_dir():
        return [], [f"field sessions: skipped, no {FIELD_DIR}"]
    paths = sorted(p for p in FIELD_DIR.rglob("*.jsonl") if "subagents" not in p.relative_to(FIELD_DIR).parts)
    return [Source(f"field {_field_name(p)}", p) for p in paths], []


def _field_name(path: Path) -> str:
    """`user/ab12cd34`: the user's folder and the session id's first 8 characters; Entire's checkpoints
    (`<id[:2]>/<id[2:]>/<n>/full.jsonl`) add the checkpoint number, `user/ab12cd34:n`."""
    parts = path.relative_to(FIELD_DIR).parts
    if path.stem == "full" and len(parts) >= 5:
        return f"{parts[0]}/{(parts[1] + parts[2])[:8]}:{parts[3]}"
    return f"{parts[0]}/{path.stem[:8]}"


def load(source: Source) -> Transcript:
    return read_transcript(source.path)


def calls(messages: Sequence[Message]) -> Iterator[Call]:
    now = 0.0
    for k, n in enumerate(call_points(messages)):
        now = replay_clock(messages[n - 1], now)
        yield Call(k, n, now)
