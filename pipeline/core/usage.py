"""What the harness measured: the provider-reported context size recorded in a transcript.

worksurface counts text with tiktoken, which misses what the harness adds to every request (system
prompt, tool schemas) and differs from the provider's tokenizer; on the real Claude Code sessions the
count is about 60% of what the API measured. A harness compacts on the measured figure, so replays and
offline compactions anchor on it: `find_usage` gives `(message_id, tokens)` for the newest message that
carries provider usage, which `Session.prepare(usage=...)` and `TokenCounter.estimate` take as is (the
figure stands for everything up to and including that message; later messages are counted).
How measured sizes relate to the count is `calibration.py`; the sizes of a view are `sizes.py`.

Shapes understood (in `message.meta["usage"]`, or inside the adapter's `meta["raw"]` record):
- Anthropic / Claude Code `message.usage`: input_tokens + cache_read_input_tokens +
  cache_creation_input_tokens (+ output_tokens, the anchor message itself), as Claude Code sums it;
- OpenAI chat `usage`: prompt_tokens (+ completion_tokens);
- OpenAI Responses and Codex `token_count` (`last_token_usage` or the usage itself): input_tokens, which
  already includes cached_input_tokens (+ output_tokens);
- OpenHands `tool_call_metadata.model_response.usage` (OpenAI-shaped, from LiteLLM).
SWE-agent records only cumulative `model_stats` (tokens sent over all calls), which is not a context
size, so it gives no anchor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .model import Message

# Meta of a message whose recorded usage measured another context than the one it sits in now (a
# record Claude Code kept across its compaction: it zeroes that usage itself); it anchors no size.
USAGE_VOID = "usage_void"
# Where adapters keep a record's own usage, relative to meta["raw"] (first match wins).
RAW_USAGE_PATHS: tuple[tuple[str, ...], ...] = (
    ("usage",),
    ("message", "usage"),                                    # Claude Code assistant record
    ("tool_call_metadata", "model_response", "usage"),       # OpenHands action event
    ("payload", "info", "last_token_usage"),                 # Codex token_count event
    ("info", "last_token_usage"),
)


def _is_mapping(value: Any) -> bool:
    """isinstance(value, Mapping), a dict and None (most lookups find nothing) answered first: the
    ABC check costs microseconds, and usage is looked up on every message of a transcript several
    times (calibration, status, sizes)."""
    return isinstance(value, dict) or (value is not None and isinstance(value, Mapping))


@dataclass(frozen=True)
class Usage:
    """One measured request: `input` is the context the provider read, `output` what it wrote."""

    input: int
    output: int = 0

    @property
    def context(self) -> int:
        """Context size once the answer is in it: what Claude Code compares with its threshold."""
        return self.input + self.output


def parse_usage(value: Any) -> Usage | None:
    """A provider usage object in any of the understood shapes, or None (not usage, or all zero:
    Claude Code zeroes the usage of messages it relinks after a compaction, which measures nothing)."""
    if not _is_mapping(value):
        return None
    if _is_mapping(value.get("last_token_usage")):  # Codex token_count info
        return parse_usage(value["last_token_usage"])
    if "prompt_tokens" in value:  # OpenAI chat (and LiteLLM): cached tokens are part of prompt_tokens
        usage = Usage(_int(value.get("prompt_tokens")), _int(value.get("completion_tokens")))
    elif "input_tokens" in value:
        input_tokens = _int(value.get("input_tokens"))
        if "cache_read_input_tokens" in value or "cache_creation_input_tokens" in value:
            # Anthropic: cache reads and writes are counted apart from input_tokens.
            input_tokens += _int(value.get("cache_read_input_tokens")) + _int(value.get("cache_creation_input_tokens"))
        # OpenAI Responses / Codex: cached_input_tokens is a part of input_tokens, never added.
        usage = Usage(input_tokens, _int(value.get("output_tokens")))
    else:
        return None
    return usage if usage.context > 0 else None


def message_usage(message: Message) -> Usage | None:
    """The usage recorded on one message (an assistant turn's request), if any; none for a message
    whose usage measured another context (meta USAGE_VOID)."""
    if message.meta.get(USAGE_VOID):
        return None
    found = parse_usage(message.meta.get("usage"))
    if found is not None:
        return found
    raw = message.meta.get("raw")
    if raw is None:
        return None
    for path in RAW_USAGE_PATHS:
        value: Any = raw
        for key in path:
            value = value.get(key) if _is_mapping(value) else None
            if value is None:
                break
        found = parse_usage(value) if value is not None else None
        if found is not None:
            return found
    return None


def find_usage(messages: Sequence[Message]) -> tuple[str, int] | None:
    """`(message_id, tokens)` for the newest message with measured usage, tokens covering the
    context up to and including that message; None when the transcript records none."""
    for message in reversed(messages):
        usage = message_usage(message)
        if usage is not None:
            return message.id, usage.context
    return None


def _int(value: Any) -> int:
    # bool is an int subclass; a JSON true is not a token count.
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
