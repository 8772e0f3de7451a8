"""The `llm` summarizer on LangChain chat models (issue 31, item 2), with LangChain's own fake chat
models (langchain_core.language_models.fake_chat_models), never the network: the structured sections
rendered from the ledger stay verbatim and the model writes only the narrative; transient failures
are retried, a prompt over the model's window drops the oldest rounds, and any final failure gives
the structured summary (the deterministic fallback)."""

from __future__ import annotations

import email.utils
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import Field

from worksurface.core.errors import ConfigError, SummarizerError
from worksurface.core.model import Message, Origin, Text, ToolCall, ToolResult
from worksurface.core.tokens import TokenCounter
from worksurface.summarizers import get_summarizer, resolve_summarizer
from worksurface.summarizers.base import SummaryRequest
from worksurface.summarizers.chat_model import (MAX_ROUND_DROPS, ChatModelSummarizer, NARRATIVE_SHARE,
                                                chat_model_summarizer)
from worksurface.summarizers.failures import token_gap
from worksurface.summarizers.retry import parse_retry_after
from worksurface.summarizers.sections import HEADINGS, NARRATIVE, split_sections
from worksurface.summarizers.structured import StructuredSummarizer

COUNTER = TokenCounter()
NARRATIVE_TEXT = "We read every module first because the API had to stay stable; f3 held the bug."
REPLY = f"<analysis>private reasoning</analysis>\n<narrative>\n{NARRATIVE_TEXT}\n</narrative>"


