"""A summarizer that falls back to another when the first fails (after its own retries).

The usual pair is `llm` then `structured`: the model's summary when it can be had, and a
deterministic one otherwise, with the failure recorded in the summary's details for the report.
"""

from __future__ import annotations

from dataclasses import replace

from ..core.errors import SummarizerError
from ..core.tokens import TokenCounter
from .base import Summarizer, Summary, SummaryRequest


class FallbackSummarizer:
    """Runs `primary`; on SummarizerError, or a summary over the budget, runs `fallback` (the
    structured summarizer by default) and marks the result `details["fallback"] = True` with the
    error. A failing fallback's SummarizerError propagates."""

    def __init__(self, primary: Summarizer, fallback: Summarizer | None = None) -> None:
        if fallback is None:
            from .structured import StructuredSummarizer  # only loaded when it is needed
            fallback = StructuredSummarizer()
        self.primary = primary
        self.fallback = fallback
        self.name = primary.name

    def summarize(self, request: SummaryRequest, counter: TokenCounter) -> Summary:
        try:
            summary = self.primary.summarize(request, counter)
            if summary.tokens <= request.budget_tokens:
                return summary
            error = (f"{self.primary.name} summary has {summary.tokens} tokens, over the budget of "
                     f"{request.budget_tokens}")
        except SummarizerError as exc:
            error = str(exc)
        summary = self.fallback.summarize(request, counter)
        return replace(summary, details={**summary.details, "fallback": True, "error": error,
                                         "primary": self.primary.name})
