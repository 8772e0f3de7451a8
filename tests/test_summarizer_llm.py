"""The LLM summarizer against a real HTTP server on loopback: canned replies and injected faults."""

from __future__ import annotations

import email.utils
import json
import socket
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import httpx
import pytest

from worksurface.core.errors import ConfigError, SummarizerError
from worksurface.core.model import Message, Origin, Text, ToolCall, ToolResult
from worksurface.summarizers.base import Summary, SummaryRequest
from worksurface.summarizers.fallback import FallbackSummarizer
from worksurface.summarizers.llm import LLMSummarizer
from worksurface.summarizers.prompt import assemble, extract_summary
from worksurface.summarizers.structured import (ACTIVE_REQUEST, CURRENT_WORK, FILES, HEADINGS, IDENTIFIERS,
                                                 NEXT_STEP, USER_MESSAGES)
from worksurface.summarizers.providers import token_gap
from worksurface.summarizers.retry import parse_retry_after
from worksurface.core.tokens import TokenCounter

# Long enough for a loopback reply, short enough that three timed-out attempts cost well under 2 s.
TIMEOUT = 0.3
# How long a "hung" reply holds its connection (released at teardown anyway).
HANG_SECONDS = 5.0

# One transport for all tests: each new one loads the TLS trust store (~0.1 s), even for http.
TRANSPORT = httpx.HTTPTransport()

GOOD_SUMMARY = "<analysis>private reasoning</analysis>\n<summary>\n" + "\n".join(
    f"## {h}\ncontent of {h.lower()}" for h in HEADINGS) + "\n</summary>"


class Reply:
    def __init__(self, status: int = 200, body: Any = None, headers: dict[str, str] | None = None,
                 hang: bool = False, raw: bytes | None = None) -> None:
        self.status, self.body, self.headers, self.hang, self.raw = status, body, headers or {}, hang, raw


def openai_ok(text: str = GOOD_SUMMARY) -> Reply:
    return Reply(body={"choices": [{"message": {"role": "assistant", "content": text}}]})


def anthropic_ok(text: str = GOOD_SUMMARY) -> Reply:
    return Reply(body={"type": "message", "content": [{"type": "text", "text": text}]})


class FakeProvider:
    """A ThreadingHTTPServer that answers each POST with the next scripted Reply (the last repeats)."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                length = int(self.headers.get("content-length", 0))
                owner.requests.append({"path": self.path, "headers": dict(self.headers),
                                       "body": json.loads(self.rfile.read(length))})
                reply = owner.script.pop(0) if len(owner.script) > 1 else owner.script[0]
                if reply.hang:
                    owner.release.wait(HANG_SECONDS)
                    return
                data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    p = FakeProvider()
    yield p
    p.close()


@pytest.fixture(autouse=True)
def api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-test")


class Sleeps(list):
    """Records the waits asked for instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make(provider: FakeProvider, kind: str = "openai", sleeps: Sleeps | None = None,
         **kw: Any) -> LLMSummarizer:
    kw.setdefault("transport", TRANSPORT)
    return LLMSummarizer(kind, model="test-model", base_url=provider.url, timeout=TIMEOUT,
                         max_retries=kw.pop("max_retries", 2), sleep=sleeps if sleeps is not None else Sleeps(),
                         **kw)


