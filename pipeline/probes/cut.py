"""Where a probe run cuts a transcript, and what Claude Code's own compaction left there.

`boundary` is just before the first real compaction marker of a Claude Code file (the message whose
meta has `compact_boundary`); a number N keeps the first N messages. Claude Code's view at its
boundary is the system prefix plus the summary message it wrote (meta `is_compact_summary`): the
files it re-attached after compacting are not recorded in the file, so they cannot be counted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from ..core.model import Message
from ..core.usage import USAGE_VOID
from ..formats.base import Transcript
from ..formats.claude_code_records import FILE_AFTER, PRESERVED_BY
from .baselines import split_prefix
from .model import ProbeError

BOUNDARY = "boundary"


@dataclass(frozen=True)
class Cut:
    """The messages a compaction at the cut works on, and Claude Code's view there if it wrote one."""

    before: list[Message]
    index: int
    at_boundary: bool
    claude_code_view: list[Message] | None
    # The instructions the user gave the compaction at the cut (a manual `/compact <instructions>`).
    instructions: str | None = None


def first_boundary(messages: Sequence[Message]) -> int | None:
    return next((i for i, m in enumerate(messages) if m.meta.get("compact_boundary")), None)


def parse_at(value: str | int | None) -> str | int | None:
    """`boundary`, a message count, or None (the boundary if there is one, else the whole transcript)."""
    if value is None or isinstance(value, int) or value == BOUNDARY:
        return value
    if value.isdigit():
        return int(value)
    raise ProbeError(f"--at must be {BOUNDARY!r} or a number of messages, not {value!r}")


def cut(messages: Sequence[Message], at: str | int | None = None) -> Cut:
    parsed = parse_at(at)
    boundary = first_boundary(messages)
    if parsed == BOUNDARY or (parsed is None and boundary is not None):
        if boundary is None:
            raise ProbeError("the transcript has no compact boundary to cut at; give --at N instead")
        n = boundary
    else:
        n = len(messages) if parsed is None else int(parsed)
        if not 0 < n <= len(messages):
            raise ProbeError(f"--at {n} is outside the transcript (1..{len(messages)} messages)")
    at_boundary = n == boundary
    if not at_boundary:
        return Cut(list(messages[:n]), n, False, None)
    instructions = messages[n].meta.get("instructions")
    return Cut(list(messages[:n]) + preserved_before(messages, n), n, True, claude_code_view(messages, n),
               instructions if isinstance(instructions, str) else None)


def preserved_before(messages: Sequence[Message], boundary: int) -> list[Message]:
    """The messages Claude Code kept verbatim across the boundary at `boundary` (the reader moved them
    after its summary, meta PRESERVED_BY), as they stood before it: the last ones it had before compacting."""
    marks = (PRESERVED_BY, FILE_AFTER, USAGE_VOID)
    return [replace(m, meta={k: v for k, v in m.meta.items() if k not in marks}) for m in messages[boundary + 1:]
            if m.meta.get(PRESERVED_BY) == messages[boundary].id]


def claude_code_view(messages: Sequence[Message], boundary: int) -> list[Message] | None:
    """What Claude Code's model saw right after the boundary at `boundary`: the system prefix, the
    compaction summary that follows the marker and the messages it kept verbatim after it (None when
    the file has no such summary)."""
    prefix, _ = split_prefix(messages[:boundary])
    kept = messages[boundary].id
    for i, m in enumerate(messages[boundary + 1:], boundary + 1):
        if m.meta.get("is_compact_summary"):
            return prefix + [m] + [p for p in messages[i + 1:] if p.meta.get(PRESERVED_BY) == kept]
        if m.role == "assistant":
            break
    return None


def cut_transcript(transcript: Transcript | Sequence[Message],
                   before: list[Message]) -> Transcript | list[Message]:
    """The transcript as it stood at the cut: its messages before the cut, and only the queued user
    inputs that had arrived by then."""
    if not isinstance(transcript, Transcript):
        return before
    ids = {m.id for m in before}
    queued = [(after, text) for after, text in transcript.queued_inputs if after is None or after in ids]
    return Transcript(before, transcript.format, transcript.path, list(transcript.extras),
                      dict(transcript.meta), queued)
