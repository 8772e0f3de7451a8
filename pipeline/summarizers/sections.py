"""The shape of a structured summary: its title, section headings, and how to read one back.

Shared by the summarizer that writes it, the LLM prompt that asks for the same sections, and the
ledger, which imports what an earlier worksurface summary carried when the history behind it is gone
(a file compacted before, a view fed back)."""

from __future__ import annotations

import re

TITLE = "# Summary of the earlier conversation (structured)"
ACTIVE_REQUEST = "Active request"
USER_MESSAGES = "User messages"
FILES = "Files and artifacts"
ERRORS = "Errors and fixes"
DECISIONS = "Decisions and standing constraints"
TRIED = "Tried and excluded approaches"
PROGRESS = "Progress"
CURRENT_WORK = "Current work"
NEXT_STEP = "Next step (advisory: confirm with the user or the latest request before acting)"
IDENTIFIERS = "Identifiers"
HEADINGS = (ACTIVE_REQUEST, USER_MESSAGES, FILES, ERRORS, DECISIONS, TRIED, PROGRESS, CURRENT_WORK,
            NEXT_STEP, IDENTIFIERS)
# The section a summarizing model writes beside the structured ones (summarizers/chat_model.py).
NARRATIVE = "Narrative (written by the summarizing model)"
# Every section a summary may hold, as `split_sections` reads them.
KNOWN_HEADINGS = HEADINGS + (NARRATIVE,)
# Sections whose items describe the moment of the compaction, not standing state: never carried.
TRANSIENT_SECTIONS = (CURRENT_WORK, NEXT_STEP, NARRATIVE)

FIRST_REQUEST_LABEL = "First request of the session (verbatim):"
LATEST_REQUEST_LABEL = "Latest user request (verbatim"
USER_ENTRY_RE = re.compile(r"^\[(\d+)(, [^\]\n]+)?\] ", re.M)
LABEL_STOP_RE = re.compile(r"\n(?:First request of the session|Newer user messages|- Task text read|Earlier summary)")
# Claude Code's compaction summary opens with this section; its first line says what was asked.
CLAUDE_CODE_PRIMARY_RE = re.compile(r"Primary Request and Intent:\**\s*\n?(.+)")


def split_sections(text: str) -> dict[str, str]:
    """The body of each known section of a rendered summary."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## ") and line[3:].strip() in KNOWN_HEADINGS:
            current = out.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return {h: "\n".join(lines).strip() for h, lines in out.items()}


def user_entries(body: str) -> list[str]:
    """The messages of a rendered User messages section, in the order shown (newest first)."""
    starts = list(USER_ENTRY_RE.finditer(body))
    return [body[m.end(): starts[i + 1].start() if i + 1 < len(starts) else len(body)].strip()
            for i, m in enumerate(starts)]


def after_label(body: str, label: str) -> str | None:
    """The verbatim text after a label line of the Active request section, up to the next item."""
    at = body.find(label)
    if at < 0:
        return None
    rest = body[at:].split("\n", 1)
    if len(rest) < 2:
        return None
    stop = LABEL_STOP_RE.search(rest[1])
    return rest[1][: stop.start()].strip() if stop else rest[1].strip()


def summary_request(text: str) -> str | None:
    """The first request a compaction summary quotes (worksurface's structured summary, or Claude
    Code's "Primary Request and Intent" section), its first non-blank line stripped of list marks;
    None when it quotes none. The status bar's goal behind a compaction the transcript no longer holds."""
    quoted: str | None = None
    start = text.find(TITLE)
    if start >= 0:
        active = split_sections(text[start:]).get(ACTIVE_REQUEST, "")
        # The first request is quoted under its own label only when a later one differs from it.
        quoted = after_label(active, FIRST_REQUEST_LABEL) or after_label(active, LATEST_REQUEST_LABEL)
    elif (cc := CLAUDE_CODE_PRIMARY_RE.search(text)) is not None:
        quoted = cc.group(1)
    for line in (quoted or "").splitlines():
        if line.strip():
            return line.strip().lstrip("-* ").strip()
    return None


# The key under which quoted user messages are carried (oldest first), beside the section headings.
USER_QUOTES = "user messages (verbatim)"
CARRIED_GROUP = "Carried from the earlier summary:"


def carried_lines(summary_text: str) -> dict[str, list[str]]:
    """What an earlier worksurface summary carried, by section: quoted user messages verbatim
    (oldest first) and the other sections' items as the lines they were ({} for any other text).
    Used only for history no longer available (a file compacted before, a view fed back)."""
    start = summary_text.find(TITLE)
    if start < 0:
        return {}
    sections = split_sections(summary_text[start:])
    active = sections.get(ACTIVE_REQUEST, "")
    quoted = [after_label(active, FIRST_REQUEST_LABEL), *reversed(user_entries(sections.get(USER_MESSAGES, ""))),
              after_label(active, LATEST_REQUEST_LABEL)]
    out: dict[str, list[str]] = {USER_QUOTES: [q for q in quoted if q]}
    for heading, body in sections.items():
        if heading in (ACTIVE_REQUEST, USER_MESSAGES) or heading in TRANSIENT_SECTIONS:
            continue
        # Identifiers render inline ("commits: a; b"); every other section lists items as "- ...".
        lines = [ln.strip() for ln in body.splitlines()
                 if ln.startswith("- ") or (heading == IDENTIFIERS and ": " in ln)]
        if lines:
            out[heading] = lines
    return {k: v for k, v in out.items() if v}
