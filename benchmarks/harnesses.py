"""Naive harnesses whose views the cache-stability section compares with worksurface's.

- `sliding_window`: LangChain `trim_messages` keeping the newest N tokens on every call (plain
  truncation when langchain-core is missing).
- `SummarizeAtThreshold`: the view only grows until it passes the threshold; then everything but the
  last few messages becomes one summary message (worksurface's structured summarizer, so the summary's
  content is as good as worksurface's own), and appending resumes.
"""

from __future__ import annotations

from typing import Sequence

from worksurface.model import Message, Origin, Text
from worksurface.probes.baselines import clean_starts, split_prefix, trim, truncate
from worksurface.summarizers.base import SummaryRequest
from worksurface.summarizers.structured import StructuredSummarizer
from worksurface.tokens import TokenCounter

# "The last few messages": about two steps (call, result, answer) kept verbatim after the summary.
KEEP_LAST = 6
# The same summary budget worksurface's autocompact uses by default.
SUMMARY_TOKENS = 8_000


def sliding_window(live: Sequence[Message], budget: int, counter: TokenCounter) -> list[Message]:
    """The newest messages within `budget` tokens (system prefix kept, no call split from its result)."""
    try:
        return trim(live, budget, counter)
    except ImportError:
        return truncate(live, budget, counter)


class SummarizeAtThreshold:
    """A harness that summarizes only when over `threshold`, then keeps appending."""

    def __init__(self, threshold: int, counter: TokenCounter, keep_last: int = KEEP_LAST,
                 summary_tokens: int = SUMMARY_TOKENS) -> None:
        self.threshold, self.counter = threshold, counter
        self.keep_last, self.summary_tokens = keep_last, summary_tokens
        self.summaries = 0
        self._first_id: str | None = None
        self._summary: Message | None = None
        self._start = 0  # index in the live transcript where the verbatim part begins

    def view(self, live: Sequence[Message]) -> list[Message]:
        prefix, _ = split_prefix(live)
        first = live[len(prefix)].id if len(live) > len(prefix) else None
        if first != self._first_id or self._start > len(live):
            # The harness's own history restarted (its compaction or a rewind): start over.
            self._first_id, self._summary, self._start = first, None, len(prefix)
        view = self._assemble(live, prefix)
        if self.counter.messages(view) > self.threshold:
            self._summarize(live)
            view = self._assemble(live, prefix)
        return view

    def _assemble(self, live: Sequence[Message], prefix: list[Message]) -> list[Message]:
        return prefix + ([self._summary] if self._summary else []) + list(live[self._start:])

    def _summarize(self, live: Sequence[Message]) -> None:
        clean = clean_starts(live)
        cut = max(self._start, len(live) - self.keep_last)
        while cut > self._start and not clean[cut]:
            cut -= 1
        if cut <= self._start:
            return
        earlier = ([self._summary] if self._summary else []) + list(live[self._start:cut])
        request = SummaryRequest(messages=earlier, tail=list(live[cut:]), budget_tokens=self.summary_tokens,
                                 user_messages_tokens=self.summary_tokens // 2)
        text = StructuredSummarizer().summarize(request, self.counter).text
        self.summaries += 1
        self._summary = Message(f"naive-summary-{self.summaries}", "user", (Text(text),), Origin.SUMMARY)
        self._start = cut
