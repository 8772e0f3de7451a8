"""Baselines worksurface is compared against, each given the same token budget as its view.

Every baseline is `(messages, budget_tokens, counter) -> list[Message]`: it keeps the leading system
messages, never separates a tool call from its result, and returns at most `budget_tokens` tokens
unless the system prefix alone is larger (then the prefix alone).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Sequence

from ..core.model import Message, Text, ToolResult
from ..core.tokens import PER_MESSAGE_OVERHEAD, TokenCounter, truncate_to_tokens
from ..facts.requests import is_user_message

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

Baseline = Callable[[Sequence[Message], int, TokenCounter], list[Message]]

# Observation masking as studied for SWE agents (Lindenbauer et al., "The Complexity Trap", 2025):
# tool outputs older than the last 10 agent turns are replaced by a placeholder; 10 is their setting.
MASK_KEEP_TURNS = 10
MASK_PLACEHOLDER = "[Old tool output omitted: {lines} lines]"


def split_prefix(messages: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """(leading system messages, the rest)."""
    n = 0
    while n < len(messages) and messages[n].role == "system":
        n += 1
    return list(messages[:n]), list(messages[n:])


def clean_starts(messages: Sequence[Message]) -> list[bool]:
    """For each index i, whether starting a view at i separates no call from its result (no call
    made before i has its result at i or later)."""
    result_at = {r.call_id: i for i, m in enumerate(messages) for r in m.tool_results}
    open_until = [-1] * (len(messages) + 1)  # the furthest result index of any call made before i
    furthest = -1
    for i, m in enumerate(messages):
        open_until[i] = furthest
        for c in m.tool_calls:
            furthest = max(furthest, result_at.get(c.id, -1))
    open_until[len(messages)] = furthest
    return [open_until[i] < i for i in range(len(messages) + 1)]


def truncate(messages: Sequence[Message], budget_tokens: int, counter: TokenCounter) -> list[Message]:
    """The system prefix plus the longest run of newest messages that fits, cut only where no tool
    call loses its result."""
    prefix, rest = split_prefix(messages)
    room = budget_tokens - counter.messages(prefix)
    clean = clean_starts(rest)
    used, best = 0, len(rest)
    for i in range(len(rest) - 1, -1, -1):
        used += counter.message(rest[i])
        if used > room:
            break
        if clean[i]:
            best = i
    return prefix + rest[best:]


def mask(messages: Sequence[Message], budget_tokens: int, counter: TokenCounter) -> list[Message]:
    """Observation masking: tool results before the last `MASK_KEEP_TURNS` assistant turns become a
    one-line placeholder (calls stay, so pairs stay intact), then truncation if still over budget."""
    turns = [i for i, m in enumerate(messages) if m.role == "assistant"]
    horizon = turns[-MASK_KEEP_TURNS] if len(turns) >= MASK_KEEP_TURNS else 0
    masked = [_masked(m) if i < horizon and m.tool_results else m for i, m in enumerate(messages)]
    return truncate(masked, budget_tokens, counter)


def _masked(message: Message) -> Message:
    blocks = tuple(
        replace(b, content=MASK_PLACEHOLDER.format(lines=b.content.count("\n") + 1), images=())
        if isinstance(b, ToolResult) else b
        for b in message.blocks)
    return message.with_blocks(blocks)


def trim(messages: Sequence[Message], budget_tokens: int, counter: TokenCounter) -> list[Message]:
    """LangChain's `trim_messages` (strategy "last", whole messages, worksurface's token counter).

    Each message maps to one LangChain message of the matching type, so the trimmed list maps back to
    the original messages. The view may start on a human or an AI message, never on a tool result; if
    that start still separates a call from its result (parallel calls recorded as separate assistant
    messages), it moves forward to the next clean start. Raises ImportError without langchain-core."""
    from langchain_core.messages import (AIMessage, HumanMessage, SystemMessage, ToolMessage,
                                         trim_messages)

    prefix, rest = split_prefix(messages)

    # The LangChain id is the position in `rest`: transcript ids need not be unique.
    def to_langchain(i: int, m: Message) -> BaseMessage:
        if m.role == "assistant":
            return AIMessage(content=m.text, id=str(i))
        if m.tool_results:
            return ToolMessage(content=m.text, tool_call_id=m.tool_results[0].call_id, id=str(i))
        if m.role == "system":
            return SystemMessage(content=m.text, id=str(i))
        return HumanMessage(content=m.text, id=str(i))

    def position(lc: BaseMessage) -> int:
        if lc.id is None:
            raise ValueError("trim_messages returned a message without the id it was given")
        return int(lc.id)

    def count(lc_messages: Sequence[BaseMessage]) -> int:
        return counter.messages(rest[position(lc)] for lc in lc_messages)

    room = max(0, budget_tokens - counter.messages(prefix))
    kept = trim_messages([to_langchain(i, m) for i, m in enumerate(rest)], max_tokens=room,
                         token_counter=count, strategy="last", start_on=("human", "ai"),
                         allow_partial=False)
    start = position(kept[0]) if kept else len(rest)
    clean = clean_starts(rest)
    while not clean[start]:
        start += 1
    return prefix + rest[start:]


def codex(messages: Sequence[Message], budget_tokens: int, counter: TokenCounter) -> list[Message]:
    """Codex's compaction without the summary its model writes: the system prefix and the user's own
    messages verbatim, newest first, up to the budget (Codex keeps the most recent 20,000 tokens of
    them), in their original order. The message that does not fit whole is cut to what is left, as
    Codex cuts it; older ones are dropped."""
    prefix, rest = split_prefix(messages)
    room = budget_tokens - counter.messages(prefix)
    kept: list[Message] = []
    for m in reversed([m for m in rest if is_user_message(m)]):
        cost = counter.message(m)
        if cost > room:
            cut = truncate_to_tokens(m.text, room - PER_MESSAGE_OVERHEAD)
            if cut:
                kept.append(m.with_blocks((Text(cut),)))
            break
        kept.append(m)
        room -= cost
    return prefix + kept[::-1]


BASELINES: dict[str, Baseline] = {"truncate": truncate, "mask": mask, "trim": trim, "codex": codex}
