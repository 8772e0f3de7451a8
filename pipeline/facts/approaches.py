"""Approaches tried and excluded, verbatim, so the next pass does not try them again: user rejections and
interrupts (with the user's next words), reverts, failures worked around with something else, the
agent saying an approach failed or deciding against a change, and the user's complaints. Authority
follows provenance, as for constraints: only the harness's own records and the conversation's words count.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Sequence

from ..core.model import Message, is_user_turn
from ..core.toolkinds import call_path, tool_kind
from .calls import CallRecord, tool_calls, tool_label
from .commands import rejection_words
from .errors import is_transient, tool_errors
from .fileviews import added_lines
from .findings import COMPLAINT, findings
from .provenance import from_other_harness
from .requests import is_user_message, queued_positions
from .shell import first_line, simple_commands
from .text import Unit, one_line, strip_reminders, trim, units

# Rejections and interrupts, reverts, and the assistant saying an approach failed or is dropped.
INTERRUPT_MARKER = "[Request interrupted by user"
REVERT_RE = re.compile(r"^git (?:checkout\s+(?:--\s|\S+\s+--\s)|restore\b|revert\b|reset\s+--hard\b|stash(?:\s+(?:push|save))?\s*$)")
ABANDON_RE = re.compile(
    r"(?i)\b(?:didn'?t work|did not work|doesn'?t work|does not work|not working|won'?t work|"
    r"isn'?t supported|not supported|doesn'?t support|does not support|can'?t use|cannot use|"
    r"instead(?:,| of| I'?ll| let me| we)|switch(?:ing)? to|fall(?:ing)? ?back|work ?around|"
    r"rather than|abandon|revert(?:ing|ed)?|wrong approach|dead end|no luck|still fail(?:s|ing)?|"
    r"stale)\b")
# The agent deciding against a change, with why ("the TTL already handles invalidation", "skipped as
# the duplication is minimal", "accept as tech debt"): an approach proposed and excluded, so the next
# pass does not redo the analysis or make the change after all.
DECIDED_RE = re.compile(
    r"(?i)\balready (?:handles?|handled|covers?|covered|prevents?|guards?)\b"
    r"|\b(?:is|are) (?:already )?(?:sufficient|adequate)\b|\b(?:not|no longer) (?:needed|necessary|required)\b"
    r"|\bunnecessary\b|\bno need (?:to|for)\b|\bnot worth\b|\bwon'?t fix\b|\bout of scope\b"
    r"|\b(?:accept(?:ed)?|keep|leave|left) (?:it |this |that )?as (?:tech(?:nical)? debt|is)\b|\btech(?:nical)? debt\b"
    r"|\bskip(?:ped|ping)? (?:this|it|that)\b|\bskipped as\b"
    r"|\b(?:defer|postpone)d? (?:it|this|that|them|to|until)\b|\b(?:is|are|be|was|were) (?:deferred|postponed)\b")
# Either, in one search (most of the agent's sentences say neither; an alternation matches where a part does).
ABANDON_OR_DECIDED_RE = re.compile(f"(?:{ABANDON_RE.pattern.removeprefix('(?i)')})"
                                   f"|(?:{DECIDED_RE.pattern.removeprefix('(?i)')})", re.I)
# Evidence longer than this is cut; one approach is a sentence or two.
MAX_EVIDENCE = 300
# A rejected call is named in this many characters, before what the user said about it.
MAX_REJECTED_LABEL = 80
# What the agent did after saying an approach failed is looked for this many messages ahead; of a
# change, the lines sharing at least MIN_SHARED_WORDS words with what it said are kept (at most
# FOLLOW_UP_LINES, each cut to MAX_FOLLOW_UP_CHARS).
FOLLOW_UP_MESSAGES = 4
MIN_SHARED_WORDS = 2
FOLLOW_UP_LINES = 2
MAX_FOLLOW_UP_CHARS = 120
# A user reply to a rejection is looked for within this many messages after it.
REPLY_WINDOW = 6
REJECTED, INTERRUPTED, REVERTED, WORKAROUND, ABANDONED, DECIDED = (
    "rejected", "interrupted", "reverted", "worked around", "abandoned", "decided against")
RULED_OUT, CORRECTED = "ruled out", "assumption corrected"
# The agent ruling a suspect out: the check it made is the lesson (the next pass does not redo it).
RULED_OUT_PHRASES = ("not the issue", "not the cause", "not the problem", "not the culprit", "isn't the issue",
                     "isn't the cause", "isn't the problem", "is ruled out", "rules out", "ruled that out",
                     "not what's causing", "not what is causing")
# The agent taking back what it assumed, near the start of its sentence ("Confirmed — you're right.").
CORRECTION_PHRASES = ("you're right", "you are right", "i was wrong", "i was mistaken", "i was conflating",
                      "my mistake", "i misread", "i stand corrected", "correction:", "i was incorrect")
CORRECTION_REACH = 40
# What the agent says it does next ends the corrected fact ("Let me fix the comments").
NEXT_MOVE_OPENINGS = ("let me", "let's", "i'll", "i will", "now ", "next,")


@dataclass(frozen=True)
class Approach:
    """Something tried and dropped: `kind` says how it was excluded; `text` is the verbatim evidence."""

    kind: str
    text: str
    message_ids: tuple[str, ...]
    index: int


def _evidence(text: str) -> str:
    return trim(re.sub(r"\s+", " ", text).strip(), MAX_EVIDENCE)


def _next_user_words(messages: Sequence[Message], start: int,
                     queued: dict[int, list[str]]) -> tuple[str, str] | None:
    """(message id, text) of the first thing the user typed after `start`, within the reply window."""
    for j in range(start, min(len(messages), start + REPLY_WINDOW)):
        m = messages[j]
        if j > start and is_user_message(m):
            return m.id, strip_reminders(m.text)
        if queued.get(j):
            return m.id, queued[j][0]
    return None


def excluded_approaches(messages: Sequence[Message],
                        queued_inputs: Sequence[tuple[str | None, str]] = ()) -> list[Approach]:
    """Approaches tried and dropped, oldest first: user rejections and interrupts (with the user's next
    words), reverts, failures worked around with something else, and the assistant saying so."""
    out: list[Approach] = []
    queued = queued_positions(messages, queued_inputs)
    records = tool_calls(messages)
    for rec in records:
        at = rec.result_index if rec.result_index is not None else rec.index
        if rec.rejected and tool_kind(rec.call) == "ask":
            continue  # declining a question is answering it another way (a request), not an approach
        if rec.rejected:
            typed = rejection_words(rec.result, rec.result_message) if rec.result and rec.result_message else None
            reply = (rec.result_message_id or rec.message_id, typed) if typed else _next_user_words(messages, at, queued)
            # The call is named in a few words: what the user said about it is the lesson, and a
            # long input (a plan, a file's new text) would leave it no room.
            text = f"user rejected {one_line(tool_label(rec), MAX_REJECTED_LABEL)}"
            marker = _interrupt_after(messages, at)
            if marker:
                text += f" {marker}"
            ids: tuple[str, ...] = (rec.message_id, rec.result_message_id or rec.message_id)
            if reply:
                text += f'; then said: "{_evidence(reply[1])}"'
                ids += (reply[0],)
            out.append(Approach(REJECTED, text, ids, at))
        elif rec.succeeded and rec.command:
            for sc in simple_commands(rec.command):
                line = " ".join(sc.words)
                if REVERT_RE.match(line):
                    out.append(Approach(REVERTED, _evidence(f"reverted with `{line}`"), (rec.message_id,), at))
    out += _undone_edits(records)
    rejected_at = {r.result_index for r in records if r.rejected}
    for err in tool_errors(messages):
        if err.workaround and err.resolution and not err.transient:
            text = f"{err.label} failed: {err.line} -> {err.resolution}"
            err_ids = (err.message_id,) + ((err.resolved_message_id,) if err.resolved_message_id else ())
            out.append(Approach(WORKAROUND, _evidence(text), err_ids, err.index))
    for i, m in enumerate(messages):
        if is_user_turn(m) and m.text.strip().startswith(INTERRUPT_MARKER) and not from_other_harness(m):
            if i - 1 in rejected_at or i in rejected_at:
                continue  # already reported as a rejected call
            # What the user stopped is the approach; what they said next is a request (requests.py),
            # not an approach, and is left to the user's messages.
            stopped = _interrupted_work(records, messages, i)
            if stopped:
                out.append(Approach(INTERRUPTED, _evidence(f"user interrupted {stopped}"), (m.id,), i))
        if m.role == "assistant":
            said = units(m.text)
            n = 0
            while n < len(said):
                text = said[n].text
                n += 1
                excluded = _ruled_out_or_corrected(said, n - 1)
                if excluded is not None:
                    how, evidence, n = excluded
                    out.append(Approach(how, _evidence(evidence), (m.id,), i))
                    continue
                kind = None if not ABANDON_OR_DECIDED_RE.search(text) else \
                    ABANDONED if ABANDON_RE.search(text) else DECIDED if DECIDED_RE.search(text) else None
                if kind is None or is_transient(text):
                    continue  # a read split for size or a retried timeout is routine, not a lesson
                # The next sentence usually says what was done instead; keep it when short.
                if n < len(said) and len(text) + len(said[n].text) < MAX_EVIDENCE:
                    text += " " + said[n].text
                    n += 1
                then = _done_instead(records, i, text) if kind == ABANDONED else ""
                out.append(Approach(kind, _evidence(text) + then, (m.id,), i))
    # A checker's complaint the agent restated is a negative result too (and so it is kept in the
    # ledger with the other approaches, across compactions).
    for f in findings(messages):
        if f.kind == COMPLAINT:
            out.append(Approach(COMPLAINT, _evidence(f.text), (f.message_id,), f.index))
    out.sort(key=lambda a: (a.index, a.kind))
    return _dedupe(out)


def _ruled_out_or_corrected(said: Sequence[Unit], at: int) -> tuple[str, str, int] | None:
    """(kind, evidence, where reading goes on) when the agent's sentence `at` rules a suspect out
    ("... so that's not the issue": the sentence before says what was checked, and is kept with it)
    or takes back what it assumed ("You're right. X does not ...": what follows is the corrected
    fact, kept up to MAX_EVIDENCE); None otherwise. Words, not patterns."""
    text = said[at].text
    low = " ".join(text.split()).casefold()
    if any(p in low[:CORRECTION_REACH] for p in CORRECTION_PHRASES):
        n = at + 1
        while n < len(said) and len(text) + len(said[n].text) < MAX_EVIDENCE and n <= at + 2 \
                and not said[n].text.casefold().startswith(NEXT_MOVE_OPENINGS):
            text += " " + said[n].text
            n += 1
        return CORRECTED, text, n
    if any(p in low for p in RULED_OUT_PHRASES):
        if at > 0 and len(said[at - 1].text) + len(text) < MAX_EVIDENCE:
            text = said[at - 1].text + " " + text
        return RULED_OUT, text, at + 1
    return None


def _done_instead(records: list[CallRecord], at: int, said: str) -> str:
    """What the agent did right after saying an approach failed: the next command it ran, or the
    lines of its next change that share the most words with what it said (the rewrite it announced),
    as " -> then: ..." (empty when nothing follows within a few messages). `records` are in call order,
    so only the calls of the few messages that follow are looked at (a session says so often)."""
    for j in range(bisect.bisect_left(records, at, key=_index), len(records)):
        rec = records[j]
        if rec.index > at + FOLLOW_UP_MESSAGES:
            break
        if not rec.succeeded:
            continue
        if rec.command and tool_kind(rec.call) == "shell":
            return f" -> then ran `{one_line(first_line(rec.command), MAX_FOLLOW_UP_CHARS)}`"
        if rec.kind not in ("edit", "write"):
            continue
        words = _words(said)
        scored = [(len(words & _words(line)), n, line) for n, line in enumerate(added_lines(dict(rec.call.input)))]
        best = sorted((s for s in scored if s[0] >= MIN_SHARED_WORDS), key=lambda s: (-s[0], s[1]))[:FOLLOW_UP_LINES]
        lines = " ; ".join(one_line(line, MAX_FOLLOW_UP_CHARS) for _, _, line in sorted(best, key=lambda s: s[1]))
        return f" -> then {tool_label(rec)}" + (f" (+ `{lines}`)" if lines else "")
    return ""


def _index(rec: CallRecord) -> int:
    return rec.index


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z][a-z0-9_]{3,}", text.lower())}


def _interrupted_work(records: list[CallRecord], messages: Sequence[Message], at: int) -> str | None:
    """What the agent was doing when the user interrupted at `at`: its latest tool call since the
    previous user turn, else its latest words then; None when it had only just started."""
    start = next((j for j in range(at - 1, -1, -1) if is_user_message(messages[j])), -1)
    calls = records[bisect.bisect_right(records, start, key=_index):bisect.bisect_left(records, at, key=_index)]
    if calls:
        # Stopping a question to the user is answering it another way, not excluding an approach.
        return None if tool_kind(calls[-1].call) == "ask" else f"the agent's {tool_label(calls[-1])}"
    said = next((messages[j].text for j in range(at - 1, start, -1)
                 if messages[j].role == "assistant" and messages[j].text.strip()), None)
    return f'the agent after it said: "{one_line(said, 160)}"' if said else None


def _interrupt_after(messages: Sequence[Message], at: int) -> str | None:
    """Claude Code's verbatim interrupt line right after a rejected call's result, if there is one."""
    for m in messages[at: at + 2]:
        for line in m.text.splitlines():
            if line.strip().startswith(INTERRUPT_MARKER):
                return line.strip()
    return None


def _undone_edits(records: list[CallRecord]) -> list[Approach]:
    """An edit whose old and new strings swap an earlier edit's on the same file undoes it."""
    out = []
    earlier: dict[tuple[str, str, str], CallRecord] = {}
    for rec in records:
        inp = rec.call.input
        old, new = inp.get("old_string", inp.get("old_str")), inp.get("new_string", inp.get("new_str"))
        if not (isinstance(old, str) and isinstance(new, str) and rec.succeeded):
            continue
        path = call_path(rec.call)
        if not path:
            continue
        undone = earlier.get((path, new, old))
        if undone is not None:
            text = f"edit to {path} undone (reverted the change made at {undone.message_id})"
            out.append(Approach(REVERTED, _evidence(text), (undone.message_id, rec.message_id), rec.index))
        earlier[(path, old, new)] = rec
    return out


def _dedupe(approaches: list[Approach]) -> list[Approach]:
    seen: set[str] = set()
    out = []
    for a in approaches:
        key = a.text.casefold()
        if key not in seen:
            seen.add(key)
            out.append(a)
    return out
