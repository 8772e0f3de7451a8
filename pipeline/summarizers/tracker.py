"""The issue tracker as a summary reads it: which issues are closed by now (the task texts of closed
ones are done work, not open requests), and how a long tracker command is shown."""

from __future__ import annotations

import re

from ..ledger.views import listed_issues
from ..ledger.source import FactSource

# A tracker command longer than this is cut where its result repeats it.
MAX_TRACKER_COMMAND_CHARS = 80
# A tracker command that claims an issue (so finishing it is the next step).
IN_PROGRESS_RE = re.compile(r"in[_-]progress|--claim|\bstart\b")
# The bracketed priority and state at the end of a tracker's issue header (`[● P2 · OPEN]`).
TRACKER_STATE_RE = re.compile(r"\s*\[[^\]]*·\s*[A-Z_]+\]\s*$")
TRACKER_MARK_RE = re.compile(r"^[○◐✓●❄]\s+")


def closed_issues(src: FactSource) -> set[str]:
    """Tracker issues whose latest known state is closed: from the tracker updates the agent ran and
    from the states later task texts list for their related issues (an epic reopened when new
    children were added reads as open again)."""
    latest: dict[str, tuple[int, str]] = {}

    def note(issue: str, index: int, status: str | None) -> None:
        if status is not None and index >= latest.get(issue, (-1, ""))[0]:
            latest[issue] = (index, status)

    for u in src.tracker_updates():
        for change in u.changes:
            note(change.issue, u.index, change.status)
    for spec in src.task_specs():
        for change in listed_issues(spec.text):
            if change.issue != spec.issue:  # its own header is the state when read, before any claim
                note(change.issue, spec.index, change.status)
    return {issue for issue, (_, status) in latest.items() if status == "completed"}


def closed_spec_texts(src: FactSource) -> tuple[list[str], list[str]]:
    """The texts of task specs whose issue is closed, and of the others (folded for lookups)."""
    closed = closed_issues(src)
    done: list[str] = []
    open_: list[str] = []
    for spec in src.task_specs():
        (done if spec.issue in closed else open_).append(" ".join(spec.text.lower().split()))
    return done, open_


def short_command(command: str, result: str) -> str:
    """A tracker command without the long argument its result already echoes (a close reason, a
    description): the verb and the issue id carry the fact, the result carries the text."""
    if len(command) <= MAX_TRACKER_COMMAND_CHARS:
        return command
    for quote in ('"', "'"):
        at = command.find(quote)
        if 0 < at and command[at + 1: at + 41] in result:
            return command[:at] + quote + "…" + quote
    return command[:MAX_TRACKER_COMMAND_CHARS] + "…"