class Recording(FakeListChatModel):
    """LangChain's fake list model that records the messages of every call."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def _call(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> str:
        self.seen.append(list(messages))
        return super()._call(messages, stop, run_manager, **kwargs)


class Failing(Recording):
    """Raises the scripted exceptions first (one per call), then answers from `responses`."""

    failures: list[Exception] = Field(default_factory=list)

    def _call(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> str:
        if self.failures:
            self.seen.append(list(messages))
            raise self.failures.pop(0)
        return super()._call(messages, stop, run_manager, **kwargs)


class _Response:
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status_code, self.headers = status, headers


class APIStatusError(Exception):
    """Shaped like the provider SDKs' (openai, anthropic): a status code and the HTTP response."""

    def __init__(self, message: str, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status_code = status
        self.response = _Response(status, headers or {})


class RateLimitError(APIStatusError):
    def __init__(self, message: str, status: int = 429, headers: dict[str, str] | None = None) -> None:
        super().__init__(message, status, headers)


class BadRequestError(APIStatusError):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message, status)


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def transcript(rounds: int = 6, result_chars: int = 400) -> list[Message]:
    out = [Message("sys", "system", (Text("You are a coding agent."),))]
    for r in range(rounds):
        out.append(Message(f"u{r}", "user", (Text(f"user request {r}: never change the public API"),)))
        out.append(Message(f"a{r}", "assistant", (Text(f"reading file {r}"),
                                                  ToolCall(f"c{r}", "read", {"path": f"src/f{r}.py"}))))
        out.append(Message(f"t{r}", "tool", (ToolResult(f"c{r}", f"line {r} " * (result_chars // 7)),)))
    return out


def request(**kw: Any) -> SummaryRequest:
    return SummaryRequest(messages=kw.pop("messages", transcript()), **kw)


def summarizer(model: Any, sleeps: Sleeps | None = None, **kw: Any) -> ChatModelSummarizer:
    return ChatModelSummarizer(model, sleep=sleeps if sleeps is not None else Sleeps(), **kw)


def test_structured_sections_stay_verbatim_and_the_model_writes_the_narrative() -> None:
    model = Recording(responses=[REPLY])
    req = request(instructions="focus on the parser")
    summary = summarizer(model).summarize(req, COUNTER)
    narrative_budget = int(req.budget_tokens * NARRATIVE_SHARE)
    alone = StructuredSummarizer().summarize(replace(req, budget_tokens=req.budget_tokens - narrative_budget), COUNTER)
    written, expected = split_sections(summary.text), split_sections(alone.text)
    assert {h: written[h] for h in HEADINGS if h in expected} == {h: expected[h] for h in HEADINGS if h in expected}
    assert written[NARRATIVE] == NARRATIVE_TEXT and "private reasoning" not in summary.text
    assert summary.text.index(NARRATIVE) < summary.text.index("## Current work")
    assert summary.summarizer == "llm" and summary.tokens <= req.budget_tokens
    assert summary.details["attempts"] == 1 and summary.details["retries"] == []

    system, user = model.seen[0]
    assert isinstance(system, SystemMessage) and isinstance(user, HumanMessage)
    assert "do not repeat it" in system.content and "<narrative>" in system.content
    assert alone.text in user.content, "the model is shown the structured part it must not repeat"
    assert "[user] user request 0: never change the public API" in user.content
    assert "focus on the parser" in user.content


def test_rate_limits_are_retried_with_the_servers_wait() -> None:
    model = Failing(responses=[REPLY], failures=[RateLimitError("slow down", headers={"retry-after": "2"}),
                                                 RateLimitError("overloaded", status=529)])
    sleeps = Sleeps()
    summary = summarizer(model, sleeps, max_retries=3).summarize(request(), COUNTER)
    assert sleeps[0] == 2.0 and len(sleeps) == 2 and len(model.seen) == 3
    assert split_sections(summary.text)[NARRATIVE] == NARRATIVE_TEXT
    assert [r["server_hint"] for r in summary.details["retries"]] == [True, False]


def test_timeouts_exhaust_the_retries_then_fail() -> None:
    model = Failing(responses=[REPLY], failures=[TimeoutError("read timed out")] * 3)
    with pytest.raises(SummarizerError, match="gave up after 3 attempts: TimeoutError"):
        summarizer(model, max_retries=2).summarize(request(), COUNTER)


def test_a_rejected_request_is_not_retried() -> None:
    model = Failing(responses=[REPLY], failures=[BadRequestError("invalid api key", status=401)])
    with pytest.raises(SummarizerError, match="not retried"):
        summarizer(model).summarize(request(), COUNTER)
    assert len(model.seen) == 1


@pytest.mark.parametrize("reply", ["", "   ", "<narrative></narrative>", "I'm sorry, I cannot help with that.",
                                   "Error: upstream unavailable"])
def test_an_empty_or_error_looking_narrative_is_a_failure(reply: str) -> None:
    with pytest.raises(SummarizerError):
        summarizer(Recording(responses=[reply])).summarize(request(), COUNTER)


def test_prompt_too_long_drops_the_oldest_rounds_then_succeeds() -> None:
    too_long = BadRequestError("prompt is too long: 215,000 tokens > 200,000 maximum")
    model = Failing(responses=[REPLY], failures=[too_long])
    summary = summarizer(model).summarize(request(messages=transcript(8)), COUNTER)
    dropped = summary.details["dropped_messages"]
    assert dropped and dropped[0] == "sys" and "u7" not in dropped
    first, second = (str(model.seen[n][1].content).split("<conversation>", 1)[1] for n in (0, 1))
    assert "[user] user request 0:" in first and "[user] user request 0:" not in second
    assert "[user] user request 7:" in second
    # The user's own messages still reach the summary verbatim: the structured part quotes them.
    assert "user request 0: never change the public API" in summary.text


def test_prompt_too_long_gives_up_after_the_last_drop() -> None:
    model = Failing(responses=[REPLY], failures=[BadRequestError("context_length_exceeded")] * (MAX_ROUND_DROPS + 1))
    with pytest.raises(SummarizerError, match=f"still too long after dropping the oldest rounds {MAX_ROUND_DROPS} times"):
        summarizer(model).summarize(request(messages=transcript(12)), COUNTER)
    assert len(model.seen) == MAX_ROUND_DROPS + 1


def test_a_long_narrative_is_cut_to_its_share_and_the_budget_holds() -> None:
    long_reply = "<narrative>" + " ".join(f"step {i} changed module m{i}." for i in range(3000)) + "</narrative>"
    req = request(budget_tokens=1500)
    summary = summarizer(Recording(responses=[long_reply])).summarize(req, COUNTER)
    assert summary.tokens <= req.budget_tokens and "narrative cut to fit" in summary.text


# --- what summarizer= takes ------------------------------------------------------------------------

def test_a_session_compacts_with_a_chat_model_and_falls_back_when_it_fails() -> None:
    from worksurface import Session

    with Session.open(None, summarizer=Recording(responses=[REPLY])) as session:
        prepared = session.compact(transcript(8), instructions="keep the parser notes")
    summary = next(m for m in prepared.messages if m.origin is Origin.SUMMARY)
    assert NARRATIVE_TEXT in summary.text and prepared.report.boundary["summarizer"] == "llm"
    assert prepared.report.boundary["summarizer_details"]["model"]

    failing = Failing(responses=[REPLY], failures=[BadRequestError("invalid api key", status=401)])
    with Session.open(None, summarizer=failing) as session:
        prepared = session.compact(transcript(8))
    boundary = prepared.report.boundary
    assert boundary["summarizer"] == "structured" and boundary["fallback"]["from"] == "llm"
    assert "invalid api key" in boundary["fallback"]["error"]
    assert any("structured summary was used instead" in n for n in prepared.report.notices)


def test_a_provider_model_string_goes_through_init_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    import langchain.chat_models

    made: list[tuple[str, dict[str, Any]]] = []

    def fake_init(spec: str, **options: Any) -> Recording:
        made.append((spec, options))
        return Recording(responses=[REPLY])

    monkeypatch.setattr(langchain.chat_models, "init_chat_model", fake_init)
    resolved = resolve_summarizer("anthropic:claude-haiku-4-5")
    assert isinstance(resolved, ChatModelSummarizer) and made == [("anthropic:claude-haiku-4-5", {"max_retries": 0})]

    monkeypatch.setenv("SUMMARY_KEY", "sk-summary")
    configured = get_summarizer("llm", model="gpt-5-mini", provider="openai", api_key_env="SUMMARY_KEY",
                                base_url="http://127.0.0.1:9/v1", max_retries=2)
    assert isinstance(configured, ChatModelSummarizer) and configured.retry.max_retries == 2
    assert made[-1] == ("gpt-5-mini", {"model_provider": "openai", "api_key": "sk-summary",
                                       "base_url": "http://127.0.0.1:9/v1", "max_retries": 0})


def test_what_summarizer_cannot_be_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="Unable to infer model provider"):
        resolve_summarizer("nonexistent-provider:model-x")
    with pytest.raises(ConfigError, match="not a chat model|takes a Summarizer"):
        resolve_summarizer(42)
    with pytest.raises(ConfigError, match="needs summarizer_options.model"):
        get_summarizer("llm")
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    with pytest.raises(ConfigError, match="NO_SUCH_KEY is not set"):
        chat_model_summarizer("openai:gpt-5-mini", api_key_env="NO_SUCH_KEY")
    assert isinstance(resolve_summarizer("structured"), StructuredSummarizer)


def test_the_langchain_middleware_passes_a_chat_model_summarizer_to_its_sessions() -> None:
    pytest.importorskip("langchain")
    from worksurface.integrations.middleware import WorksurfaceMiddleware

    middleware = WorksurfaceMiddleware(None, summarizer=Recording(responses=[REPLY]))
    assert isinstance(middleware.sessions.get("t").summarizer, ChatModelSummarizer)
    middleware.sessions.close()


# --- pieces ----------------------------------------------------------------------------------------

def test_parse_retry_after_forms() -> None:
    now = datetime(2025, 1, 1, tzinfo=timezone.utc)
    assert parse_retry_after({"retry-after": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    later = email.utils.format_datetime(now + timedelta(seconds=42), usegmt=True)
    assert parse_retry_after({"retry-after": later}, now=now) == 42
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_token_gap_messages() -> None:
    assert token_gap("prompt is too long: 210,000 tokens > 200,000 maximum") == 10_000
    assert token_gap("maximum context length is 8192 tokens. However, your messages resulted in "
                     "9000 tokens.") == 808
    assert token_gap("context_length_exceeded") is None
