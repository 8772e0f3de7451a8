"""Pins: content that must survive every compaction verbatim (`pins` in config, `--pin` on the CLI).

A pin is a literal text, or `re:PATTERN` (every match of the pattern in the summarized span is
pinned; the pattern runs on google-re2, in time linear in the span: core.patterns). A compaction
checks each pin against what it keeps (summary, tail, carried context): a pinned snippet the
summarized span held and the kept view would lose is appended verbatim to the summary, within `autocompact.pin_tokens`; what does not fit is reported as not kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

from ..core.escape import escape_quoted
from ..core.patterns import UserPattern, compile_user_pattern
from ..core.model import Message
from ..core.tokens import TokenCounter
from ..summarizers.sections import KNOWN_HEADINGS, TITLE

REGEX_PREFIX = "re:"
PINNED_HEADING = "## Pinned (verbatim)"
# Distinct snippets one `re:` pin may pin in a compaction: the pin budget holds a few thousand tokens,
# and a pattern that matches every word (`re:\\w+`) must not have each of a million words weighed.
MAX_SNIPPETS_PER_PIN = 200


@dataclass
class PinCheck:
    """What a compaction did with its pins: snippets restored into the summary, and those it could not keep."""

    restored: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)


Pin = str | UserPattern


def compile_pins(pins: Iterable[str]) -> list[Pin]:
    """Literal pins as they are, `re:` pins compiled for linear-time matching (a pattern re2 cannot
    compile is a core.patterns.PatternError naming the pin)."""
    out: list[Pin] = []
    for pin in pins:
        if pin.startswith(REGEX_PREFIX):
            out.append(compile_user_pattern(pin[len(REGEX_PREFIX):], source="pin"))
        elif pin.strip():
            out.append(pin)
    return out


def message_text(message: Message) -> str:
    """Text and tool results of a message: a pin may be anything the model saw."""
    return "\n".join([message.text, *(r.content for r in message.tool_results)])


def snippets(pins: Sequence[Pin], span: Sequence[Message]) -> list[str]:
    """The pinned snippets the span holds, in pin order, each once (a pattern's first
    MAX_SNIPPETS_PER_PIN distinct matches)."""
    return list(_found(pins, "\n".join(message_text(m) for m in span), set()))


def _found(pins: Sequence[Pin], text: str, overflowing: set[str]) -> Iterator[str]:
    """The snippets of `snippets`, lazily; the `re:` pins that have more matches go into `overflowing`."""
    seen: set[str] = set()
    for pin in pins:
        if isinstance(pin, str):
            if pin in text and pin not in seen:
                seen.add(pin)
                yield pin
            continue
        distinct = 0
        for hit in pin.matches(text):
            if hit and hit not in seen:
                if distinct == MAX_SNIPPETS_PER_PIN:
                    overflowing.add(REGEX_PREFIX + pin.pattern)
                    break
                seen.add(hit)
                distinct += 1
                yield hit


def check(pins: Sequence[Pin], summarized: Sequence[Message], kept_text: str,
          budget: int, counter: TokenCounter) -> PinCheck:
    """The pinned snippets of `summarized` missing from `kept_text`, split into those restored within
    `budget` tokens (in pin order) and those that did not fit; a pattern with more distinct matches
    than MAX_SNIPPETS_PER_PIN is itself listed as not kept (its further matches were not weighed)."""
    result = PinCheck()
    used = counter.text(PINNED_HEADING) + 2
    overflowing: set[str] = set()
    text = "\n".join(message_text(m) for m in summarized)
    for snippet in _found(pins, text, overflowing):
        if snippet in kept_text:
            continue
        cost = counter.text(snippet) + 2
        if used + cost <= budget:
            result.restored.append(snippet)
            used += cost
        else:
            result.missed.append(snippet)
    result.missed += [f"{pin} (more than {MAX_SNIPPETS_PER_PIN} matches)" for pin in sorted(overflowing)]
    return result


def render(restored: Sequence[str]) -> str:
    """The section appended to the summary: each restored snippet verbatim, in a fenced block."""
    if not restored:
        return ""
    # Quoted text still cannot close a wrapper or pass for a section of the summary (core.escape).
    quoted = (escape_quoted(s, (TITLE.lstrip("# "), *KNOWN_HEADINGS)) for s in restored)
    return "\n\n" + PINNED_HEADING + "\n" + "\n".join(f"```\n{s}\n```" for s in quoted)
