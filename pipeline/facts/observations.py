"""What the latest tool calls showed: for each recent call, a few lines of its output verbatim (its
first lines and its last one), so a summary keeps the observation the agent was working from (the
size a command printed, the commit a rewrite left, the count a scan found) and not only the command.

Output is the world's text: it is quoted with the call that printed it, as an observation, never
promoted to a rule or a status fact. Reads, edits and writes are left out (the files section and the
edit gists carry them), and so are the todo, plan, skill and question tools (their own sections do).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Sequence

from ..core.model import Message
from ..core.toolkinds import tool_kind
from .calls import EXIT_CODE_RE, tool_calls, tool_label
from .fileviews import is_file_window
from .text import one_line, output_body

# Terminal colour and cursor codes: noise in a quoted line.
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")
# Kinds whose output is an observation no other section carries.
OBSERVED_KINDS = ("shell", "grep", "glob", "list", "search", "fetch", "agent", "memory", "other")
# Lines quoted per call: the first few (what the command says first) and the last (its verdict).
HEAD_LINES, TAIL_LINES = 2, 1
MAX_LINE_CHARS = 120
LINE_SEPARATOR = " | "
# A listing (`ls`, a glob) is quoted as the names it lists, up to this many characters.
LISTING_KINDS = ("list", "glob")
MAX_LISTING_CHARS = 360


@dataclass(frozen=True)
class Outcome:
    """A recent tool call, what its output said (a few lines, verbatim), and where it is."""

    label: str
    gist: str
    failed: bool
    message_id: str
    index: int
    call_id: str = ""


def output_gist(output: str) -> str:
    """The first lines and the last line of an output, colour codes and blank lines removed, each cut
    to a line's worth ("" for an empty output)."""
    lines = [ln.strip() for ln in ANSI_RE.sub("", output_body(output)).splitlines() if ln.strip()]
    if lines and EXIT_CODE_RE.match(lines[0]):
        lines = lines[1:]  # the failure is said by the call's state
    picked = lines[:HEAD_LINES] + [ln for ln in lines[HEAD_LINES:][-TAIL_LINES:]]
    return LINE_SEPARATOR.join(one_line(ln, MAX_LINE_CHARS) for ln in dict.fromkeys(picked))


def listing_gist(output: str) -> str:
    """What a listing showed: the names it lists (the last word of each line, as `ls -l` prints it,
    or the path a glob printed), comma-separated, cut to a few lines' worth."""
    names = []
    for line in ANSI_RE.sub("", output_body(output)).splitlines():
        words = line.split()
        if not words or (words[0] == "total" and len(words) == 2):
            continue
        name = posixpath.basename(words[-1].rstrip("/")) or words[-1]
        if name not in (".", ".."):
            names.append(name)
    return one_line(", ".join(dict.fromkeys(names)), MAX_LISTING_CHARS)


def recent_outcomes(messages: Sequence[Message], limit: int) -> list[Outcome]:
    """The latest `limit` answered calls of the observed kinds, newest first, each with its gist."""
    out: list[Outcome] = []
    for rec in reversed(tool_calls(messages)):
        if len(out) >= limit:
            break
        if rec.result is None or rec.rejected or tool_kind(rec.call) not in OBSERVED_KINDS or rec.kind == "read":
            continue  # reads (a shell `cat`, too) are left to the files
        if is_file_window(rec.output):
            continue

        gist = listing_gist(rec.output) if rec.kind in LISTING_KINDS else output_gist(rec.output)
        if gist:
            out.append(Outcome(tool_label(rec), gist, rec.failed, rec.result_message_id or rec.message_id,
                               rec.result_index if rec.result_index is not None else rec.index, rec.call.id))
    return out
