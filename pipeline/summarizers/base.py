"""The summarizer protocol: anything that turns the messages before a kept tail into summary text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, runtime_checkable

from ..core.model import Message
from ..core.tokens import TokenCounter

if TYPE_CHECKING:
    from ..ledger import Ledger


@dataclass(frozen=True)
class SummaryRequest:
    """What a summarizer gets: the messages to summarize, the kept tail (for context, not to repeat),
    the token budget the summary must fit, the user's custom instructions for a manual compact, user
    text queued while the agent was busy, and the session's ledger (the working state, kept across
    compactions) when the session has one."""

    messages: Sequence[Message]
    tail: Sequence[Message] = ()
    budget_tokens: int = 8_000
    user_messages_tokens: int = 4_000
    instructions: str | None = None
    queued_inputs: Sequence[tuple[str | None, str]] = ()
    ledger: Ledger | None = None
    # Messages of the summarized span kept verbatim right after the summary (the user's one request
    # that opens a trajectory and did not fit): the summary points at them instead of quoting them.
    kept: Sequence[Message] = ()
    # Keeps the whole, unbudgeted summary when the budget leaves items out, and returns how it is
    # fetched back ("artifact <id> ..."), so the summary can say where the rest is (None: nowhere).
    keep_full: Callable[[str], str] | None = None


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
