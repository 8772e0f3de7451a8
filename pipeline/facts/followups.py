"""What the agent itself left open and what it last said it verified, verbatim from its own prose.

The agent's reports end with what is left: an offer ("Want me to add an integration test for
this?"), a deferred step ("I'll sync the repo doc once plan mode exits"), the bullets under its own
"Next steps" or "Follow-ups" heading. They exist nowhere else, so a summary that drops them makes the
agent forget what it promised. Beside them, its latest report of a check ("All tests pass and the
linter is clean"), which a piped or backgrounded run often leaves as the only record of one. Only
assistant text of the conversation is read (a page or a file saying "next steps" is the world's text),
code fences skipped; the words are matched as words (no pattern a tool's output could shape).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..core.model import Message, Origin
from .text import trim, units

FOLLOW_UP, VERIFIED = "follow-up", "verified"
# How an offer of further work opens (the agent asks before doing it: it is not done).
OFFER_OPENINGS = ("want me to ", "would you like me to ", "do you want me to ", "should i ", "shall i ",
                  "if you want, i can ", "if you'd like, i can ", "i can also ")
# A step the agent defers: it says it will do it, and when.
DEFERRED_OPENINGS = ("i'll ", "i will ", "we'll ", "we will ")
DEFERRED_WHEN = (" once ", " when ", " after ", " later", " next time", " afterwards", " in a follow-up")
# Headings whose bullets are work left for later.
FOLLOW_UP_HEADINGS = ("next step", "follow-up", "follow up", "followup", "remaining", "todo", "to do",
                      "open question", "open item", "future", "what happens next", "not done", "left to do",
                      "deferred", "later", "out of scope", "known limitation")
# Words of a report that a check passed (the agent's own account of its latest verification).
VERIFIED_WORDS = ("tests pass", "tests passed", "test passes", "tests are passing", "all pass", "all passing",
                  "lint is clean", "linter is clean", "lint passes", "lint passed", "no lint errors",
                  "0 issues", "build succeeds", "build passes", "builds cleanly", "typecheck passes",
                  "type check passes", "coverage is", "coverage at", "% coverage")
# A sentence announcing a check ("Now let's run the tests to make sure they all pass:") reports none.
INTENT_OPENINGS = ("let me", "let's", "now let", "now i'll", "i'll", "i will", "next,", "to make sure", "make sure",
                   "we need", "need to", "then ")
MIN_CHARS, MAX_CHARS = 12, 300


@dataclass(frozen=True)
class FollowUp:
    """A follow-up the agent listed (`kind` FOLLOW_UP) or its report of a check (`kind` VERIFIED),
    verbatim, with the message it was said in."""

    kind: str
    text: str
    message_id: str
    index: int


def follow_up_kind(text: str, heading: str, bullet: bool) -> str | None:
    """FOLLOW_UP, VERIFIED or None for one sentence or bullet of the agent's prose."""
    low = " ".join(text.split()).casefold()
    if len(low) < MIN_CHARS:
        return None
    if low.startswith(OFFER_OPENINGS):
        return FOLLOW_UP
    if low.startswith(DEFERRED_OPENINGS) and any(w in f"{low} " for w in DEFERRED_WHEN):
        return FOLLOW_UP
    if bullet and any(h in heading for h in FOLLOW_UP_HEADINGS):
        return FOLLOW_UP
    if any(w in low for w in VERIFIED_WORDS) and not low.startswith(INTENT_OPENINGS) and not low.endswith((":", "?")):
        return VERIFIED
    return None


def follow_ups(messages: Sequence[Message]) -> list[FollowUp]:
    """The agent's follow-ups and verification reports, oldest first, each text once per message."""
    out: list[FollowUp] = []
    for i, m in enumerate(messages):
        if m.role != "assistant" or m.origin is not Origin.CONVERSATION or not m.text.strip():
            continue
        seen: set[str] = set()
        for unit in units(m.text):
            kind = follow_up_kind(unit.text, unit.heading, unit.bullet)
            if kind is None or unit.text in seen:
                continue
            seen.add(unit.text)
            out.append(FollowUp(kind, trim(" ".join(unit.text.split()), MAX_CHARS), m.id, i))
    return out
