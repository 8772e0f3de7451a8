"""The summarizer protocol: anything that turns the messages before a kept tail into summary text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

from ..model import Message
from ..tokens import TokenCounter


@dataclass(frozen=True)
class SummaryRequest:
    """What a summarizer gets: the messages to summarize, the kept tail (for context, not to repeat),
    the token budget the summary must fit, and the user's custom instructions for a manual compact."""

    messages: Sequence[Message]
    tail: Sequence[Message] = ()
    budget_tokens: int = 8_000
    user_messages_tokens: int = 4_000
    instructions: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Summary:
    text: str
    summarizer: str
    tokens: int
    details: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Summarizer(Protocol):
    name: str

    def summarize(self, request: SummaryRequest, counter: TokenCounter) -> Summary:
        """Return a summary whose `tokens` <= request.budget_tokens, or raise SummarizerError."""
        ...
