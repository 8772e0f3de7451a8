"""Baseline context managers that worksurface is priced and compared against on the same replays.

Each is a `Harness`: called with the live transcript before every model call, it returns the view
that harness would send. State that the real harness persists (a summary, cleared ids) is kept in the
object, so one instance follows one replay from its first call to its last.

- `Unmanaged`: the transcript as is (it outgrows the window; the reference point).
- `SummarizeAtThreshold`: Claude Code style; the view grows until it passes the threshold, then
  everything but the last few messages becomes one summary and appending resumes.
- `SlidingWindow`: LangChain `trim_messages` keeping the newest N tokens on every call.
- `ClearToolUses`: LangChain's `ClearToolUsesEdit` (context-editing middleware): when the transcript
  is over `trigger` tokens, every tool result but the newest `keep` shows a placeholder; the edit is
  made on each request, not persisted.
- `OpenCodePrune`: OpenCode's prune: walking back from the newest turn (the last two user turns are
  never touched), tool outputs beyond the newest `protect` tokens are cleared, persistently, once
  they add up to at least `minimum` tokens.
- `ObservationMasking`: tool outputs older than the last 10 agent turns become a placeholder
  (Lindenbauer et al. 2025), then truncation to the threshold.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..core.model import Message, Origin, Text, ToolResult
from ..offline.replay import Harness
from .baselines import clean_starts, mask, split_prefix, trim, truncate
from ..summarizers.base import SummaryRequest
from ..summarizers.structured import StructuredSummarizer
from ..core.tokens import TokenCounter

# "The last few messages": about two steps (call, result, answer) kept verbatim after the summary.
KEEP_LAST = 6
# The same summary budget worksurface's autocompact uses by default.
SUMMARY_TOKENS = 8_000
# LangChain ClearToolUsesEdit's defaults: trigger 100,000 tokens, keep the 3 newest results.
CLEAR_TRIGGER_TOKENS = 100_000
CLEAR_KEEP = 3
# OpenCode's session/compaction.ts: PRUNE_PROTECT 40,000 and PRUNE_MINIMUM 20,000 tokens; its
# placeholder for a compacted tool output.
PRUNE_PROTECT_TOKENS = 40_000
PRUNE_MINIMUM_TOKENS = 20_000
PRUNE_PROTECTED_USER_TURNS = 2
PRUNE_PLACEHOLDER = "[Old tool result content cleared]"


def _clear_placeholder() -> str:
    """LangChain's own placeholder when langchain is installed (the text the real edit sends)."""
    try:
        from langchain.agents.middleware.context_editing import DEFAULT_TOOL_PLACEHOLDER
        return str(DEFAULT_TOOL_PLACEHOLDER)
    except ImportError:
        return "[cleared]"


def _with_results(message: Message, content: dict[str, str]) -> Message:
    blocks = tuple(replace(b, content=content[b.call_id], images=())
                   if isinstance(b, ToolResult) and b.call_id in content else b for b in message.blocks)
    return message.with_blocks(blocks)


class Unmanaged:
    name = "unmanaged transcript"

    def view(self, live: Sequence[Message]) -> list[Message]:
        return list(live)


def sliding_window(live: Sequence[Message], budget: int, counter: TokenCounter) -> list[Message]:
    """The newest messages within `budget` tokens (system prefix kept, no call split from its result)."""
    try:
        return trim(live, budget, counter)
    except ImportError:
        return truncate(live, budget, counter)


class SlidingWindow:
    def __init__(self, budget: int, counter: TokenCounter) -> None:
        self.budget, self.counter = budget, counter
        self.name = f"sliding window ({budget // 1000}k)"

    def view(self, live: Sequence[Message]) -> list[Message]:
        return sliding_window(live, self.budget, self.counter)


class SummarizeAtThreshold:
    """A harness that summarizes only when over `threshold`, then keeps appending."""

    name = "summarize at threshold"

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


class ClearToolUses:
    """LangChain `ClearToolUsesEdit(trigger, keep)` semantics on worksurface messages: over `trigger`
    tokens (the transcript as stored), every tool result but the newest `keep` is replaced by the
    placeholder; `clear_at_least` 0 (the default) clears them all."""

    def __init__(self, counter: TokenCounter, trigger: int = CLEAR_TRIGGER_TOKENS, keep: int = CLEAR_KEEP) -> None:
        self.counter, self.trigger, self.keep = counter, trigger, keep
        self.placeholder = _clear_placeholder()
        self.name = f"LangChain ClearToolUsesEdit ({trigger // 1000}k, keep {keep})"

    def view(self, live: Sequence[Message]) -> list[Message]:
        if self.counter.messages(live) <= self.trigger:
            return list(live)
        results = [r.call_id for m in live for r in m.tool_results]
        cleared = set(results[:-self.keep] if self.keep else results)
        return [_with_results(m, {r.call_id: self.placeholder for r in m.tool_results if r.call_id in cleared})
                if any(r.call_id in cleared for r in m.tool_results) else m for m in live]


class OpenCodePrune:
    """OpenCode's `prune`: persistent clearing of old tool outputs beyond the newest `protect` tokens,
    in batches of at least `minimum` tokens; the walk back stops at an output already cleared."""

    def __init__(self, counter: TokenCounter, protect: int = PRUNE_PROTECT_TOKENS,
                 minimum: int = PRUNE_MINIMUM_TOKENS) -> None:
        self.counter, self.protect, self.minimum = counter, protect, minimum
        self.cleared: set[str] = set()
        self.name = f"OpenCode prune (protect {protect // 1000}k, min {minimum // 1000}k)"

    def view(self, live: Sequence[Message]) -> list[Message]:
        self._prune(live)
        if not self.cleared:
            return list(live)
        return [_with_results(m, {r.call_id: PRUNE_PLACEHOLDER for r in m.tool_results if r.call_id in self.cleared})
                if any(r.call_id in self.cleared for r in m.tool_results) else m for m in live]

    def _prune(self, live: Sequence[Message]) -> None:
        total = pruned = 0
        candidates: list[str] = []
        user_turns = 0
        for m in reversed(live):
            if m.role == "user" and not m.tool_results:
                user_turns += 1
            if user_turns < PRUNE_PROTECTED_USER_TURNS:
                continue
            if m.origin is Origin.SUMMARY:
                break
            stop = False
            for r in reversed(m.tool_results):
                if r.call_id in self.cleared:
                    stop = True
                    break
                size = self.counter.block(r)
                total += size
                if total > self.protect:
                    pruned += size
                    candidates.append(r.call_id)
            if stop:
                break
        if pruned > self.minimum:
            self.cleared.update(candidates)


class ObservationMasking:
    def __init__(self, budget: int, counter: TokenCounter) -> None:
        self.budget, self.counter = budget, counter
        self.name = "observation masking (10 turns)"

    def view(self, live: Sequence[Message]) -> list[Message]:
        return mask(live, self.budget, self.counter)


def default_harnesses(threshold: int, post_compact_target: int, counter: TokenCounter) -> list[Harness]:
    """The baselines every cost comparison runs, each a fresh instance (they keep state per replay)."""
    return [Unmanaged(), SummarizeAtThreshold(threshold, counter), SlidingWindow(post_compact_target, counter),
            ClearToolUses(counter), OpenCodePrune(counter), ObservationMasking(threshold, counter)]
