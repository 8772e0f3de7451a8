"""The LLM summarizer's prompt and the handling of what the model writes back.

The model is asked for the structured summarizer's sections (`sections.HEADINGS`) as headings, so
a summary reads the same whichever summarizer wrote it. The user's own messages are never left to
the model: worksurface writes them verbatim into their section, so a paraphrase cannot lose a
constraint. The model may think in an `<analysis>` scratchpad first; only `<summary>` is kept.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..core.errors import SummarizerError
from ..core.model import Image, Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult, is_user_turn
from ..core.tokens import TokenCounter, get_encoding
from .base import SummaryRequest
from .sections import (ACTIVE_REQUEST, CURRENT_WORK, DECISIONS, ERRORS, FILES, HEADINGS, IDENTIFIERS,
                       NEXT_STEP, PROGRESS, TRIED, USER_ENTRY_RE, USER_MESSAGES)

# What the model is told each of the structured summarizer's sections holds.
GUIDE: dict[str, str] = {
    ACTIVE_REQUEST: "what the user currently wants done, precisely, with its acceptance criteria",
    USER_MESSAGES: "leave this section empty: worksurface inserts the user's messages verbatim",
    FILES: "each file or artifact touched: path, whether read / edited / created, what it holds now",
    ERRORS: "each error met, its cause, and the fix that worked (or that none did yet)",
    DECISIONS: "decisions taken and standing constraints the user set, stated exactly",
    TRIED: "approaches tried and excluded, and why, so they are not tried again",
    PROGRESS: "what is done: tests run and their results, todo items and their state",
    CURRENT_WORK: "what was being worked on right before this summary, in detail",
    NEXT_STEP: "the next step in line with the active request",
    IDENTIFIERS: "exact identifiers worth keeping: commit hashes, ids, URLs, versions, commands",
}
TITLE = "# Summary of the earlier conversation"

# Sections cut first when a summary is over budget: what other mechanisms restore goes first (the
# files reinjector re-reads files, the status bar re-derives progress), the user's words go last.
TRIM_ORDER = (IDENTIFIERS, FILES, PROGRESS, ERRORS, NEXT_STEP, CURRENT_WORK, TRIED, DECISIONS,
              USER_MESSAGES, ACTIVE_REQUEST)
TRIM_MARKER = "[... trimmed to fit the summary budget]"
# Tokenization is not additive across a cut; aim this far under the budget so one pass suffices.
TRIM_SLACK_TOKENS = 8

# A reply that starts like this is an error the model or a proxy echoed, not a summary.
ERROR_PREFIXES = ("api error", "error:", "prompt is too long", "request failed",
                  "internal server error", "rate limit", "{\"error\"", "i'm sorry", "i cannot",
                  "i can't", "as an ai")

_HEADING_RE = re.compile(r"^\s{0,3}#{1,4}\s+(.+?)\s*#*\s*$")
_ANALYSIS_RE = re.compile(r"<analysis>.*?(?:</analysis>|(?=<summary>)|$)", re.DOTALL | re.IGNORECASE)
_OMITTED_RE = re.compile(r"\n?\(\d+ older user messages not shown\)\s*$")
_SUMMARY_RE = re.compile(r"<summary>(.*?)(?:</summary>|$)", re.DOTALL | re.IGNORECASE)

SYSTEM_PROMPT = """\
You summarize a coding agent's conversation so the agent can keep working after the older messages \
leave its context. The summary replaces those messages: anything it does not say is forgotten. \
Be specific: exact file paths, commands, error messages, names and numbers. Do not call tools.

