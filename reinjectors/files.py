"""Files: the files the agent was working on, newest first, so it does not re-read them blind.

Content comes from the workspace when `workspace_root` is set (only paths that resolve inside it,
symlinks included), otherwise from the last content the transcript showed (marked possibly stale).
A file whose read result the kept tail still shows is skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from rapidfuzz import fuzz

from worksurface.config import ReinjectConfig
from worksurface.facts.files import FileFact, file_activity, numbered_lines
from worksurface.model import Message
from worksurface.reinject import report, reinjected, tail_of, uncleared_results
from worksurface.state import StageContext, StageReport
from worksurface.tokens import truncate_to_tokens
from worksurface.toolkinds import call_path
from worksurface.view import calls_by_id

NAME = "files"
# Files larger than this are not read from disk at all: a reinjection is capped at a few thousand
# tokens, and reading megabytes to show 16 KB of them is wasted work.
MAX_FILE_BYTES = 1_000_000
# Bytes sniffed for a NUL to call a file binary (what git and grep do).
BINARY_SNIFF_BYTES = 8_192
TRUNCATION_MARKER = "\n[... truncated to fit the reinjection budget; read the file for the rest]"


def run(view: list[Message], config: ReinjectConfig, ctx: StageContext, budget: int) -> tuple[list[Message], StageReport]:
    transcript: Sequence[Message] = ctx.extras.get("transcript", view)
    before = ctx.counter.messages(view)
    facts = sorted((f for f in file_activity(transcript) if f.actions & {"read", "edited", "created"}),
                   key=lambda f: f.last_index, reverse=True)
    tail = tail_of(view)
    left = min(budget, config.files_tokens)
    out: list[Message] = []
    restored, skipped, dropped = [], [], []
    for fact in facts:
        if len(restored) >= config.files_max:
            break
        content, source, note = _content(fact, ctx.config.workspace_root)
        if content is None:
            skipped.append({"path": fact.path, "why": note})
            continue
        if _visible_in_tail(fact.path, content, tail, config.visible_similarity):
            skipped.append({"path": fact.path, "why": "kept tail shows it"})
            continue
        header = f'<file path="{fact.path}" source="{source}"{" note=" + repr(note) if note else ""}>\n'
        room = min(config.file_tokens, left) - ctx.counter.text(header + "\n</file>") - 8
        if room < 50:
            dropped.append(fact.path)
            continue
        body = truncate_to_tokens(content, room, marker=TRUNCATION_MARKER)
        msg = reinjected(NAME, str(len(out)), header + body + "\n</file>", path=fact.path, source=source)
        cost = ctx.counter.message(msg)
        left -= cost
        out.append(msg)
        restored.append({"path": fact.path, "source": source, "tokens": cost})
    return out, report(NAME, before, ctx.counter.messages(out), restored, skipped, dropped)


def _content(fact: FileFact, workspace_root: str | None) -> tuple[str | None, str, str]:
    """(content, source, note). Workspace first when configured; the transcript's copy otherwise."""
    if workspace_root:
        text, note = read_inside(workspace_root, fact.path)
        if text is not None:
            return text, "workspace", ""
        if fact.content is None:
            return None, "", note
        return fact.content, "transcript", f"{note}; last content seen in the transcript, possibly stale"
    if fact.content is None:
        return None, "", "no content seen in the transcript"
    stale = "possibly stale" + (", partial" if fact.partial else "")
    return fact.content, "transcript", stale


def read_inside(root: str, path: str) -> tuple[str | None, str]:
    """Read `path` only if it resolves inside `root` (after following symlinks); (None, why) if not."""
    base = Path(root).resolve()
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = base / candidate
    try:
        resolved = candidate.resolve(strict=True)
    except (OSError, RuntimeError):
        return None, "not found in the workspace"
    if not resolved.is_relative_to(base):
        return None, "outside workspace_root: not read"
    if not resolved.is_file():
        return None, "not a regular file"
    size = resolved.stat().st_size
    if size > MAX_FILE_BYTES:
        return None, f"too large to reinject ({size} bytes)"
    with resolved.open("rb") as fh:
        data = fh.read()
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        return None, "binary file"
    return data.decode("utf-8", errors="replace"), ""


def _visible_in_tail(path: str, content: str, tail: list[Message], similarity: float) -> bool:
    calls = calls_by_id(tail)
    for _, result in uncleared_results(tail):
        call = calls.get(result.call_id)
        if call is None or call_path(call) is None:
            continue
        if not (call_path(call) == path or path.endswith("/" + call_path(call).lstrip("./"))):
            continue
        lines = numbered_lines(result.content)  # Claude Code's Read prefixes line numbers
        shown = "\n".join(lines[k] for k in sorted(lines)) if lines else result.content
        # Whole-text ratio (bit-parallel, fast); a partial read is too different and gets reinjected.
        if fuzz.ratio(content, shown, score_cutoff=similarity):
            return True
    return False