def transcript(rounds: int = 6, result_chars: int = 400) -> list[Message]:
    out = [Message("sys", "system", (Text("You are a coding agent."),))]
    for r in range(rounds):
        out.append(Message(f"u{r}", "user", (Text(f"user request {r}: keep the API stable"),)))
        out.append(Message(f"a{r}", "assistant", (Text(f"reading file {r}"),
                                                  ToolCall(f"c{r}", "read", {"path": f"src/f{r}.py"}))))
        out.append(Message(f"t{r}", "tool", (ToolResult(f"c{r}", f"line {r} " * (result_chars // 7)),)))
    return out


class Fixed:
    """A stand-in fallback: always the same short summary."""

    name = "structured"

    def summarize(self, request: SummaryRequest, counter: TokenCounter) -> Summary:
        return Summary("## Active request\nfallback", self.name, 5, {"sections": 1})


COUNTER = TokenCounter()


def request(**kw: Any) -> SummaryRequest:
    return SummaryRequest(messages=kw.pop("messages", transcript()), **kw)


# --- canned successes ------------------------------------------------------------------------------

def test_openai_canned_summary_and_request_shape(provider: FakeProvider) -> None:
    provider.script = [openai_ok()]
    summary = make(provider).summarize(request(instructions="focus on the parser"), COUNTER)
    sent = provider.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == "Bearer sk-test"
    body = sent["body"]
    assert body["model"] == "test-model"
    system, user = body["messages"]
    assert system["role"] == "system" and all(f"## {h}" in system["content"] for h in HEADINGS)
    assert "src/f3.py" in user["content"]
    assert user["content"].rstrip().endswith("focus on the parser")
    assert "private reasoning" not in summary.text and "<summary>" not in summary.text
    assert summary.summarizer == "llm" and summary.tokens == COUNTER.text(summary.text)
    assert summary.details["attempts"] == 1 and summary.details["retries"] == []


def test_user_messages_are_verbatim_newest_first(provider: FakeProvider) -> None:
    provider.script = [openai_ok()]
    summary = make(provider).summarize(request(), COUNTER)
    section = summary.text.split(f"## {USER_MESSAGES}\n", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    assert lines[0] == "[1] user request 5: keep the API stable"
    assert lines[-1] == "[6] user request 0: keep the API stable"
    headings = [line[3:] for line in summary.text.splitlines() if line.startswith("## ")]
    assert headings == list(HEADINGS)


def test_user_messages_of_an_earlier_summary_are_carried_over(provider: FakeProvider) -> None:
    provider.script = [openai_ok()]
    first = make(provider).summarize(request(messages=transcript(3)), COUNTER)
    later = [Message("sum1", "user", (Text(first.text),), Origin.SUMMARY),
             Message("u9", "user", (Text("now add docs\nwith examples"),))]
    second = make(provider).summarize(request(messages=later), COUNTER)
    section = second.text.split(f"## {USER_MESSAGES}\n", 1)[1].split("\n## ", 1)[0]
    assert section.splitlines() == ["[1] now add docs", "with examples",
                                    "[2] user request 2: keep the API stable",
                                    "[3] user request 1: keep the API stable",
                                    "[4] user request 0: keep the API stable"]


def test_extra_body_adds_and_removes_fields(provider: FakeProvider) -> None:
    provider.script = [openai_ok()]
    make(provider, extra_body={"max_completion_tokens": 999, "max_tokens": None}).summarize(request(), COUNTER)
    body = provider.requests[0]["body"]
    assert body["max_completion_tokens"] == 999 and "max_tokens" not in body


def test_anthropic_canned_summary_and_request_shape(provider: FakeProvider) -> None:
    provider.script = [anthropic_ok()]
    summary = make(provider, "anthropic").summarize(request(), COUNTER)
    sent = provider.requests[0]
    assert sent["path"] == "/v1/messages"
    assert sent["headers"]["x-api-key"] == "ak-test" and sent["headers"]["anthropic-version"]
    assert "## Active request" in sent["body"]["system"]
    assert [m["role"] for m in sent["body"]["messages"]] == ["user"]
    assert "content of current work" in summary.text


# --- transient faults: retried ---------------------------------------------------------------------

def test_429_retry_after_seconds_is_honoured(provider: FakeProvider) -> None:
    provider.script = [Reply(429, {"error": {"message": "rate limited"}}, {"Retry-After": "7"}), openai_ok()]
    sleeps = Sleeps()
    summary = make(provider, sleeps=sleeps).summarize(request(), COUNTER)
    assert sleeps == [7.0]
    assert summary.details["retries"] == [{"reason": "HTTP 429: rate limited", "wait": 7.0, "server_hint": True}]
    assert len(provider.requests) == 2 and summary.details["attempts"] == 2


def test_429_retry_after_http_date_and_cap(provider: FakeProvider) -> None:
    soon = email.utils.format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    provider.script = [Reply(429, {}, {"Retry-After": soon}), Reply(503, {}, {"Retry-After": "3600"}),
                       openai_ok()]
    sleeps = Sleeps()
    make(provider, sleeps=sleeps, retry_after_cap=60.0).summarize(request(), COUNTER)
    assert 20 < sleeps[0] <= 30
    assert sleeps[1] == 60.0


def test_500_is_retried_with_backoff(provider: FakeProvider) -> None:
    provider.script = [Reply(500, {"error": "boom"}), Reply(502, raw=b"<html>bad gateway</html>"), openai_ok()]
    sleeps = Sleeps()
    summary = make(provider, sleeps=sleeps).summarize(request(), COUNTER)
    assert len(provider.requests) == 3 and len(sleeps) == 2
    assert all(0 < s <= 3.0 for s in sleeps)  # 1 s then 2 s, plus up to 1 s jitter
    assert "content of active request" in summary.text


def test_hung_response_is_retried_then_succeeds(provider: FakeProvider) -> None:
    provider.script = [Reply(hang=True), openai_ok()]
    summary = make(provider).summarize(request(), COUNTER)
    assert len(provider.requests) == 2
    assert summary.details["retries"][0]["reason"] == f"no response within {TIMEOUT} s"


def test_hung_responses_exhaust_retries_then_fall_back(provider: FakeProvider) -> None:
    provider.script = [Reply(hang=True)]
    summary = FallbackSummarizer(make(provider, max_retries=2), Fixed()).summarize(request(), COUNTER)
    assert len(provider.requests) == 3
    assert summary.summarizer == "structured" and summary.text.endswith("fallback")
    assert summary.details["fallback"] is True and summary.details["primary"] == "llm"
    assert "gave up after 3 attempts" in summary.details["error"]


def test_connection_refused_is_retried_then_raises() -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = Sleeps()
    llm = LLMSummarizer(model="m", base_url=f"http://127.0.0.1:{port}/v1", timeout=TIMEOUT, max_retries=1,
                        sleep=sleeps)
    with pytest.raises(SummarizerError, match="connection error"):
        llm.summarize(request(), COUNTER)
    assert len(sleeps) == 1


# --- failures: not retried -------------------------------------------------------------------------

def test_malformed_json_fails_without_retry_and_falls_back(provider: FakeProvider) -> None:
    provider.script = [Reply(raw=b'{"choices": [ not json')]
    with pytest.raises(SummarizerError, match="malformed JSON"):
        make(provider).summarize(request(), COUNTER)
    summary = FallbackSummarizer(make(provider), Fixed()).summarize(request(), COUNTER)
    assert len(provider.requests) == 2  # one per summarize call: no retry
    assert summary.details["fallback"] is True and "malformed JSON" in summary.details["error"]


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_other_4xx_is_not_retried(provider: FakeProvider, status: int) -> None:
    provider.script = [Reply(status, {"error": {"type": "invalid_request_error", "message": "bad field"}})]
    sleeps = Sleeps()
    with pytest.raises(SummarizerError, match=f"HTTP {status} \\(not retried\\).*bad field"):
        make(provider, sleeps=sleeps).summarize(request(), COUNTER)
    assert len(provider.requests) == 1 and sleeps == []


@pytest.mark.parametrize("text", ["", "<analysis>only thinking</analysis>", "   ",
                                  "API Error: 529 overloaded", "Prompt is too long"])
def test_empty_or_error_looking_summary_is_a_failure(provider: FakeProvider, text: str) -> None:
    provider.script = [openai_ok(text)]
    with pytest.raises(SummarizerError):
        make(provider).summarize(request(), COUNTER)
    summary = FallbackSummarizer(make(provider), Fixed()).summarize(request(), COUNTER)
    assert summary.details["fallback"] is True


def test_unexpected_response_shape_is_a_failure(provider: FakeProvider) -> None:
    provider.script = [Reply(body={"error": {"message": "upstream failed"}})]
    with pytest.raises(SummarizerError, match="unexpected response shape"):
        make(provider).summarize(request(), COUNTER)


def test_missing_api_key_fails_before_any_request(provider: FakeProvider,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    provider.script = [openai_ok()]
    with pytest.raises(SummarizerError, match="OPENAI_API_KEY is not set"):
        make(provider).summarize(request(), COUNTER)
    assert provider.requests == []
    make(provider, api_key_env=None).summarize(request(), COUNTER)  # a keyless local server
    assert "authorization" not in provider.requests[0]["headers"]


# --- prompt too long: oldest rounds dropped --------------------------------------------------------

TOO_LONG = Reply(400, {"type": "error", "error": {
    "type": "invalid_request_error", "message": "prompt is too long: 250000 tokens > 200000 maximum"}})
TOO_LONG_OPENAI = Reply(400, {"error": {"code": "context_length_exceeded",
                                        "message": "This model's maximum context length is 8192 tokens."}})


def prompt_sizes(provider: FakeProvider) -> list[int]:
    return [len(r["body"]["messages"][-1]["content"]) for r in provider.requests]


def test_prompt_too_long_drops_oldest_rounds_at_most_three_times(provider: FakeProvider) -> None:
    provider.script = [TOO_LONG_OPENAI]
    with pytest.raises(SummarizerError, match="still too long after dropping the oldest rounds 3 times"):
        make(provider).summarize(request(messages=transcript(10)), COUNTER)
    sizes = prompt_sizes(provider)
    assert len(sizes) == 4 and sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 4


def test_prompt_too_long_then_success_keeps_every_user_message(provider: FakeProvider) -> None:
    provider.script = [TOO_LONG_OPENAI, openai_ok()]
    summary = make(provider).summarize(request(messages=transcript(10)), COUNTER)
    first, second = (r["body"]["messages"][-1]["content"] for r in provider.requests)
    assert "user request 0:" in first and "user request 0:" not in second  # the oldest round went
    assert "user request 9:" in second
    assert summary.details["attempts"] == 2 and len(summary.details["prompt_tokens"]) == 2
    dropped = summary.details["dropped_messages"]
    assert dropped[:4] == ["sys", "u0", "a0", "t0"]  # whole rounds, oldest first
    for r in range(10):  # nothing the user said is lost: their section is written from every message
        assert f"user request {r}: keep the API stable" in summary.text


def test_prompt_too_long_gap_decides_how_much_to_drop(provider: FakeProvider) -> None:
    msgs = transcript(10, result_chars=2000)
    per_round = COUNTER.messages(msgs[1:4])
    gap = 3 * per_round  # the error says the prompt is three rounds over
    too_long = f"prompt is too long: {10_000 + gap} tokens > 10000 maximum"
    provider.script = [Reply(400, {"error": {"message": too_long}}), anthropic_ok()]
    summary = make(provider, "anthropic").summarize(request(messages=msgs), COUNTER)
    dropped_users = [i for i in summary.details["dropped_messages"] if i.startswith("u")]
    assert dropped_users == ["u0", "u1", "u2", "u3"]  # 3 rounds plus the 10% margin


def test_single_round_is_shrunk_by_agent_steps(provider: FakeProvider) -> None:
    one_request = [Message("u", "user", (Text("fix everything"),))]
    for r in range(6):
        one_request += transcript(6)[2 + 3 * r: 4 + 3 * r]  # assistant call + result, no new user turn
    provider.script = [TOO_LONG, openai_ok()]
    summary = make(provider).summarize(request(messages=one_request), COUNTER)
    assert summary.details["dropped_messages"][0] == "u"
    assert "[1] fix everything" in summary.text


# --- budget ----------------------------------------------------------------------------------------

def test_over_budget_summary_is_trimmed_keeping_headings(provider: FakeProvider) -> None:
    long = "<summary>\n## Active request\nship it\n" + "\n".join(
        f"## {h}\n" + "\n".join(f"{h} detail {i}" for i in range(300)) for h in HEADINGS[1:]) + "\n</summary>"
    provider.script = [openai_ok(long)]
    summary = make(provider).summarize(request(budget_tokens=1_500), COUNTER)
    assert summary.tokens <= 1_500 and summary.tokens == COUNTER.text(summary.text)
    assert all(f"## {h}" in summary.text for h in HEADINGS)
    assert summary.details["trimmed_sections"][:2] == [IDENTIFIERS, FILES]
    assert summary.details["tokens_before_trim"] > 1_500
    assert "[1] user request 5: keep the API stable" in summary.text  # the user's words trimmed last


def test_fallback_replaces_an_over_budget_primary() -> None:
    class Bloated:
        name = "bloated"

        def summarize(self, request: SummaryRequest, counter: TokenCounter) -> Summary:
            return Summary("x", self.name, request.budget_tokens + 1)

    summary = FallbackSummarizer(Bloated(), Fixed()).summarize(request(), COUNTER)
    assert summary.details["fallback"] is True and "over the budget" in summary.details["error"]


def test_default_fallback_is_the_structured_summarizer(provider: FakeProvider) -> None:
    pytest.importorskip("worksurface.summarizers.structured")
    provider.script = [Reply(500, {})]
    req = request(budget_tokens=2_000)
    summary = FallbackSummarizer(make(provider, max_retries=1)).summarize(req, COUNTER)
    assert summary.summarizer == "structured" and summary.details["fallback"] is True
    assert "HTTP 500" in summary.details["error"]
    assert summary.tokens <= req.budget_tokens


# --- pieces ----------------------------------------------------------------------------------------

def test_parse_retry_after_forms() -> None:
    now = datetime(2025, 1, 1, tzinfo=timezone.utc)
    assert parse_retry_after({"retry-after": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    later = email.utils.format_datetime(now + timedelta(seconds=42), usegmt=True)
    assert parse_retry_after({"retry-after": later}, now=now) == 42
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_extract_summary_variants() -> None:
    assert extract_summary("<analysis>a</analysis><summary>B</summary>") == "B"
    assert extract_summary("<analysis>unclosed <summary>C") == "C"
    assert extract_summary("plain text") == "plain text"
    assert extract_summary("<summary>open ended") == "open ended"


def test_assemble_canonicalises_headings_and_keeps_extras() -> None:
    reply = "# Summary\n## next step\nrun the tests\n## Risks\nflaky CI\n## Active Request\nfix it"
    sections = dict(assemble(reply, "[1] fix it"))
    assert sections[NEXT_STEP] == "run the tests" and sections[ACTIVE_REQUEST] == "fix it"
    assert sections["Risks"] == "flaky CI" and "Summary" not in sections
    assert sections[USER_MESSAGES] == "[1] fix it" and sections[FILES] == "(not reported)"
    assert dict(assemble("just prose, no headings", "(none)"))[CURRENT_WORK] == "just prose, no headings"


def test_unknown_provider_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown summarizer provider 'gemini'"):
        LLMSummarizer("gemini", model="m")


def test_token_gap_messages() -> None:
    assert token_gap("prompt is too long: 210,000 tokens > 200,000 maximum") == 10_000
    assert token_gap("maximum context length is 8192 tokens. However, your messages resulted in "
                     "9000 tokens.") == 808
    assert token_gap("context_length_exceeded") is None


# --- inside a session: the core's autocompact uses the summarizer ----------------------------------

def test_session_compaction_uses_the_llm_summary(provider: FakeProvider) -> None:
    from worksurface import Session

    provider.script = [openai_ok()]
    with Session.open(None, summarizer=make(provider)) as session:
        prepared = session.compact(transcript(8), instructions="keep the parser notes")
    summary = next(m for m in prepared.messages if m.origin is Origin.SUMMARY)
    assert "content of current work" in summary.text and "private reasoning" not in summary.text
    covered_users = [i for i in prepared.report.boundary["covered_ids"] if i.startswith("u")]
    assert covered_users and all(f"] user request {i[1:]}: keep the API stable" in summary.text
                                 for i in covered_users)
    assert prepared.report.boundary["summarizer"] == "llm"
    assert "keep the parser notes" in provider.requests[0]["body"]["messages"][-1]["content"]


def test_session_compaction_falls_back_and_reports_it(provider: FakeProvider) -> None:
    from worksurface import Session

    provider.script = [Reply(503, {"error": {"message": "overloaded"}})]
    with Session.open(None, summarizer=make(provider, max_retries=1)) as session:
        prepared = session.compact(transcript(8))
    boundary = prepared.report.boundary
    assert boundary["summarizer"] == "structured"
    assert boundary["fallback"]["from"] == "llm" and "HTTP 503" in boundary["fallback"]["error"]
    assert len(provider.requests) == 2
    assert any(m.origin is Origin.SUMMARY for m in prepared.messages)
