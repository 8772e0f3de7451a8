"""Issue tracker updates: the one parser for what a tracker command changed, used by the summary
(`record_updates`: the command and the line it printed) and the status bar (`issue_changes`: the
issue, its new state and title, which make the todo list when an agent tracks work in beads).

Only commands the agent ran are read (the command in the call's own arguments), and only the
confirmation lines those commands print: beads `bd create` (pending, with title), `bd update
--status` (the new status), `bd close` (completed), `bd show` headers and the issues a shown issue
lists as its children, parent, dependencies and dependents (with their state marks). Listings
(`bd ready`, `bd list`) name unrelated issues and are not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from .calls import CallRecord
from .text import one_line, output_body

# Issue tracker commands that change an issue's state (beads, GitHub, GitLab, Jira, Linear).
TRACKER_UPDATE_RE = re.compile(
    r"^(?:bd|beads|br)\s+(?:update|close|reopen|create|done|start)\b"
    r"|^(?:gh|glab)\s+(?:issue|pr|mr)\s+(?:close|reopen|edit|create|merge|comment)\b"
    r"|^jira\s+(?:issue\s+)?(?:move|transition|assign|create|edit)\b|^linear\s+issue\s+(?:update|create)\b")
# The programs TRACKER_UPDATE_RE opens with: a command line naming none of them changes no issue.
TRACKER_PROGRAM_RE = re.compile(r"\b(?:bd|beads|br|gh|glab|jira|linear)\s")
# A command and its result line are kept whole up to this length (an issue title, a long
# `bd create --description=...` keep their informative part).
MAX_LINE_CHARS = 400

_ID = r"[A-Za-z0-9]+-[A-Za-z0-9]+(?:\.\d+)*"
_UPDATE_CMD = re.compile(rf"\bbd update ((?:{_ID}\s+)+)--status[= ]?(\w+)")
_UPDATED = re.compile(rf"^✓ Updated issue: ({_ID})\s*$", re.M)
_CLOSED = re.compile(rf"^✓ Closed ({_ID}):", re.M)
_CREATED = re.compile(rf"^✓ Created issue: ({_ID})\s*\n\s*Title: (.+)$", re.M)
_SHOWN = re.compile(rf"^\S ({_ID})(?: \[\w+\])? · (.+?)\s+\[.*· ([A-Z_]+)\]\s*$", re.M)
# A related issue listed under a shown one (CHILDREN, DEPENDS ON, BLOCKS, PARENT): arrow, state mark,
# id, title, priority. The issues of the same epic are the plan the agent works through.
_RELATED = re.compile(rf"^\s*[↳→←↑]\s+([○◐✓●❄])\s+({_ID}):\s+(.+?)(?:\s+●\s*P\d)?\s*$", re.M)
_MARK_STATUS = {"○": "pending", "◐": "in_progress", "✓": "completed", "●": "pending", "❄": "pending"}
_STATUS = {"open": "pending", "in_progress": "in_progress", "closed": "completed",
           "blocked": "pending", "deferred": "pending"}


@dataclass(frozen=True)
class IssueChange:
    """What one command said about one issue; None: not said."""

    issue: str
    status: str | None = None
    title: str | None = None


@dataclass(frozen=True)
class TrackerUpdate:
    """An issue tracker command the agent ran to change an issue, the line it printed about it, and
    the changes the one parser read from its output (`changes`)."""

    command: str
    result: str
    message_id: str
    index: int
    changes: tuple[IssueChange, ...] = ()


def issue_changes(command: str, output: str) -> list[IssueChange]:
    """The issue changes a `bd` command line reports in its output, in output order."""
    if not re.search(r"(?:^|[\s;&|])bd\s", command):
        return []
    wanted: dict[str, str] = {}
    for m in _UPDATE_CMD.finditer(command):
        for issue in m.group(1).split():
            wanted[issue] = _STATUS.get(m.group(2).lower(), "pending")
    found: list[tuple[int, IssueChange]] = []
    found += [(m.start(), IssueChange(m.group(1), wanted[m.group(1)]))
              for m in _UPDATED.finditer(output) if m.group(1) in wanted]
    found += [(m.start(), IssueChange(m.group(1), "completed")) for m in _CLOSED.finditer(output)]
    found += [(m.start(), IssueChange(m.group(1), "pending", m.group(2).strip()))
              for m in _CREATED.finditer(output)]
    if "bd show" in command:
        found += [(m.start(), IssueChange(m.group(1), _STATUS.get(m.group(3).lower()), m.group(2)))
                  for m in _SHOWN.finditer(output)]
        found += [(m.start(), IssueChange(m.group(2), _MARK_STATUS[m.group(1)], m.group(3)))
                  for m in _RELATED.finditer(output)]
    return [u for _, u in sorted(found, key=lambda p: p[0])]


def _command_parts(command: str) -> list[str]:
    """The simple commands of a command line (split at newlines, `&&`, `;` and `||`)."""
    return [part for line in command.splitlines() for part in re.split(r"\s*(?:&&|;|\|\|)\s*", line.strip())]


def updates_tracker(command: str) -> bool:
    """True when the command line changes an issue (claim, close, create, ...), not only reads one."""
    return bool(TRACKER_PROGRAM_RE.search(command)) and any(TRACKER_UPDATE_RE.match(part)
                                                             for part in _command_parts(command))


def record_updates(rec: CallRecord, changes: Sequence[IssueChange]) -> list[TrackerUpdate]:
    """The issue state changes (claim, close, create...) one successful shell call of the agent's made,
    given the changes its output reports (`issue_changes`)."""
    command = rec.command or ""
    if not TRACKER_PROGRAM_RE.search(command):
        return []
    out = []
    for part in _command_parts(command):
        if TRACKER_UPDATE_RE.match(part):
            result = _result_line(part, rec.output)
            named = tuple(c for c in changes if _names(part, c.issue) or c.issue in result)
            out.append(TrackerUpdate(one_line(part, MAX_LINE_CHARS), one_line(result, MAX_LINE_CHARS),
                                     rec.result_message_id or rec.message_id, rec.index, named))
    return out


def _names(text: str, word: str) -> bool:
    """`word` in `text` and not the start of a longer name (no word character or dot right after it).
    Searched, not matched with a pattern made per word: every issue id and argument would be a new
    pattern, and they push the patterns the rest of the code uses out of `re`'s cache."""
    at = text.find(word)
    while at >= 0:
        after = at + len(word)
        if after == len(text) or not (text[after].isalnum() or text[after] in "_."):
            return True
        at = text.find(word, at + 1)
    return False


def _result_line(command: str, output: str) -> str:
    """The output line about this command's issue (the first that names one of its arguments); a
    harness's header above the output (Codex's exit code, wall time) is not the output."""
    lines = [ln.strip() for ln in output_body(output).splitlines() if ln.strip()]
    args = [w for w in command.split()[2:] if not w.startswith("-") and len(w) > 2]
    for line in lines:
        if any(_names(line, a) for a in args):
            return line
    return lines[0] if lines else ""
