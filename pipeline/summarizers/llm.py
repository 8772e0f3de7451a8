"""The `llm` summarizer: a model writes the summary, over OpenAI-compatible or Anthropic HTTP.

Transient failures are retried (see retry.py). A request over the summarizing model's own window is
shrunk by dropping the oldest whole rounds, at most MAX_ROUND_DROPS times; the user's messages of
the dropped rounds still reach the summary verbatim, since worksurface writes that section itself.
Any final failure raises SummarizerError; `FallbackSummarizer` turns that into a structured summary.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any, Callable, Mapping, Sequence

import httpx

from ..core.errors import SummarizerError
from ..core.model import Message, is_user_turn
from ..core.tokens import PER_MESSAGE_OVERHEAD, TokenCounter
from ..core.view import rounds as steps
from .base import Summary, SummaryRequest
from .prompt import (assemble, build_prompt, extract_summary, fit_to_budget, render_sections,
                     user_messages_section)
from .providers import error_message, get_provider, is_prompt_too_long, token_gap
from .retry import RETRY_AFTER_CAP_SECONDS, RetryPolicy, TransientError, parse_retry_after

# Dropping the oldest whole rounds to fit the summarizing model's window: at most this many tries, so
# a request that cannot fit fails over to the fallback instead of looping.
MAX_ROUND_DROPS = 3
# When the error does not say by how much the prompt is over, drop this share of the rounds.
DROP_FRACTION = 0.2
# The provider's tokenizer differs from ours; free this much more than the reported excess.
GAP_MARGIN = 0.1
# Output room for the <analysis> scratchpad on top of the summary budget.
ANALYSIS_TOKENS = 4_000
DEFAULT_TIMEOUT_SECONDS = 120.0

_DEFAULT_KEY_ENV = "<provider default>"


class _PromptTooLong(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.gap = token_gap(message)


class LLMSummarizer:
    """Summarizes with a model over HTTP. `api_key_env` names the environment variable holding the
    key (default OPENAI_API_KEY / ANTHROPIC_API_KEY; None for servers that need no key).
    `extra_body` adjusts the request, e.g. `{"max_completion_tokens": 12000, "max_tokens": None,
    "temperature": None}` for OpenAI reasoning models. `sleep` and `transport` are injectable so
    tests neither wait nor need a network."""

    name = "llm"

    def __init__(self, provider: str = "openai", *, model: str, base_url: str | None = None,
                 api_key_env: str | None = _DEFAULT_KEY_ENV,
                 timeout: float = DEFAULT_TIMEOUT_SECONDS, max_retries: int = 4,
                 max_output_tokens: int | None = None,
                 retry_after_cap: float = RETRY_AFTER_CAP_SECONDS,
                 extra_body: Mapping[str, Any] | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.provider = get_provider(provider)
        self.model = model
        self.url = (base_url or self.provider.default_base_url).rstrip("/") + self.provider.path
        self.api_key_env = self.provider.default_key_env if api_key_env == _DEFAULT_KEY_ENV else api_key_env
        self.timeout = timeout
        self.max_output_tokens = max_output_tokens
        self.extra_body = dict(extra_body or {})
        self.retry = RetryPolicy(max_retries=max_retries, retry_after_cap=retry_after_cap, sleep=sleep)
        self.transport = transport
        self._client: httpx.Client | None = None

    def summarize(self, request: SummaryRequest, counter: TokenCounter) -> Summary:
        """A summary within `request.budget_tokens` (as a message: text plus the per-message
        overhead, as the structured summarizer counts), or SummarizerError."""
        details: dict[str, Any] = {"provider": self.provider.name, "model": self.model}
        raw = self._complete(request, counter, details)
        sections = assemble(extract_summary(raw), user_messages_section(
            request.messages, request.user_messages_tokens, counter))
        final, cut = fit_to_budget(sections, request.budget_tokens - PER_MESSAGE_OVERHEAD, counter)
        if cut:
            details["trimmed_sections"] = cut
            details["tokens_before_trim"] = counter.text(render_sections(sections))
        return Summary(final, self.name, counter.text(final), details)

    def _complete(self, request: SummaryRequest, counter: TokenCounter, details: dict[str, Any]) -> str:
        """The model's reply text, dropping the oldest rounds while the prompt is too long. Fills
        `details` with attempts, retries (reason and wait), prompt sizes and dropped message ids."""
        headers = self.provider.headers(self._api_key())
        kept = list(request.messages)
        retries: list[dict[str, Any]] = []
        sizes: list[int] = []
        details.update(attempts=0, retries=retries, prompt_tokens=sizes)
        client = self._http()
        for drop_round in range(MAX_ROUND_DROPS + 1):
            system, user = build_prompt(kept, request)
            body = self._body(system, user, request)
            sizes.append(counter.text(system) + counter.text(user))
            waits_before = len(retries)
            try:
                return self.retry.run(lambda: self._post(client, headers, body), retries)
            except TransientError as exc:
                raise SummarizerError(
                    f"{self.provider.name}: gave up after {len(retries) - waits_before + 1} "
                    f"attempts: {exc.reason}") from None
            except _PromptTooLong as exc:
                if drop_round == MAX_ROUND_DROPS:
                    raise SummarizerError(
                        f"{self.provider.name}: prompt still too long after dropping the oldest "
                        f"rounds {MAX_ROUND_DROPS} times: {exc}") from None
                gone = _drop_oldest(kept, exc.gap, counter)
                details.setdefault("dropped_messages", []).extend(m.id for m in gone)
                kept = kept[len(gone):]
            finally:
                details["attempts"] = len(sizes) + len(retries)
        raise AssertionError("unreachable: the loop returns or raises")

    def _http(self) -> httpx.Client:
        """One client for the summarizer's life: building one loads the TLS trust store (~0.1 s),
        and it keeps the connection to the provider open between compactions."""
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout, transport=self.transport)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise SummarizerError(f"{self.provider.name}: environment variable {self.api_key_env} "
                                  "is not set (pass api_key_env=None for a server without keys)")
        return key

    def _body(self, system: str, user: str, request: SummaryRequest) -> dict[str, Any]:
        """The request body; `extra_body` keys are added, and those set to None removed."""
        max_tokens = self.max_output_tokens or request.budget_tokens + ANALYSIS_TOKENS
        body = {**self.provider.body(self.model, system, user, max_tokens), **self.extra_body}
        return {k: v for k, v in body.items() if v is not None}

    def _post(self, client: httpx.Client, headers: dict[str, str], body: dict[str, Any]) -> str:
        """One HTTP attempt: the reply text, or TransientError / _PromptTooLong / SummarizerError."""
        try:
            resp = client.post(self.url, headers=headers, json=body)
        except httpx.TimeoutException:
            raise TransientError(f"no response within {self.timeout} s") from None
        except httpx.TransportError as exc:
            raise TransientError(f"connection error: {exc.__class__.__name__}: {exc}") from None
        status = resp.status_code
        if status == 429 or status >= 500:
            raise TransientError(f"HTTP {status}: {error_message(resp.content)}",
                                 parse_retry_after(resp.headers))
        if status >= 400:
            message = error_message(resp.content)
            if is_prompt_too_long(status, message):
                raise _PromptTooLong(message)
            raise SummarizerError(f"{self.provider.name}: HTTP {status} (not retried): {message}")
        try:
            data = json.loads(resp.content)
        except ValueError:
            raise SummarizerError(f"{self.provider.name}: malformed JSON in the response: "
                                  f"{resp.content[:200]!r}") from None
        return self.provider.parse(data)


def _drop_oldest(messages: Sequence[Message], gap: int | None, counter: TokenCounter) -> list[Message]:
    """The oldest whole rounds to drop: a round is a user turn up to the next one; with a single
    round left, agent steps (an assistant message and its results) are the unit instead. Enough to
    cover `gap` tokens when known, else DROP_FRACTION of the rounds; never the last one."""
    units = _user_rounds(messages)
    if len(units) < 2:
        units = [list(r.messages(messages)) for r in steps(messages)]
    if len(units) < 2:
        raise SummarizerError("prompt too long, and only one step is left to summarize")
    if gap is None:
        n = max(1, math.ceil(len(units) * DROP_FRACTION))
    else:
        target, freed, n = gap * (1 + GAP_MARGIN), 0, 0
        while n < len(units) and freed < target:
            freed += counter.messages(units[n])
            n += 1
    return [m for unit in units[: min(n, len(units) - 1)] for m in unit]


def _user_rounds(messages: Sequence[Message]) -> list[list[Message]]:
    out: list[list[Message]] = []
    for m in messages:
        if is_user_turn(m) or not out:
            out.append([m])
        else:
            out[-1].append(m)
    return out
