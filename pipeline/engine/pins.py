"""Pins: content that must survive every compaction verbatim (`pins` in config, `--pin` on the CLI).

A pin is a literal text, or `re:PATTERN` (every match of the pattern in the summarized span is
pinned). A compaction checks each pin against what it keeps (summary, tail, carried context): a
pinned snippet the summarized span held and the kept view would lose is appended verbatim to the
summary, within `autocompact.pin_tokens`; what does not fit is reported as not kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..core.errors import ConfigError
from ..core.escape import escape_quoted
from ..core.model import Message
from ..core.tokens import TokenCounter
from ..summarizers.sections import KNOWN_HEADINGS, TITLE

REGEX_PREFIX = "re:"
PINNED_HEADING = "## Pinned (verbatim)"


@dataclass
class PinCheck:
    """What a compaction did with its pins: snippets restored into the summary, and those it could not keep."""

    restored: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)


def compile_pins(pins: Iterable[str]) -> list[str | re.Pattern[str]]:
    """Literal pins as they are, `re:` pins compiled (a bad pattern is a ConfigError naming it)."""
    out: list[str | re.Pattern[str]] = []
    for pin in pins:
        if pin.startswith(REGEX_PREFIX):
            try:
                out.append(re.compile(pin[len(REGEX_PREFIX):], re.M))
            except re.error as exc:
                raise ConfigError(f"pin {pin!r}: not a valid regular expression: {exc}") from None
        elif pin.strip():
            out.append(pin)
    return out


def message_text(message: Message) -> str:
    """Text and tool results of a message: a pin may be anything the model saw."""
    return "\n".join([message.text, *(r.content for r in message.tool_results)])


def snippets(pins: Sequence[str | re.Pattern[str]], span: Sequence[Message]) -> list[str]:
    """The pinned snippets the span holds, in pin order, each once."""
    text = "\n".join(message_text(m) for m in span)
    found: list[str] = []
    for pin in pins:
        hits = [pin] if isinstance(pin, str) and pin in text else (
            [m.group(0) for m in pin.finditer(text) if m.group(0)] if not isinstance(pin, str) else [])
        found += [h for h in hits if h not in found]
    return found


def check(pins: Sequence[str | re.Pattern[str]], summarized: Sequence[Message], kept_text: str,
          budget: int, counter: TokenCounter) -> PinCheck:
    """The pinned snippets of `summarized` missing from `kept_text`, split into those restored within
    `budget` tokens (in pin order) and those that did not fit."""
    result = PinCheck()
    used = counter.text(PINNED_HEADING) + 2
    for snippet in snippets(pins, summarized):
        if snippet in kept_text:
            continue
        cost = counter.text(snippet) + 2
        if used + cost <= budget:
            result.restored.append(snippet)
            used += cost
        else:
            result.missed.append(snippet)
    return result


def render(restored: Sequence[str]) -> str:
    """The section appended to the summary: each restored snippet verbatim, in a fenced block."""
    if not restored:
        return ""
    # Quoted text still cannot close a wrapper or pass for a section of the summary (core.escape).
    quoted = (escape_quoted(s, (TITLE.lstrip("# "), *KNOWN_HEADINGS)) for s in restored)
    return "\n\n" + PINNED_HEADING + "\n" + "\n".join(f"```\n{s}\n```" for s in quoted)
