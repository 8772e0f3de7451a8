"""What the harness measured: the provider-reported context size recorded in a transcript.

worksurface counts text with tiktoken, which misses what the harness adds to every request (system
prompt, tool schemas) and differs from the provider's tokenizer; on the real Claude Code sessions the
count is about 60% of what the API measured. A harness compacts on the measured figure, so replays and
offline compactions anchor on it: `find_usage` gives `(message_id, tokens)` for the newest message that
carries provider usage, which `Session.prepare(usage=...)` and `TokenCounter.estimate` take as is (the
figure stands for everything up to and including that message; later messages are counted).

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

# Where adapters keep a record's own usage, relative to meta["raw"] (first match wins).
RAW_USAGE_PATHS: tuple[tuple[str, ...], ...] = (
    ("usage",),
    ("message", "usage"),                                    # Claude Code assistant record
    ("tool_call_metadata", "model_response", "usage"),       # OpenHands action event
    ("payload", "info", "last_token_usage"),                 # Codex token_count event
    ("info", "last_token_usage"),
)


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
    if not isinstance(value, Mapping):
        return None
    if isinstance(value.get("last_token_usage"), Mapping):  # Codex token_count info
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
    """The usage recorded on one message (an assistant turn's request), if any."""
    found = parse_usage(message.meta.get("usage"))
    if found is not None:
        return found
    raw = message.meta.get("raw")
    for path in RAW_USAGE_PATHS:
        value: Any = raw
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        found = parse_usage(value)
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


def overhead(messages: Sequence[Message], anchor: tuple[str, int] | None, counter: Any) -> int:
    """What the provider measured beyond worksurface's text count at the anchor (system prompt,
    tool schemas, tokenizer difference); 0 without an anchor or when the count is the larger."""
    if anchor is None:
        return 0
    anchor_id, tokens = anchor
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].id == anchor_id:
            return max(0, tokens - counter.messages(messages[: i + 1]))
    return 0


# A fit needs measurements this far apart (in counted tokens) to tell the fixed part (system prompt,
# tool schemas) from the per-token ratio; closer points only give a constant offset.
MIN_FIT_SPREAD = 2_000
# The provider's tokenizer differs from cl100k by a factor; outside these bounds a fit is noise (a
# rewritten usage, a cache anomaly), and the constant offset is used instead.
RATIO_BOUNDS = (0.5, 3.0)


@dataclass(frozen=True)
class Calibration:
    """How the provider's measured size relates to worksurface's count on one transcript:
    measured ~= fixed + ratio * counted. `fixed` is what the harness sends on every request beyond
    the messages (system prompt, tool schemas); `ratio` the tokenizer difference. Fitted on every
    usage the live part records, so a compacted view's size is predicted from its count, not from
    a constant offset taken at the old, much longer context."""

    fixed: int
    ratio: float
    points: int

    def size(self, counted: int) -> int:
        return self.fixed + round(self.ratio * counted)

    def offset(self, counted: int) -> int:
        """What to add to a view's count for its measured size: unlike the constant offset taken at
        the anchor, it shrinks with the view (a compacted view's system prompt and tools stay, its
        tokenizer difference shrinks with its text)."""
        return self.size(counted) - counted


def calibrate(messages: Sequence[Message], counter: Any) -> Calibration | None:
    """Fit `Calibration` to the usage recorded on `messages` (the live part of a transcript); None
    when nothing was measured. One measurement (or points too close together) gives ratio 1 and
    the offset at the newest one."""
    points: list[tuple[int, int]] = []
    running = 0
    for message in messages:
        running += counter.message(message)
        usage = message_usage(message)
        if usage is not None:
            if points and points[-1][1] == usage.context:
                points[-1] = (running, usage.context)  # one API message split over several records
            else:
                points.append((running, usage.context))
    if not points:
        return None
    last_counted, last_measured = points[-1]
    constant = Calibration(max(0, last_measured - last_counted), 1.0, len(points))
    xs = [x for x, _ in points]
    if len(points) < 2 or max(xs) - min(xs) < MIN_FIT_SPREAD:
        return constant
    mean_x = sum(xs) / len(xs)
    mean_y = sum(y for _, y in points) / len(points)
    var = sum((x - mean_x) ** 2 for x in xs)
    ratio = sum((x - mean_x) * (y - mean_y) for x, y in points) / var
    if not RATIO_BOUNDS[0] <= ratio <= RATIO_BOUNDS[1]:
        return constant
    # Through the newest measurement: the figure the harness compared with its threshold last.
    fixed = round(last_measured - ratio * last_counted)
    return Calibration(max(0, fixed), ratio, len(points)) if fixed >= 0 else constant


@dataclass(frozen=True)
class Figures:
    """Both sizes of a view: worksurface's text count, and that count anchored on the measured usage."""

    counted: int
    anchored: int

    def to_json(self) -> dict[str, int]:
        return {"counted": self.counted, "anchored": self.anchored}


def view_figures(view: Sequence[Message], live: Sequence[Message], anchor: tuple[str, int] | None,
                 counter: Any) -> Figures:
    """The sizes of `view`, a view of the transcript `live`: anchored as `Session.prepare` anchors
    (the measured figure plus the count of later messages) while the view still holds the anchor
    message with everything before it unchanged, else from the fitted `Calibration` (after a
    compaction the measured figure no longer describes what is sent)."""
    counted = counter.messages(view)
    if anchor is None:
        return Figures(counted, counted)
    index = next((i for i in range(len(view) - 1, -1, -1) if view[i].id == anchor[0]), None)
    if index is not None and list(view[: index + 1]) == list(live[: index + 1]):
        return Figures(counted, counter.estimate(view, anchor))
    fitted = calibrate(live, counter)
    return Figures(counted, fitted.size(counted) if fitted else counted)


def usage_report(live: Sequence[Message], view: Sequence[Message], anchor: tuple[str, int] | None,
                 counter: Any) -> dict[str, Any]:
    """What a report shows about sizes: the anchor used (None with --no-usage or when nothing was
    measured), and the counted and anchored tokens before and after."""
    return {"anchor": None if anchor is None else {"message": anchor[0], "tokens": anchor[1]},
            "before": view_figures(live, live, anchor, counter).to_json(),
            "after": view_figures(view, live, anchor, counter).to_json()}


def call_usage(live: Sequence[Message], previous_view: Sequence[Message], counter: Any) -> tuple[str, int] | None:
    """The usage a replayed call passes to `prepare`: the size of the previous call's view as the
    provider would have measured it (`view_figures`), anchored at that view's last message. While
    worksurface has changed nothing the transcript's own measurement holds; after a compaction the
    measured figure describes the original harness's context, not worksurface's view, so the size
    comes from the calibration. None when the transcript records no usage."""
    anchor = find_usage(live)
    if anchor is None or not previous_view:
        return anchor
    return previous_view[-1].id, view_figures(previous_view, live, anchor, counter).anchored


def _int(value: Any) -> int:
    # bool is an int subclass; a JSON true is not a token count.
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
