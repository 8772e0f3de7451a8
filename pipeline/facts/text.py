"""Text helpers shared by the fact extractors: hook text, sentence and bullet units, one-line trims.

Facts are kept verbatim, so these helpers only cut text at natural boundaries (a bullet, a sentence);
they never rephrase.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# Claude Code wraps hook and harness notes in these tags inside user messages and tool results.
SYSTEM_REMINDER_RE = re.compile(r"<system-reminder>(.*?)</system-reminder>", re.S)
# The tag that opens one: a text without it holds no reminder (tested before the pattern's scan).
REMINDER_OPEN = "<system-reminder>"
# A bullet or numbered item at the start of a line ("- x", "* x", "• x", "1. x", "2) x").
BULLET_RE = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+(.*\S)\s*$")
# Markdown headings and "Section:" lines introduce the bullets below them.
HEADING_RE = re.compile(r"^\s*(?:#{1,6}\s+(.+?)|([A-Z][A-Za-z /&-]{2,60}):)\s*$")
# A sentence ends at . ! or ? followed by space and a capital, quote, backtick or bracket.
SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[*])")
# A unit longer than this is cut at a word boundary: one rule is never a page of text.
MAX_UNIT_CHARS = 400
# Texts whose units are remembered: one fold splits an assistant message for its findings and again
# for its approaches, and a message waiting for its call's result is read again on the next call.
UNITS_CACHE_SIZE = 256
ELLIPSIS = "…"


@dataclass(frozen=True)
class Unit:
    """One bullet or sentence of a text, with the heading it sits under (lower-cased, or "")."""

    text: str
    heading: str
    bullet: bool


def strip_reminders(text: str) -> str:
    """The text without `<system-reminder>` blocks (hook and harness notes, not the author's words)."""
    return (SYSTEM_REMINDER_RE.sub("", text) if REMINDER_OPEN in text else text).strip()


def reminders(text: str) -> list[str]:
    """The bodies of the `<system-reminder>` blocks in a text, stripped."""
    if REMINDER_OPEN not in text:
        return []
    return [m.group(1).strip() for m in SYSTEM_REMINDER_RE.finditer(text) if m.group(1).strip()]


def trim(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a word boundary, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return ELLIPSIS[:limit]
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS


def one_line(text: str, limit: int = 200) -> str:
    """Whitespace runs collapsed to single spaces, then trimmed."""
    return trim(re.sub(r"\s+", " ", text).strip(), limit)


def units(text: str) -> list[Unit]:
    """Split text into bullets and sentences, each tagged with the heading above it.

    Code fences and table rows are skipped: rules live in prose, and code lines and table cells only
    look like sentences.
    """
    return list(_units(text))


@functools.lru_cache(maxsize=UNITS_CACHE_SIZE)
def _units(text: str) -> tuple[Unit, ...]:
    out: list[Unit] = []
    heading = ""
    paragraph: list[str] = []
    in_fence = False

    def flush() -> None:
        if paragraph:
            joined = " ".join(paragraph)
            for sentence in SENTENCE_SPLIT_RE.split(joined):
                if sentence.strip():
                    out.append(Unit(trim(sentence.strip(), MAX_UNIT_CHARS), heading, False))
            paragraph.clear()

    for line in text.splitlines():
        if line.strip().startswith("```"):
            flush()
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if line.lstrip().startswith("|"):
            flush()  # a table row: cells, not sentences
            continue
        if not line.strip():
            flush()
            continue
        head = HEADING_RE.match(line)
        if head:
            flush()
            heading = (head.group(1) or head.group(2) or "").strip().lower()
            continue
        bullet = BULLET_RE.match(line)
        if bullet:
            flush()
            out.append(Unit(trim(bullet.group(1), MAX_UNIT_CHARS), heading, True))
            continue
        paragraph.append(line.strip())
    flush()
    return tuple(out)


# A harness's header above a command's output (Codex: `Chunk ID: ..`, `Wall time: ..`, `Process exited
# with code 0` or `Process running with session ID N`, `Original token count: ..`, then `Output:`): metadata
# lines, then the output itself.
HEADER_LINE_RE = re.compile(r"^[A-Z][\w ]{1,40}(?::\s*\S.*| with code -?\d+| with session ID \d+)$")
OUTPUT_LABEL = "Output:"
MAX_HEADER_LINES = 8


def output_body(text: str) -> str:
    """A tool output without the header a harness writes above it (see HEADER_LINE_RE), or the text
    as it is when it has no such header."""
    lines = text.split("\n", MAX_HEADER_LINES + 1)
    for n, line in enumerate(lines[:MAX_HEADER_LINES + 1]):
        if line.strip() == OUTPUT_LABEL:
            return "\n".join(lines[n + 1:]) if n and all(HEADER_LINE_RE.match(x.strip()) for x in lines[:n]) else text
    return text
