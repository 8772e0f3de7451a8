"""What a chat model's failure means for the summary: worth a retry (rate limits, timeouts, server
errors, lost connections), a prompt over the model's window (drop the oldest rounds and ask again), or
final (a bad request, a bad key): the structured summary is used instead.

Chat models raise their provider SDK's exceptions (openai, anthropic, httpx ...); they are recognised
by their HTTP status and class names rather than imported, so no SDK is a dependency here.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ..core.errors import SummarizerError
from .retry import TransientError, parse_retry_after

# Error texts meaning "the request is over the model's context window" (Anthropic, OpenAI, vLLM and
# other OpenAI-compatible servers); dropping old rounds can fix these, retrying as is cannot.
PROMPT_TOO_LONG_MARKERS = ("prompt is too long", "context_length_exceeded", "maximum context length",
                           "request_too_large", "input is too long", "context window")
PROMPT_TOO_LONG_STATUSES = (400, 413)
# SDK exception classes (by name, anywhere in the class's ancestry) that are worth a retry.
TRANSIENT_NAMES = frozenset({"RateLimitError", "APITimeoutError", "APIConnectionError", "InternalServerError",
                             "ServiceUnavailableError", "OverloadedError", "TimeoutException", "TransportError",
                             "ConnectError", "ReadTimeout"})

# "prompt is too long: 215000 tokens > 200000 maximum" (Anthropic).
_GAP_OVER_RE = re.compile(r"([\d,]+)\s*tokens?\s*>\s*([\d,]+)")
# "maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens" (OpenAI).
_GAP_MAX_RE = re.compile(r"maximum context length is ([\d,]+) tokens.*?(?:resulted in|requested) ([\d,]+)",
                         re.DOTALL)


class PromptTooLong(Exception):
    """The prompt is over the summarizing model's window; `gap` is by how many tokens, when said."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.gap = token_gap(message)


def classify(exc: BaseException, who: str) -> Exception:
    """The exception to raise for a chat model's failure: PromptTooLong, TransientError (with the
    server's Retry-After) or SummarizerError."""
    status = _status(exc)
    message = str(exc) or type(exc).__name__
    if is_prompt_too_long(status, message):
        return PromptTooLong(message)
    names = {cls.__name__ for cls in type(exc).__mro__}
    if (isinstance(exc, (TimeoutError, ConnectionError)) or names & TRANSIENT_NAMES
            or status == 429 or (status is not None and status >= 500)):
        return TransientError(f"{type(exc).__name__}: {message}", _retry_after(exc))
    return SummarizerError(f"{who}: {type(exc).__name__} (not retried): {message}")


def is_prompt_too_long(status: int | None, message: str) -> bool:
    low = message.lower()
    return (status is None or status in PROMPT_TOO_LONG_STATUSES) and any(m in low for m in PROMPT_TOO_LONG_MARKERS)


def token_gap(message: str) -> int | None:
    """How many tokens over the limit the request was, when the error message says."""
    over = _GAP_OVER_RE.search(message)
    if over:
        return _int(over.group(1)) - _int(over.group(2))
    maxed = _GAP_MAX_RE.search(message)
    if maxed:
        return _int(maxed.group(2)) - _int(maxed.group(1))
    return None


def _status(exc: BaseException) -> int | None:
    """The HTTP status an SDK exception carries (`status_code`, or its response's)."""
    for value in (getattr(exc, "status_code", None), getattr(getattr(exc, "response", None), "status_code", None)):
        if isinstance(value, int):
            return value
    return None


def _retry_after(exc: BaseException) -> float | None:
    headers: Any = getattr(getattr(exc, "response", None), "headers", None)
    return parse_retry_after(headers) if isinstance(headers, Mapping) or hasattr(headers, "get") else None


def _int(digits: str) -> int:
    return int(digits.replace(",", ""))
