"""What happened to each message: its fate in the view, worked out from the session's edits.

A transcript message is kept verbatim, has a tool result replaced (budgeted to an artifact, snipped,
cleared by microcompact), was folded into a collapse digest, was summarized by a compaction, is a
status publication, or was dropped before the live slice (the harness's own earlier compaction).
worksurface's own messages in the view (boundary and summary, reinjections, status, snip markers and
collapse digests) are cells too, placed where the view puts them: right before the transcript message
that follows them in the view, or at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Sequence

from ..core.edits import Compact, Edit, Insert, ReplaceMessages, ReplaceResult
from ..core.model import Message, Origin, message_text
from ..core.tokens import TokenCounter
from ..core.view import live_slice


class Fate(StrEnum):
    """A message's fate in the view (the order is the legend's)."""

    KEPT = "kept"
    BUDGETED = "budgeted"
    SNIPPED = "snipped"
    CLEARED = "cleared"
    COLLAPSED = "collapsed"
    SUMMARIZED = "summarized"
    DROPPED = "dropped"
    SUMMARY = "summary"
    REINJECTED = "reinjected"
    STATUS = "status"
    MARKER = "marker"


FATE_LABELS: dict[Fate, str] = {
    Fate.KEPT: "kept verbatim",
    Fate.BUDGETED: "budgeted to an artifact",
    Fate.SNIPPED: "snipped",
    Fate.CLEARED: "cleared by microcompact",
    Fate.COLLAPSED: "collapsed",
    Fate.SUMMARIZED: "summarized",
    Fate.DROPPED: "dropped by the harness",
    Fate.SUMMARY: "boundary and summary",
    Fate.REINJECTED: "reinjected",
    Fate.STATUS: "status",
    Fate.MARKER: "marker (snip, collapse digest, recovery)",
}

# Which fate a replaced tool result gets, by the stage that replaced it.
_RESULT_FATES = {"budget": Fate.BUDGETED, "snip": Fate.SNIPPED, "microcompact": Fate.CLEARED}
# When one message has results replaced by several stages, the cell shows the strongest reduction.
_RESULT_PRIORITY = (Fate.CLEARED, Fate.BUDGETED, Fate.SNIPPED)
_REMOVAL_FATES = {"snip": Fate.SNIPPED, "collapse": Fate.COLLAPSED, "status": Fate.STATUS}
_SURFACE_FATES = {Origin.SUMMARY: Fate.SUMMARY, Origin.BOUNDARY: Fate.SUMMARY, Origin.REINJECTION: Fate.REINJECTED,
                  Origin.STATUS: Fate.STATUS, Origin.SNIP_MARKER: Fate.MARKER, Origin.COLLAPSE: Fate.MARKER,
                  Origin.RECOVERY: Fate.MARKER}
# Reasons are one line: the first line of a marker says what happened and why.
REASON_CHARS = 300
ELLIPSIS = " … "


@dataclass(frozen=True)
class Cell:
    """One cell of the message map. `source` is "transcript" for the harness's messages and
    "surface" for those worksurface added to the view. `before` / `after` are clipped texts."""

    id: str
    source: Literal["transcript", "surface"]
    role: str
    tool: str | None
    tokens: int
    tokens_after: int
    fate: Fate
    stage: str | None
    reason: str
    before: str
    after: str
    artifact: str | None = None
    fetch: str | None = None
    history: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "role": self.role, "tool": self.tool,
                "tokens": self.tokens, "tokens_after": self.tokens_after, "fate": self.fate.value,
                "stage": self.stage, "reason": self.reason, "before": self.before, "after": self.after,
                "artifact": self.artifact, "fetch": self.fetch, "history": list(self.history)}


def clip(text: str, limit: int) -> str:
    """At most about `limit` characters: the head and the tail with the count of what was left out."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return f"[{len(text)} chars]"
    head = max(1, limit * 2 // 3)
    tail = max(0, limit - head)
    cut = len(text) - head - tail
    return f"{text[:head]}{ELLIPSIS}[{cut} chars]{ELLIPSIS}{text[len(text) - tail:] if tail else ''}"


def _first_line(text: str, limit: int) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return clip(line, min(REASON_CHARS, limit))


class _Edits:
    """The session's edits indexed by what they touch (the last edit about an id wins)."""

    def __init__(self, edits: Sequence[Edit]) -> None:
        self.results: dict[str, ReplaceResult] = {}
        self.removed: dict[str, tuple[int, ReplaceMessages]] = {}
        self.covered: dict[str, tuple[int, Compact]] = {}
        self.compacts: list[tuple[int, Compact]] = []
        self.inserted_by: dict[str, str] = {}  # inserted message id -> stage
        for k, e in enumerate(edits):
            if isinstance(e, ReplaceResult):
                self.results[e.call_id] = e
            elif isinstance(e, ReplaceMessages):
                for i in e.ids:
                    self.removed[i] = (k, e)
            elif isinstance(e, Compact):
                self.compacts.append((k, e))
                for i in e.covered:
                    self.covered[i] = (k, e)
            elif isinstance(e, Insert):
                for m in e.messages:
                    self.inserted_by[m.id] = e.stage

    def compact_after(self, k: int) -> Compact | None:
        return next((c for j, c in self.compacts if j > k), None)


def _compaction_reason(edit: Compact) -> str:
    info = edit.info or {}
    if not info:
        return "covered by a compaction"
    return (f"covered by the {info.get('trigger', '?')} compaction of epoch {info.get('epoch', '?')} "
            f"({info.get('pre_tokens', '?')} -> {info.get('post_tokens', '?')} tokens, "
            f"summarizer {info.get('summarizer', '?')})")


def _tools(message: Message, call_names: dict[str, str]) -> str | None:
    names = [c.name for c in message.tool_calls] + [call_names.get(r.call_id, "?") for r in message.tool_results]
    return ", ".join(dict.fromkeys(names)) or None


def compute_cells(transcript: Sequence[Message], edits: Sequence[Edit], view: Sequence[Message],
                  counter: TokenCounter, text_chars: int = 400) -> list[Cell]:
    """Every transcript message as a cell in transcript order, with worksurface's own view messages
    as cells where the view puts them. `view` is the view the session built with `edits`."""
    index = _Edits(edits)
    live = live_slice(transcript)
    dropped_n = len(transcript) - len(live)
    transcript_ids = {m.id for m in transcript}
    view_by_id = {m.id: m for m in view}
    view_ids = set(view_by_id)
    call_names = {c.id: c.name for m in list(transcript) + list(view) for c in m.tool_calls}

    # Surface messages attach before the next transcript message of the view (or go at the end).
    before: dict[str, list[Message]] = {}
    pending: list[Message] = []
    for m in view:
        if m.id in transcript_ids:
            if pending:
                before[m.id] = pending
                pending = []
        else:
            pending.append(m)

    def surface(m: Message) -> Cell:
        fate = _SURFACE_FATES.get(m.origin, Fate.MARKER)
        stage = m.meta.get("stage") or index.inserted_by.get(m.id) or m.meta.get("reinjector")
        if m.origin is Origin.REINJECTION:
            stage = f"reinject:{m.meta.get('reinjector', '?')}"
        text = message_text(m)
        n = counter.message(m)
        return Cell(m.id, "surface", m.role, None, n, n, fate, stage, _first_line(text, text_chars), "",
                    clip(text, text_chars))

    cells: list[Cell] = []
    for i, m in enumerate(transcript):
        for s in before.get(m.id, ()):
            cells.append(surface(s))
        if i < dropped_n:
            text = message_text(m)
            cells.append(Cell(m.id, "transcript", m.role, _tools(m, call_names), counter.message(m), 0,
                              Fate.DROPPED, None, "before the harness's own compact boundary: not sent to the model",
                              clip(text, text_chars), "", fetch=None))
            continue
        cells.append(_transcript_cell(m, view_by_id.get(m.id), index, view_ids, counter, call_names,
                                      text_chars))
    cells.extend(surface(s) for s in pending)
    return cells


def _transcript_cell(m: Message, shown: Message | None, index: _Edits, view_ids: set[str],
                     counter: TokenCounter, call_names: dict[str, str], text_chars: int) -> Cell:
    text = message_text(m)
    tools = _tools(m, call_names)
    tokens = counter.message(m)
    original = f"session.original({m.id!r})"

    def cell(fate: Fate, stage: str | None, reason: str, after: str, tokens_after: int,
             artifact: str | None = None, fetch: str | None = original, history: tuple[str, ...] = ()) -> Cell:
        return Cell(m.id, "transcript", m.role, tools, tokens, tokens_after, fate, stage, reason,
                    clip(text, text_chars), clip(after, text_chars), artifact, fetch, history)

    if shown is not None:
        after = message_text(shown)
        replaced = [index.results[r.call_id] for r in shown.tool_results
                    if r.call_id in shown.meta.get("edited_calls", {}) and r.call_id in index.results]
        if replaced:
            by_fate = {_RESULT_FATES.get(e.stage, Fate.CLEARED): e for e in replaced}
            fate = next(f for f in _RESULT_PRIORITY + tuple(Fate) if f in by_fate)
            chosen = by_fate[fate]
            artifact = next((e.artifact for e in replaced if e.artifact), None)
            return cell(fate, chosen.stage, _first_line(chosen.content, text_chars), after, counter.message(shown),
                        artifact, f"session.artifact({artifact!r})" if artifact else original,
                        tuple(dict.fromkeys(e.stage for e in replaced)))
        fate = Fate.STATUS if m.origin is Origin.STATUS else Fate.KEPT
        return cell(fate, None, "in the view as the harness sent it", after, counter.message(shown), fetch=None)

    prior = tuple(dict.fromkeys(index.results[r.call_id].stage for r in m.tool_results if r.call_id in index.results))
    if m.id in index.covered:
        _, compact = index.covered[m.id]
        return cell(Fate.SUMMARIZED, compact.stage, _compaction_reason(compact), _summary_pointer(compact), 0,
                    history=prior + (compact.stage,))
    if m.id in index.removed:
        k, edit = index.removed[m.id]
        fate = _REMOVAL_FATES.get(edit.stage, Fate.SNIPPED)
        stand_in = next((r for r in edit.replacement), None)
        gone = stand_in is not None and all(r.id not in view_ids for r in edit.replacement)
        if gone:
            later = index.compact_after(k)
            if later is not None:
                return cell(Fate.SUMMARIZED, later.stage,
                            f"{edit.stage} first, then {_compaction_reason(later)}", _summary_pointer(later), 0,
                            history=prior + (edit.stage, later.stage))
        if stand_in is not None:
            reason = _first_line(message_text(stand_in), text_chars)
            after = message_text(stand_in)
        else:
            reason = f"removed by {edit.stage} (nothing stands in its place)"
            after = ""
        return cell(fate, edit.stage, reason, after, 0, history=prior + (edit.stage,))
    later = index.compacts[-1][1] if index.compacts else None
    if later is not None and m.origin is not Origin.CONVERSATION:
        # Compactions list only conversation messages as covered; worksurface's own go with the head.
        return cell(Fate.SUMMARIZED, later.stage, _compaction_reason(later), _summary_pointer(later), 0,
                    history=prior + (later.stage,))
    return cell(Fate.DROPPED, None, "not in the view and no recorded edit removed it", "", 0,
                history=prior)


def _summary_pointer(edit: Compact) -> str:
    summary = next((m for m in edit.head if m.origin is Origin.SUMMARY), None)
    return f"(in the summary {summary.id})" if summary is not None else "(summarized)"
