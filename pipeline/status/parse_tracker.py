"""Todo items from a command-line issue tracker used as the agent's todo list (beads, `bd`).

Some agents are told to track work in beads instead of a todo tool (the Claude Code sessions in
shared/transcripts are). Its confirmations are parsed: `bd create` (pending, with title),
`bd update --status` (the new status), `bd close` (completed), and `bd show` headers (title and
status). Listings (`bd ready`, `bd list`) name unrelated issues and are not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ID = r"[A-Za-z0-9]+-[A-Za-z0-9]+(?:\.\d+)*"
_UPDATE_CMD = re.compile(rf"\bbd update ((?:{_ID}\s+)+)--status[= ]?(\w+)")
_UPDATED = re.compile(rf"^✓ Updated issue: ({_ID})\s*$", re.M)
_CLOSED = re.compile(rf"^✓ Closed ({_ID}):", re.M)
_CREATED = re.compile(rf"^✓ Created issue: ({_ID})\s*\n\s*Title: (.+)$", re.M)
_SHOWN = re.compile(rf"^\S ({_ID})(?: \[\w+\])? · (.+?)\s+\[.*· ([A-Z_]+)\]\s*$", re.M)
_STATUS = {"open": "pending", "in_progress": "in_progress", "closed": "completed",
           "blocked": "pending", "deferred": "pending"}


@dataclass(frozen=True)
class TrackerUpdate:
    """What one command said about one issue; None: not said."""

    issue: str
    status: str | None = None
    title: str | None = None


def tracker_updates(command: str, output: str) -> list[TrackerUpdate]:
    """The issue changes a `bd` command line reports in its output, in output order."""
    if not re.search(r"(?:^|[\s;&|])bd\s", command):
        return []
    wanted: dict[str, str] = {}
    for m in _UPDATE_CMD.finditer(command):
        for issue in m.group(1).split():
            wanted[issue] = _STATUS.get(m.group(2).lower(), "pending")
    found: list[tuple[int, TrackerUpdate]] = []
    found += [(m.start(), TrackerUpdate(m.group(1), wanted[m.group(1)]))
              for m in _UPDATED.finditer(output) if m.group(1) in wanted]
    found += [(m.start(), TrackerUpdate(m.group(1), "completed")) for m in _CLOSED.finditer(output)]
    found += [(m.start(), TrackerUpdate(m.group(1), "pending", m.group(2).strip()))
              for m in _CREATED.finditer(output)]
    if "bd show" in command:
        found += [(m.start(), TrackerUpdate(m.group(1), _STATUS.get(m.group(3).lower()), m.group(2)))
                  for m in _SHOWN.finditer(output)]
    return [u for _, u in sorted(found, key=lambda p: p[0])]