First think in <analysis>...</analysis> (it is discarded), then write the summary inside \
<summary>...</summary> with exactly these markdown headings, in this order:
{sections}
"""


def build_prompt(messages: Sequence[Message], request: SummaryRequest) -> tuple[str, str]:
    """(system prompt, user prompt) asking for a summary of `messages`."""
    sections = "\n".join(f"## {h}\n({GUIDE[h]})" for h in HEADINGS)
    system = SYSTEM_PROMPT.format(sections=sections)
    parts = ["Summarize this conversation.", "", "<conversation>", render_transcript(messages),
             "</conversation>"]
    if request.tail:
        parts += ["", f"The newest {len(request.tail)} messages stay in context after your summary; "
                      "do not repeat them."]
    parts += ["", f"Keep the summary under about {request.budget_tokens} tokens."]
    if request.instructions and request.instructions.strip():
        parts += ["", "Additional instructions from the user:", request.instructions.strip()]
    return system, "\n".join(parts)


def render_transcript(messages: Sequence[Message]) -> str:
    """The messages as labelled plain text. Thinking is left out: it is the model's scratch work,
    often signed or redacted, and the summary needs the conclusions that follow it."""
    out: list[str] = []
    for m in messages:
        for b in m.blocks:
            if isinstance(b, Text) and b.text:
                out.append(f"[{m.role}] {b.text}")
            elif isinstance(b, ToolCall):
                out.append(f"[{m.role} calls tool {b.name} ({b.id})] {b.input_json}")
            elif isinstance(b, ToolResult):
                status = "error" if b.is_error else "result"
                images = f" [+{len(b.images)} image(s)]" if b.images else ""
                out.append(f"[tool {status} for {b.call_id}] {b.content}{images}")
            elif isinstance(b, Image):
                out.append(f"[{m.role} image {b.media_type}]")
            elif isinstance(b, Opaque):
                out.append(f"[{m.role}] {b.json_text}")
            elif not isinstance(b, Thinking):
                raise TypeError(f"not a block: {b!r}")
    return "\n\n".join(out)


def extract_summary(raw: str) -> str:
    """The summary inside a model reply: the scratchpad removed, the `<summary>` content if tagged.
    An empty or error-looking reply raises SummarizerError."""
    text = _ANALYSIS_RE.sub("", raw)
    tagged = _SUMMARY_RE.search(text)
    text = (tagged.group(1) if tagged else text).strip()
    if not text:
        raise SummarizerError("the model returned an empty summary")
    if text.lower().startswith(ERROR_PREFIXES):
        raise SummarizerError(f"the model returned an error instead of a summary: {text[:200]!r}")
    return text


def user_messages_section(messages: Sequence[Message], budget: int, counter: TokenCounter) -> str:
    """The user's own messages verbatim, newest first, as many as fit in `budget` tokens. Those the
    newest earlier summary in `messages` listed come first, so the list survives compaction after
    compaction."""
    at = next((i for i in range(len(messages) - 1, -1, -1) if _is_summary(messages[i])), None)
    turns = [] if at is None else _carried_user_messages(messages[at].text)
    turns += [m.text for m in messages[0 if at is None else at + 1:] if is_user_turn(m)]
    lines: list[str] = []
    used = 0
    for n, text in enumerate(reversed(turns), 1):
        entry = f"[{n}] {text}"
        cost = counter.text(entry)
        if used + cost > budget:
            lines.append(f"({len(turns) - n + 1} older user messages not shown)")
            break
        lines.append(entry)
        used += cost
    return "\n".join(lines) if lines else "(none)"


def _is_summary(message: Message) -> bool:
    return message.origin is Origin.SUMMARY or bool(message.meta.get("is_compact_summary"))


def _carried_user_messages(summary_text: str) -> list[str]:
    """The entries of an earlier summary's user-messages section, oldest first."""
    body = dict(parse_sections(summary_text)[1]).get(USER_MESSAGES, "")
    starts = list(USER_ENTRY_RE.finditer(body))
    entries = [body[m.end(): starts[i + 1].start() if i + 1 < len(starts) else len(body)]
               for i, m in enumerate(starts)]
    return [e for e in (_OMITTED_RE.sub("", e).strip() for e in reversed(entries)) if e]


def parse_sections(text: str) -> tuple[str, list[tuple[str, str]]]:
    """(text before the first heading, [(heading, body)]). A known heading is recognised by its
    words before any parenthesis ("Next step" for "Next step (advisory: ...)") and canonicalised."""
    canonical = {_heading_key(h): h for h in HEADINGS}
    preamble: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        match = _HEADING_RE.match(line)
        if match:
            title = match.group(1).strip().strip("*").strip()
            sections.append((canonical.get(_heading_key(title), title), []))
        elif sections:
            sections[-1][1].append(line)
        else:
            preamble.append(line)
    return "\n".join(preamble).strip(), [(h, "\n".join(b).strip()) for h, b in sections]


def _heading_key(heading: str) -> str:
    return heading.split("(", 1)[0].strip().lower()


def assemble(model_text: str, user_section: str) -> list[tuple[str, str]]:
    """Every required section in canonical order (missing ones marked), the verbatim user messages
    in theirs, then any extra sections the model added. A reply with no headings at all keeps its
    text under the current-work heading rather than being thrown away."""
    preamble, parsed = parse_sections(model_text)
    found: dict[str, str] = {}
    extras: list[tuple[str, str]] = []
    for heading, body in parsed:
        if heading in HEADINGS:
            found[heading] = f"{found[heading]}\n{body}".strip() if heading in found else body
        elif body:  # an empty extra heading is the model's own title line
            extras.append((heading, body))
    if not parsed:
        found[CURRENT_WORK] = preamble
    found[USER_MESSAGES] = user_section
    return [(h, found.get(h) or "(not reported)") for h in HEADINGS] + extras


def render_sections(sections: Sequence[tuple[str, str]]) -> str:
    return "\n\n".join([TITLE, *(f"## {h}\n{b}" for h, b in sections)])


def fit_to_budget(sections: Sequence[tuple[str, str]], budget: int,
                  counter: TokenCounter) -> tuple[str, list[str]]:
    """Render, cutting section tails (in TRIM_ORDER, extra sections first) until the text fits in
    `budget` tokens. Headings stay. Returns (text, headings of the sections that were cut)."""
    sections = list(sections)
    text = render_sections(sections)
    total = counter.text(text)
    cut: list[str] = []
    index = {h: i for i, (h, _) in enumerate(sections)}
    order = [h for h, _ in sections if h not in TRIM_ORDER] + [h for h in TRIM_ORDER if h in index]
    marker_tokens = counter.text(TRIM_MARKER)
    for heading in order:
        if total <= budget:
            break
        i = index[heading]
        body = sections[i][1]
        keep = counter.text(body) - (total - budget) - marker_tokens - TRIM_SLACK_TOKENS
        sections[i] = (heading, (_head_tokens(body, keep) + "\n" + TRIM_MARKER).lstrip())
        cut.append(heading)
        text = render_sections(sections)
        total = counter.text(text)
    if total > budget:  # the headings alone are over a tiny budget
        text = _head_tokens(text, budget)
    return text, cut


def _head_tokens(text: str, max_tokens: int) -> str:
    """The start of `text` within `max_tokens`: whole lines where possible."""
    if max_tokens <= 0:
        return ""
    enc = get_encoding()
    tokens = enc.encode_ordinary(text)
    if len(tokens) <= max_tokens:
        return text
    head = enc.decode(tokens[:max_tokens])
    if "\n" in head:
        head = head[: head.rindex("\n")]
    return head.rstrip()
