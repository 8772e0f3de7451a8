"""Retry policy for summarizer HTTP calls: which failures are transient and how long to wait.

Transient: HTTP 429, 5xx, timeouts and connection errors. A server's Retry-After (seconds or an HTTP
date; OpenAI's `retry-after-ms` too) is honoured up to a cap; otherwise exponential backoff with
jitter. The sleep function is injectable so tests can record the waits instead of sleeping.
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Mapping, TypeVar

from tenacity import (RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt,
                      wait_exponential_jitter)

T = TypeVar("T")

# A Retry-After past this is not worth blocking an agent's turn for: the fallback summarizer is
# seconds away, so wait at most this long and let the retry budget decide.
RETRY_AFTER_CAP_SECONDS = 60.0
# Backoff without a server hint: 1 s, 2 s, 4 s ... up to 30 s, plus up to 1 s of jitter so that
# many clients rate-limited together do not retry in lockstep.
BACKOFF_INITIAL_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0
BACKOFF_JITTER_SECONDS = 1.0


class TransientError(Exception):
    """A failure worth retrying; `retry_after` is the server's requested wait, if it gave one."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def parse_retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds the server asks to wait, from `retry-after-ms`, or `Retry-After` as seconds or an
    HTTP date; None when absent or unreadable."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


@dataclass
class RetryPolicy:
    """How many times and how long to retry transient failures; `sleep` is what waiting calls."""

    max_retries: int = 4
    retry_after_cap: float = RETRY_AFTER_CAP_SECONDS
    backoff_initial: float = BACKOFF_INITIAL_SECONDS
    backoff_max: float = BACKOFF_MAX_SECONDS
    jitter: float = BACKOFF_JITTER_SECONDS
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def run(self, call: Callable[[], T], log: list[dict[str, object]]) -> T:
        """Run `call`, retrying TransientError; each wait is appended to `log` as
        {"reason", "wait"}. The last TransientError is re-raised when the retries are spent."""
        backoff = wait_exponential_jitter(initial=self.backoff_initial, max=self.backoff_max,
                                          jitter=self.jitter)

        def wait(state: RetryCallState) -> float:
            hinted = _exception(state).retry_after
            return min(hinted, self.retry_after_cap) if hinted is not None else backoff(state)

        def record(state: RetryCallState) -> None:  # only for waits that really happen
            exc = _exception(state)
            seconds = state.next_action.sleep if state.next_action else 0.0
            log.append({"reason": exc.reason, "wait": round(seconds, 3),
                        "server_hint": exc.retry_after is not None})

        retrying = Retrying(stop=stop_after_attempt(self.max_retries + 1), wait=wait,
                            retry=retry_if_exception_type(TransientError), sleep=self.sleep,
                            before_sleep=record, reraise=True)
        return retrying(call)


def _exception(state: RetryCallState) -> TransientError:
    """The TransientError of the failed attempt (retry_if_exception_type admits no other)."""
    exc = state.outcome.exception() if state.outcome else None
    assert isinstance(exc, TransientError)
    return exc
