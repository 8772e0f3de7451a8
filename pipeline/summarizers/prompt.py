"""The LLM summarizer's prompt and the handling of what the model writes back.

The structured sections (rendered from the ledger: requests and user messages verbatim, rules,
files, errors, progress, identifiers) stay exactly as the structured summarizer wrote them; the model
is shown them so it does not repeat them, and asked only for what they cannot say: the narrative of
how the work went and why. It may think in an `<analysis>` scratchpad first; only `<narrative>` is kept.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..core.errors import SummarizerError
from ..core.model import Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult
from .base import SummaryRequest

NARRATIVE_TAG = "narrative"
# A reply that starts like this is an error the model or a proxy echoed, not a narrative.
ERROR_PREFIXES = ("api error", "error:", "prompt is too long", "request failed",
                  "internal server error", "rate limit", "{\"error\"", "i'm sorry", "i cannot",
                  "i can't", "as an ai")

_ANALYSIS_RE = re.compile(r"<analysis>.*?(?:</analysis>|(?=<narrative>)|$)", re.DOTALL | re.IGNORECASE)

SYSTEM_PROMPT = """\
You write the narrative part of the summary that replaces a coding agent's older messages once they \
leave its context; anything the summary does not say is forgotten. The structured part (the user's \
requests and messages verbatim, the rules, files, errors, progress and identifiers) is already written \
and is shown to you: do not repeat it. Write what it cannot say: how the work went, in order; what was \
tried and learned and why; the decisions taken and their reasons; where things stand and what was about \
to happen next. Be specific: exact file paths, commands, error messages, names and numbers. Do not call \
tools.

First think in <analysis>...</analysis> (it is discarded), then write the narrative inside \
<narrative>...</narrative>, in short paragraphs, under about {budget} tokens."""


def narrative_prompt(messages: Sequence[Message], request: SummaryRequest, structured: str,
                     budget: int) -> tuple[str, str]:
    """(system prompt, user prompt) asking for the narrative of `messages`, beside `structured`."""
    parts = ["The structured part of the summary (kept as it is):", "<structured-summary>", structured,
             "</structured-summary>", "", "The conversation to narrate:", "<conversation>",
             render_transcript(messages), "</conversation>"]
    if request.tail:
        parts += ["", f"The newest {len(request.tail)} messages stay in context after the summary; "
                      "do not narrate them."]
    if request.instructions and request.instructions.strip():
        parts += ["", "Additional instructions from the user:", request.instructions.strip()]
    return SYSTEM_PROMPT.format(budget=budget), "\n".join(parts)


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


def extract_narrative(raw: str) -> str:
    """The narrative inside a model reply: the scratchpad removed, the `<narrative>` content if
    tagged. An empty or error-looking reply raises SummarizerError."""
    text = _ANALYSIS_RE.sub("", raw)
    tagged = re.search(rf"<{NARRATIVE_TAG}>(.*?)(?:</{NARRATIVE_TAG}>|$)", text, re.DOTALL | re.IGNORECASE)
    text = (tagged.group(1) if tagged else text).strip()
    if not text:
        raise SummarizerError("the model returned an empty narrative")
    if text.lower().startswith(ERROR_PREFIXES):
        raise SummarizerError(f"the model returned an error instead of a narrative: {text[:200]!r}")
    return text
