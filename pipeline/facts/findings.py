"""Findings the assistant stated only in its own prose: "the failures are pre-existing", "the cause
is X", "instead, use Y". No tool output says these; they are the agent's conclusions, and a summary
that drops them makes the agent re-investigate. Kept verbatim (a sentence, or two when the next one
completes it), with the message they came from.

Only assistant text is read (never tool output: a page saying "the cause is" is not a finding of
the agent's: tool output is an observation, never promoted), and code fences are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ..core.model import Message, Origin, Thinking
from ..core.memo import per_message_list
from .text import Unit, trim, units

PRE_EXISTING, CAUSE, USE_INSTEAD, CONCLUSION = "pre-existing", "cause", "use instead", "conclusion"
# A checker's complaint the agent restated ("Credo reports nesting too deep in f", "the mypy error is
# about X"): often the only record of what a linter or compiler objected to, since hooks and
# piped runs leave just the agent's reading of it. A negative result even once fixed: the next
# edit of the same code must not bring it back.
COMPLAINT = "checker complaint"
# (kind, pattern), strongest first; a sentence gets the first kind that matches.
FINDING_RES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (PRE_EXISTING, re.compile(r"(?i)\bpre-?existing\b|\balready (?:failing|broken|failed) (?:before|on main)"
                              r"|\bunrelated to (?:my|our|these|this|the) change|\bfail(?:s|ed)? on main too\b")),
    (CAUSE, re.compile(r"(?i)\b(?:root )?cause (?:is|was|of (?:the|this)\b)|\bcaused by\b"
                       r"|\bthe (?:issue|problem|bug|culprit|reason) (?:is|was)\b|\bturns out\b|\bis failing because\b"
                       r"|\bfails because\b|\b(?:this|it) (?:happens|is) because\b|\bthat'?s why\b|\bthe fix (?:is|was)\b"
                       r"|\bthe error (?:is|was|says)\b|\b(?:is|was) due to\b"
                       r"|^(?:i )?found (?:the|a) (?:problem|issue|bug|culprit|cause|root cause)\b")),
    (USE_INSTEAD, re.compile(r"(?i)\binstead,? (?:use|call|run|we (?:should|need to|must) use)\b"
                             r"|\bshould (?:use|call|run) \S+ instead\b|\buse \S+ instead of\b|\bneed(?:s)? to use\b"
                             r"|\bthe (?:right|correct|proper) (?:way|approach|fix) is\b")),
    (COMPLAINT, re.compile(
        r"(?i)\b(?:credo|eslint|ruff|mypy|pyright|pylint|flake8|clippy|rubocop|tsc|dialyzer|golangci-lint|"
        r"shellcheck|biome|stylelint|phpstan|psalm|linter|compiler|type ?checker)\b[^.]{0,80}?"
        r"\b(?:complain\w*|reports?|reported|flag(?:s|ged)?|warns?|warnings?|objects?)\b")),
    (CONCLUSION, re.compile(r"(?i)^(?:so |this (?:means|confirms)|confirmed:?|found it|key (?:insight|finding)"
                            r"|important:|note:)")),
)
# A sentence that only says a cause was found ("Found the problem!"): the next one says what it is.
FOUND_ONLY_RE = re.compile(r"(?i)^(?:i )?found (?:the|a) (?:problem|issue|bug|culprit|cause|root cause)\W*$")
# Any of them, in one search: most sentences state no finding, and one case-blind scan of the text
# rules that out where five would (an alternation matches where one of its parts does).
ANY_FINDING_RE = re.compile("|".join(f"(?:{p.pattern.removeprefix('(?i)')})" for _, p in FINDING_RES), re.I)
# Sentences that announce what the agent will do next: a plan, not a finding.
INTENT_RE = re.compile(r"(?i)^(?:let me|let's|i'll|i will|i need to|now\b)")
# A finding is a sentence or two; longer units are cut.
MAX_FINDING_CHARS = 300
MIN_FINDING_CHARS = 20


@dataclass(frozen=True)
class Finding:
    """A conclusion the assistant stated: `kind` (pre-existing, cause, use instead, conclusion),
    the sentence verbatim, and where it was said."""

    kind: str
    text: str
    message_id: str
    index: int


@per_message_list  # the findings kind and the approaches (a checker's complaint) read one window's
def findings(messages: Sequence[Message]) -> list[Finding]:
    """Findings stated in assistant prose, oldest first, each text once. Checker complaints are read
    from the assistant's thinking too: the agent often restates a hook's or a piped run's complaint
    only there."""
    out: list[Finding] = []
    seen: set[str] = set()
    complaint = dict(FINDING_RES)[COMPLAINT]
    for i, m in enumerate(messages):
        if m.role != "assistant" or m.origin is not Origin.CONVERSATION:
            continue
        sources: list[tuple[str, str | None]] = [(m.text, None)] if m.text.strip() else []
        thinking = "\n".join(b.text for b in m.blocks if isinstance(b, Thinking) and not b.redacted)
        if thinking.strip():
            sources.append((thinking, COMPLAINT))
        for text_of, only in sources:
            _scan(units(text_of), only, complaint, m.id, i, seen, out)
    return out


def _scan(said: list[Unit], only: str | None, complaint: re.Pattern[str], message_id: str, index: int,
          seen: set[str], out: list[Finding]) -> None:
    n = 0
    while n < len(said):
        text = said[n].text
        n += 1
        if only is None:
            kind = next((k for k, pattern in FINDING_RES if pattern.search(text)), None) \
                if ANY_FINDING_RE.search(text) else None
        else:
            kind = only if complaint.search(text) and not INTENT_RE.match(text) else None
        if kind is None:
            continue
        # "The cause is X." often ends with a colon that the next sentence completes, and "Found the
        # problem!" says only that the next sentence is the cause ("Found it." may be a file: not so).
        if (text.rstrip().endswith(":") or FOUND_ONLY_RE.match(text)) and n < len(said):
            text += " " + said[n].text
            n += 1
        if len(text) < MIN_FINDING_CHARS:
            continue
        key = " ".join(text.split()).casefold()
        if key in seen:
            continue
        seen.add(key)
        out.append(Finding(kind, trim(" ".join(text.split()), MAX_FINDING_CHARS), message_id, index))
