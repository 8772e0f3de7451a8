"""The `llm` summarizer: a LangChain chat model writes the narrative; the structured sections stay verbatim.

The structured summarizer renders the ledger's sections (the user's words, rules, files, errors,
progress, identifiers) into most of the budget, exactly as it would alone; the model, shown those
sections and the conversation, writes only the narrative (how the work went, why, where it stands),
which goes in as one more section. Any chat model works: a `BaseChatModel` instance, or a
"provider:model" string for `init_chat_model` (as LangChain's SummarizationMiddleware takes them).

Transient failures (rate limits, timeouts, server errors) are retried with tenacity (retry.py); a
prompt over the model's window is shrunk by dropping the oldest whole rounds, at most MAX_ROUND_DROPS
times. Any final failure raises SummarizerError, and autocompact then uses the structured summary
alone (the deterministic fallback).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

from ..core.errors import ConfigError, SummarizerError
from ..core.model import Message, is_user_turn
from ..core.tokens import PER_MESSAGE_OVERHEAD, TokenCounter, truncate_to_tokens
from ..core.view import rounds as steps
from .base import Summary, SummaryRequest
from .failures import PromptTooLong, classify
from .prompt import extract_narrative, narrative_prompt
from .retry import RETRY_AFTER_CAP_SECONDS, RetryPolicy, TransientError
from .sections import CURRENT_WORK, NARRATIVE
from .structured import StructuredSummarizer

NAME = "llm"
# The narrative's share of the summary budget, within these bounds: the structured sections carry
# the facts a probe asks about, the narrative the reasons between them.
NARRATIVE_SHARE = 0.3
MIN_NARRATIVE_TOKENS = 120
MAX_NARRATIVE_TOKENS = 2_500
# Tokenization is not additive where the narrative is spliced in: this much is kept in reserve.
SPLICE_SLACK_TOKENS = 16
NARRATIVE_CUT = "\n[... narrative cut to fit the summary budget]"
# Dropping the oldest whole rounds to fit the summarizing model's window: at most this many tries, so
# a request that cannot fit fails over to the structured summary instead of looping.
MAX_ROUND_DROPS = 3
# When the error does not say by how much the prompt is over, drop this share of the rounds.
DROP_FRACTION = 0.2
# The model's tokenizer differs from ours; free this much more than the reported excess.
GAP_MARGIN = 0.1
# What `summarizer_options` configure on the summarizer itself; every other option goes to
# `init_chat_model` (base_url, timeout, temperature, max_tokens, ...).
OWN_OPTIONS = ("narrative_share", "max_retries", "retry_after_cap")


class ChatModelSummarizer:
    """Summarizes with a LangChain chat model (see the module docstring). `sleep` is injectable so
    tests never wait."""

    name = NAME

    def __init__(self, model: Any, *, narrative_share: float = NARRATIVE_SHARE, max_retries: int = 4,
                 retry_after_cap: float = RETRY_AFTER_CAP_SECONDS, sleep: Callable[[float], None] = time.sleep) -> None:
        if not callable(getattr(model, "invoke", None)):
            raise ConfigError(f"summarizer model {model!r} is not a chat model (it has no invoke method)")
        self.model = model
        self.narrative_share = narrative_share
        self.retry = RetryPolicy(max_retries=max_retries, retry_after_cap=retry_after_cap, sleep=sleep)
        self.structured = StructuredSummarizer()

    @property
    def model_name(self) -> str:
        for attr in ("model_name", "model", "model_id"):
            value = getattr(self.model, attr, None)
            if isinstance(value, str) and value:
                return value
        return type(self.model).__name__

    def summarize(self, request: SummaryRequest, counter: TokenCounter) -> Summary:
        """The structured sections within the budget less the narrative's share, and the model's
        narrative within that share; SummarizerError when the model fails."""
        share = int(request.budget_tokens * self.narrative_share)
        narrative_budget = max(MIN_NARRATIVE_TOKENS, min(MAX_NARRATIVE_TOKENS, share))
        if narrative_budget * 2 > request.budget_tokens:
            raise SummarizerError(f"a summary budget of {request.budget_tokens} tokens leaves no room for a narrative")
        structured = self.structured.summarize(replace(request, budget_tokens=request.budget_tokens - narrative_budget),
                                               counter)
        details: dict[str, Any] = {"model": self.model_name, "structured": structured.details}
        narrative = self._narrative(request, structured.text, narrative_budget, counter, details)
        section = _fit(f"## {NARRATIVE}\n", narrative, narrative_budget - SPLICE_SLACK_TOKENS, counter)
        text = _splice(structured.text, section)
        details["narrative_tokens"] = counter.text(section)
        tokens = counter.text(text)
        if tokens + PER_MESSAGE_OVERHEAD > request.budget_tokens:  # the splice cost more than the slack
            raise SummarizerError(f"summary of {tokens} tokens is over the budget of {request.budget_tokens}")
        return Summary(text, self.name, tokens, details)

    def _narrative(self, request: SummaryRequest, structured: str, budget: int, counter: TokenCounter,
                   details: dict[str, Any]) -> str:
        """The model's narrative, dropping the oldest rounds while the prompt is too long. Fills
        `details` with attempts, retries (reason and wait), prompt sizes and dropped message ids."""
        kept = list(request.messages)
        retries: list[dict[str, Any]] = []
        sizes: list[int] = []
        details.update(attempts=0, retries=retries, prompt_tokens=sizes)
        for drop_round in range(MAX_ROUND_DROPS + 1):
            system, user = narrative_prompt(kept, request, structured, budget)
            sizes.append(counter.text(system) + counter.text(user))
            waits_before = len(retries)
            try:
                return extract_narrative(self.retry.run(lambda: self._ask(system, user), retries))
            except TransientError as exc:
                raise SummarizerError(f"{self.model_name}: gave up after {len(retries) - waits_before + 1} "
                                      f"attempts: {exc.reason}") from None
            except PromptTooLong as exc:
                if drop_round == MAX_ROUND_DROPS:
                    raise SummarizerError(f"{self.model_name}: prompt still too long after dropping the oldest "
                                          f"rounds {MAX_ROUND_DROPS} times: {exc}") from None
                gone = drop_oldest(kept, exc.gap, counter)
                details.setdefault("dropped_messages", []).extend(m.id for m in gone)
                kept = kept[len(gone):]
            finally:
                details["attempts"] = len(sizes) + len(retries)
        raise AssertionError("unreachable: the loop returns or raises")

    def _ask(self, system: str, user: str) -> str:
        """One call of the model: its reply's text, or the classified failure."""
        from langchain_core.messages import HumanMessage, SystemMessage

        try:
            reply = self.model.invoke([SystemMessage(system), HumanMessage(user)])
        except Exception as exc:  # the provider SDK's own exceptions: classified, never leaked
            raise classify(exc, self.model_name) from None
        text = getattr(reply, "text", reply)  # a property in langchain-core 1.x (a method before)
        text = str(text) if isinstance(text, str) else text() if callable(text) else text
        if not isinstance(text, str):
            raise SummarizerError(f"{self.model_name}: the reply has no text: {reply!r}"[:300])
        return text


