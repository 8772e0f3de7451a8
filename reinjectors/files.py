"""Files: the files the agent was working on, newest first (plan documents before them), so it does
not re-read them blind.

Content comes from the workspace when `workspace_root` is set (only paths that resolve inside it,
symlinks included), otherwise from the last content the transcript showed (marked possibly stale).
A file whose read result the kept tail still shows is skipped.
"""

from __future__ import annotations

from rapidfuzz import fuzz

from worksurface.core.config import ReinjectConfig
from worksurface.core.errors import WorkspaceReadError
from worksurface.facts.files import FileFact
from worksurface.facts.fileviews import numbered_lines
from worksurface.facts.plans import is_plan_document
from worksurface.core.fileio import read_confined
from worksurface.core.model import Message, Origin
from worksurface.core.escape import escape_attr, escape_tags
from worksurface.engine.reinject import FACTS_READS, MESSAGE_READS, facts_of, reinjected, report, tail_of, uncleared_results
from worksurface.engine.state import Reinjection, Reinjector, StageContext
from worksurface.core.tokens import truncate_to_tokens
from worksurface.core.toolkinds import call_path
from worksurface.core.view import calls_by_id

NAME = "files"
# Files larger than this are not read from disk at all: a reinjection is capped at a few thousand
# tokens, and reading megabytes to show 16 KB of them is wasted work.
MAX_FILE_BYTES = 1_000_000
# Bytes sniffed for a NUL to call a file binary (what git and grep do).
BINARY_SNIFF_BYTES = 8_192
# Of the post-compact room still free when files run, the share they may take (skills and tools,
# which run after them, keep the rest).
SHARE_OF_ROOM_LEFT = 0.75
TRUNCATION_MARKER = "\n[... truncated to fit the reinjection budget; read the file for the rest]"


def run(view: list[Message], config: ReinjectConfig, ctx: StageContext, budget: int) -> Reinjection:
    src = facts_of(ctx, view)
    before = ctx.counter.messages(view)
    # Plan documents (facts/plans.py) first, however long ago they were read: the plan the work goes
    # through, quoted as the file it is (the plan reinjector takes plans only from the plan tools).
    facts = sorted((f for f in src.file_activity() if f.actions & {"read", "edited", "created"}),
                   key=lambda f: (not is_plan_document(f.path), -f.last_index))
    tail = tail_of(view)
    # Configured caps are for a crowded view; when the summary and tail leave more of the target
    # unused, files grow into it (most facts a probe asks about live in file contents).
    left = max(min(budget, config.files_tokens), int(budget * SHARE_OF_ROOM_LEFT))
    max_files = max(config.files_max, left // max(1, config.file_tokens))
    out: list[Message] = []
    restored: list[dict[str, object]] = []
    skipped: list[dict[str, str]] = []
    dropped: list[str] = []
    # Files another reinjector already restored (an earlier reinjection's paths).
    restored_paths = {path for m in view for path in m.meta.get("paths", ()) if m.origin is Origin.REINJECTION}
    for fact in facts:
        if len(restored) >= max_files:
            break
        if fact.path in restored_paths:
            skipped.append({"path": fact.path, "why": "restored by another reinjector"})
            continue
        content, source, note = _content(fact, ctx.config.workspace_root)
        if content is None:
            skipped.append({"path": fact.path, "why": note})
            continue
        if _visible_in_tail(fact.path, content, tail, config.visible_similarity):
            skipped.append({"path": fact.path, "why": "kept tail shows it"})
            continue
        if _reinjected_in_tail(fact.path, escape_tags(content, "file"), tail):
            skipped.append({"path": fact.path, "why": "an earlier compaction's reinjection in the kept tail shows it"})
            continue
        note_attr = f' note="{escape_attr(note)}"' if note else ""
        header = f'<file path="{escape_attr(fact.path)}" source="{source}"{note_attr}>\n'
        room = min(config.file_tokens, left) - ctx.counter.text(header + "\n</file>") - 8
        if room < 50:
            dropped.append(fact.path)
            continue
        body = truncate_to_tokens(escape_tags(content, "file"), room, marker=TRUNCATION_MARKER)
        msg = reinjected(ctx, NAME, str(len(out)), header + body + "\n</file>", path=fact.path, source=source)
        cost = ctx.counter.message(msg)
        left -= cost
        out.append(msg)
        restored.append({"path": fact.path, "source": source, "tokens": cost})
    return Reinjection(out, report(NAME, before, ctx.counter.messages(out), restored, skipped, dropped))


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
    """Read `path` only if it is a regular file inside `root` (symlinks followed for the check, never
    for the open: see fileio.read_confined); (None, why) if not."""
    try:
        data = read_confined(root, path, MAX_FILE_BYTES)
    except WorkspaceReadError as exc:
        return None, exc.reason
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        return None, "binary file"
    return data.decode("utf-8", errors="replace"), ""


def _reinjected_in_tail(path: str, body: str, tail: list[Message]) -> bool:
    """Whether an earlier compaction restored this file, whole and as it is now, into what is still the
    kept tail (a second compaction soon after the first): restoring it again would show it twice."""
    return any(m.origin is Origin.REINJECTION and m.meta.get("reinjector") == NAME and m.meta.get("path") == path
               and m.text.endswith("\n" + body + "\n</file>") for m in tail)


def _visible_in_tail(path: str, content: str, tail: list[Message], similarity: float) -> bool:
    calls = calls_by_id(tail)
    for _, result in uncleared_results(tail):
        call = calls.get(result.call_id)
        called = call_path(call) if call is not None else None
        if called is None:
            continue
        if not (called == path or path.endswith("/" + called.lstrip("./"))):
            continue
        lines = numbered_lines(result.content)  # Claude Code's Read prefixes line numbers
        shown = "\n".join(lines[k] for k in sorted(lines)) if lines else result.content
        # Whole-text ratio (bit-parallel, fast); a partial read is too different and gets reinjected.
        if fuzz.ratio(content, shown, score_cutoff=similarity):
            return True
    return False


REINJECTOR = Reinjector(NAME, run, reads=frozenset({"config", "counter"}) | FACTS_READS | MESSAGE_READS)