def chat_model_summarizer(model: Any, **options: Any) -> ChatModelSummarizer:
    """A ChatModelSummarizer for a chat model or a "provider:model" string (`init_chat_model`, with
    every option not the summarizer's own; `api_key_env` names the variable holding the key)."""
    own = {k: options.pop(k) for k in OWN_OPTIONS if k in options}
    if isinstance(model, str):
        model = init_chat_model(model, **options)
    elif options:
        raise ConfigError(f"options {sorted(options)} configure a model from a string; this one is built already")
    return ChatModelSummarizer(model, **own)


def init_chat_model(spec: str, **options: Any) -> Any:
    """`langchain.chat_models.init_chat_model(spec, ...)` with worksurface's conventions: no retries of
    its own (ours count and wait), the key from the variable `api_key_env` names, errors as ConfigError."""
    import os

    try:
        from langchain.chat_models import init_chat_model as init
    except ImportError:
        raise ConfigError("a chat-model summarizer needs LangChain: pip install 'worksurface[langchain]'") from None
    key_env = options.pop("api_key_env", None)
    if key_env:
        key = os.environ.get(key_env)
        if not key:
            raise ConfigError(f"summarizer {spec!r}: environment variable {key_env} is not set")
        options["api_key"] = key
    options.setdefault("max_retries", 0)
    try:
        return init(spec, **options)
    except (ImportError, ValueError) as exc:
        raise ConfigError(f"summarizer {spec!r}: {exc}") from None


def _fit(heading: str, narrative: str, budget: int, counter: TokenCounter) -> str:
    room = budget - counter.text(heading)
    if room <= 0:
        raise SummarizerError("no room left for the narrative in the summary budget")
    return heading + truncate_to_tokens(narrative, room, marker=NARRATIVE_CUT)


def _splice(structured: str, section: str) -> str:
    """The structured summary with the narrative section before its Current work (else at the end)."""
    at = structured.find(f"\n## {CURRENT_WORK}\n")
    if at < 0:
        return f"{structured.rstrip()}\n\n{section}"
    return f"{structured[:at].rstrip()}\n\n{section}\n{structured[at:]}"


def drop_oldest(messages: Sequence[Message], gap: int | None, counter: TokenCounter) -> list[Message]:
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
