"""Pass-through means pass-through, tried as an odd upstream (or a hostile one) would answer: events
and bodies worksurface cannot read (a null `message`, deltas that are not objects, negative or
400-digit usage, data that is not JSON) reach the client byte for byte, noted once on one log line
with no traceback; the stream is never cut short by the gateway's parser. A model's fetch_artifact
call with an input that is not an object gets an error result, not a 500. A lone surrogate (an
escape in the JSON) is forwarded unchanged. Credentials in a logged URL show as ***."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gateway_helpers import InProcess, free_port, inprocess_gateway
from worksurface.gateway.apis import MAX_REPORTED_TOKENS
from worksurface.gateway.logs import LOGGER, JsonFormatter, TextFormatter, redact

PATHS = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}
SSE = {"content-type": "text/event-stream"}
HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}


class Upstream:
    """Answers in order from a list the test sets (the last one again when it runs out)."""

    def __init__(self) -> None:
        self.answers: list[Callable[[], httpx.Response]] = []
        self.served = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        answer = self.answers[min(self.served, len(self.answers) - 1)]
        self.served += 1
        return answer()

    def set(self, *answers: Callable[[], httpx.Response]) -> None:
        self.answers, self.served = list(answers), 0


def stream(body: bytes) -> Callable[[], httpx.Response]:
    return lambda: httpx.Response(200, headers=SSE, content=body)


def whole(body: bytes | Any) -> Callable[[], httpx.Response]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return lambda: httpx.Response(200, headers={"content-type": "application/json"}, content=data)


class Lines(logging.Handler):
    """The gateway's log lines as printed (text form), kept for the test."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(TextFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def odd(self) -> list[str]:
        return [line for line in self.lines if "not understood" in line]


@pytest.fixture
def logs() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger(LOGGER)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.fixture(scope="module")
def upstream() -> Upstream:
    return Upstream()


@pytest.fixture(scope="module", params=["plain", "fetch"])
def gw(request: pytest.FixtureRequest, upstream: Upstream,
       tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    """The gateway relaying as it comes (plain) and rewriting (fetch_artifact offered: its calls hidden)."""
    with inprocess_gateway(tmp_path_factory.mktemp(request.param), upstream,
                           offer_fetch=request.param == "fetch") as running:
        yield running


_turn = iter(range(10**9))


def ask(gw: InProcess, api: str, stream: bool = False, **extra: Any) -> httpx.Response:
    text = f"question {next(_turn)}"
    if api == "anthropic":
        body: dict[str, Any] = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": text}]}
    elif api == "chat":
        body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    else:
        body = {"model": "m", "input": [{"role": "user", "content": text}]}
    if stream:
        body["stream"] = True
    response: httpx.Response = gw.client.post(PATHS[api], json={**body, **extra}, headers=HEADERS)
    return response


def event(name: str | None, data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    return ((f"event: {name}\n" if name else "") + f"data: {text}\n\n").encode()


def assert_passed_on(response: httpx.Response, sent: bytes, logs: Lines) -> None:
    assert response.status_code == 200
    assert response.content == sent, "the answer reached the client byte for byte"
    assert len(logs.odd()) <= 1, logs.odd()
    assert all("\n" not in line and "Traceback" not in line for line in logs.lines)


# --- odd but well-formed answers ----------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**400, 10**400) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=["Cs"]), max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)
not_json = st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=20).filter(
    lambda t: not _is_json(t))


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


NAMED_ODDITIES = {
    "null message": event("message_start", {"type": "message_start", "message": None}),
    "message a list": event("message_start", {"type": "message_start", "message": [1, 2]}),
    "usage a string": event("message_start", {"type": "message_start", "message": {"usage": "many"}}),
    "negative usage": event("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": -7}}}),
    "400-digit usage": event("message_start", {"type": "message_start",
                                               "message": {"usage": {"input_tokens": int("9" * 400)}}}),
    "content_block a string": event("content_block_start", {"type": "content_block_start", "index": 0,
                                                            "content_block": "text"}),
    "delta a list": event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": [1]}),
    "text delta a number": event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                        "delta": {"type": "text_delta", "text": 5}}),
    "message_delta a string": event("message_delta", {"type": "message_delta", "delta": "stop"}),
    "data a list": event("message_delta", [1, 2, 3]),
    "not JSON": event("content_block_delta", "{oops"),
    "no data": b"event: message_delta\n\n",
}


@pytest.mark.parametrize("oddity", list(NAMED_ODDITIES))
def test_an_odd_anthropic_stream_reaches_the_client_byte_for_byte(gw: InProcess, upstream: Upstream, logs: Lines,
                                                                  oddity: str) -> None:
    sent = (event("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}})
            + NAMED_ODDITIES[oddity]
            + event("content_block_start", {"type": "content_block_start", "index": 0,
                                            "content_block": {"type": "text", "text": ""}})
            + event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": "still here"}})
            + event("content_block_stop", {"type": "content_block_stop", "index": 0})
            + event("message_stop", {"type": "message_stop"}))
    upstream.set(stream(sent))
    assert_passed_on(ask(gw, "anthropic", stream=True), sent, logs)
    assert gw.client.get("/metrics").status_code == 200


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(st.tuples(st.sampled_from(["message_start", "content_block_start", "content_block_delta",
                                                "content_block_stop", "message_delta", "ping", None]),
                               st.one_of(json_values, not_json,
                                         st.fixed_dictionaries({"index": st.just(0), "delta": json_values}),
                                         st.fixed_dictionaries({"message": json_values}),
                                         st.fixed_dictionaries({"message": st.fixed_dictionaries(
                                             {"usage": st.fixed_dictionaries({"input_tokens": json_values})})}))),
                     min_size=1, max_size=6))
def test_any_anthropic_stream_of_odd_events_reaches_the_client_byte_for_byte(
        gw: InProcess, upstream: Upstream, logs: Lines, data: list[tuple[str | None, Any]]) -> None:
    sent = b"".join(event(name, value) for name, value in data)
    upstream.set(stream(sent))
    logs.lines.clear()
    assert_passed_on(ask(gw, "anthropic", stream=True), sent, logs)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(api=st.sampled_from(["chat", "responses"]),
       chunks=st.lists(st.one_of(json_values, not_json,
                                 st.fixed_dictionaries({"choices": st.lists(st.fixed_dictionaries(
                                     {"index": st.just(0), "delta": json_values}), max_size=2)}),
                                 st.fixed_dictionaries({"choices": st.just([{"index": 0, "delta": {"tool_calls": [
                                     {"index": 0, "id": "c1", "function": {"name": "Read", "arguments": "{}"}}]},
                                     "finish_reason": None}])}),
                                 st.fixed_dictionaries({"type": st.sampled_from(
                                     ["response.created", "response.output_item.added", "response.completed"]),
                                     "response": json_values, "item": json_values, "output_index": json_values}),
                                 st.fixed_dictionaries({"usage": st.fixed_dictionaries(
                                     {"prompt_tokens": json_values})})), min_size=1, max_size=6))
def test_any_openai_stream_of_odd_chunks_reaches_the_client_byte_for_byte(
        gw: InProcess, upstream: Upstream, logs: Lines, api: str, chunks: list[Any]) -> None:
    sent = b"".join(event(None, c) for c in chunks) + b"data: [DONE]\n\n"
    upstream.set(stream(sent))
    logs.lines.clear()
    assert_passed_on(ask(gw, api, stream=True), sent, logs)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(api=st.sampled_from(list(PATHS)), count=json_values | st.integers(-10**400, 10**400))
def test_any_usage_number_in_a_whole_answer_passes_on_unchanged(gw: InProcess, upstream: Upstream, logs: Lines,
                                                                api: str, count: Any) -> None:
    body = {"anthropic": {"type": "message", "content": [], "usage": {"input_tokens": count}},
            "chat": {"choices": [], "usage": {"prompt_tokens": count}},
            "responses": {"id": "r", "output": [], "usage": {"input_tokens": count}}}[api]
    sent = json.dumps(body).encode()
    upstream.set(whole(sent))
    logs.lines.clear()
    r = ask(gw, api)
    assert_passed_on(r, sent, logs)
    entry = gw.gateway.registry.find(r.headers["x-worksurface-session"])
    assert entry is not None
    assert entry is not None and entry.session is not None and entry.recording is None  # stored before the answer
    kept = (entry.session.store.get_meta("reported_usage") or {}).get("tokens")
    assert kept is None or 0 < kept <= 3 * MAX_REPORTED_TOKENS
    plausible = isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= MAX_REPORTED_TOKENS
    assert bool(logs.odd()) is (not plausible and count is not None)


# --- fetch_artifact with an input that is not an object ------------------------------------------------

NOT_OBJECTS = [[1, 2], "art-1", 7, None, True]


@pytest.fixture(scope="module")
def fetching(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with inprocess_gateway(tmp_path_factory.mktemp("fetching"), upstream, offer_fetch=True) as running:
        yield running


def _follow_up_results(gw: InProcess) -> list[str]:
    """The tool results the gateway sent upstream in its last follow-up request."""
    body = gw.seen[-1].json()
    results: list[str] = []
    for m in body.get("messages") or []:
        if m.get("role") == "tool":
            results.append(m["content"])
        for b in m.get("content") if isinstance(m.get("content"), list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                results.append(b["content"])
    results += [i["output"] for i in body.get("input") or [] if i.get("type") == "function_call_output"]
    return results


@pytest.mark.parametrize("given_input", NOT_OBJECTS, ids=repr)
def test_a_fetch_with_an_input_that_is_not_an_object_gets_an_error_result(fetching: InProcess, upstream: Upstream,
                                                                         logs: Lines, given_input: Any) -> None:
    done = {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 5}}
    call = {"type": "message", "role": "assistant", "stop_reason": "tool_use", "usage": {"input_tokens": 5},
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "fetch_artifact", "input": given_input}]}
    upstream.set(whole(call), whole(done))
    r = ask(fetching, "anthropic")
    assert r.status_code == 200 and r.json()["content"] == [{"type": "text", "text": "ok"}]
    assert [t[:6] for t in _follow_up_results(fetching)] == ["error:"]
    # streamed: the call's input arrives as partial JSON
    partial = json.dumps(given_input)
    sent = (event("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}})
            + event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": "toolu_2", "name": "fetch_artifact", "input": {}}})
            + event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "input_json_delta", "partial_json": partial}})
            + event("content_block_stop", {"type": "content_block_stop", "index": 0})
            + event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}})
            + event("message_stop", {"type": "message_stop"}))
    upstream.set(stream(sent), stream(event("message_stop", {"type": "message_stop"})))
    r = ask(fetching, "anthropic", stream=True)
    assert r.status_code == 200 and b"fetch_artifact" not in r.content
    assert [t[:6] for t in _follow_up_results(fetching)] == ["error:"]
    assert not any("Traceback" in line for line in logs.lines)


@pytest.mark.parametrize("arguments", ["[1]", '"art-1"', "{not json", "7", "null"])
def test_openai_fetch_calls_with_arguments_that_are_not_an_object_get_an_error_result(
        fetching: InProcess, upstream: Upstream, arguments: str) -> None:
    chat_call = {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "fetch_artifact", "arguments": arguments}}]}}]}
    chat_done = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]}
    upstream.set(whole(chat_call), whole(chat_done))
    r = ask(fetching, "chat")
    assert r.status_code == 200 and r.json() == chat_done
    assert [t[:6] for t in _follow_up_results(fetching)] == ["error:"]
    responses_call = {"id": "r1", "output": [{"type": "function_call", "call_id": "c1", "name": "fetch_artifact",
                                              "arguments": arguments}]}
    responses_done = {"id": "r2", "output": [{"type": "message", "role": "assistant",
                                              "content": [{"type": "output_text", "text": "ok"}]}]}
    upstream.set(whole(responses_call), whole(responses_done))
    r = ask(fetching, "responses")
    assert r.status_code == 200 and r.json() == responses_done
    assert [t[:6] for t in _follow_up_results(fetching)] == ["error:"]


# --- lone surrogates -----------------------------------------------------------------------------------

LONE = [b"\\ud800", b"\\udfff", b"\\udbff\\u0041", b"x\\udc00y"]


@pytest.mark.parametrize("escape", LONE)
def test_a_lone_surrogate_in_a_request_is_forwarded_as_its_escape(gw: InProcess, upstream: Upstream,
                                                                   escape: bytes) -> None:
    upstream.set(whole({"type": "message", "content": [], "usage": {"input_tokens": 3}}))
    # untouched (server-side state, or a body the gateway does not read): the very bytes
    passthrough = b'{"model":"m","previous_response_id":"resp_0","input":[{"role":"user","content":"a' + escape + b'"}]}'
    gw.client.post("/v1/responses", content=passthrough, headers={"content-type": "application/json"})
    assert gw.seen[-1].body == passthrough
    unread = b'["a' + escape + b'"]'
    gw.client.post("/v1/messages", content=unread, headers={"content-type": "application/json", **HEADERS})
    assert gw.seen[-1].body == unread
    # edited (worksurface's status added): the escape survives, and the body stays valid UTF-8
    raw = (b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q ' + str(next(_turn)).encode()
           + b' ' + escape + b'"}]}')
    r = gw.client.post("/v1/messages", content=raw, headers={"content-type": "application/json", **HEADERS})
    assert r.status_code == 200 and r.headers["x-worksurface"] == "prepared"
    forwarded = gw.seen[-1].body
    assert all(lone in forwarded for lone in re.findall(rb"\\ud[89a-f][0-9a-f]{2}", escape))
    forwarded.decode("utf-8")
    assert json.loads(forwarded)["messages"][0]["content"][0]["text"] == json.loads(raw)["messages"][0]["content"]


@pytest.mark.parametrize("escape", LONE)
def test_a_lone_surrogate_in_an_answer_reaches_the_client_as_its_escape(gw: InProcess, upstream: Upstream,
                                                                         escape: bytes) -> None:
    body = b'{"type":"message","content":[{"type":"text","text":"' + escape + b'"}],"usage":{"input_tokens":2}}'
    upstream.set(whole(body))
    assert ask(gw, "anthropic").content == body
    events = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
              b'"delta":{"type":"text_delta","text":"' + escape + b'"}}\n\n')
    upstream.set(stream(events))
    assert ask(gw, "anthropic", stream=True).content == events
    # rewritten (the client asked for context_management: its final delta is the gateway's): still the escape
    final = (b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
             b'"stop_sequence":"' + escape + b'"},"usage":{"output_tokens":1}}\n\n')
    upstream.set(stream(final))
    r = ask(gw, "anthropic", stream=True, context_management={"edits": [{"type": "clear_thinking_20251015"}]})
    assert r.status_code == 200 and b"applied_edits" in r.content
    assert all(lone in r.content for lone in re.findall(rb"\\ud[89a-f][0-9a-f]{2}", escape))
    r.content.decode("utf-8")


# --- no password in any log line ------------------------------------------------------------------------

passwords = st.text(st.characters(whitelist_categories=["Lu", "Ll", "Nd"], whitelist_characters="-_.~!$&'()*+,;=%"),
                    min_size=6, max_size=30)


@given(password=passwords, user=st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True),
       form=st.sampled_from(["postgresql://{u}:{p}@db.internal:5432/ws", "postgres://{u}:{p}@10.0.0.5/ws?sslmode=require",
                             "host=db user={u} password={p} dbname=ws", "postgresql://db/ws?user={u}&password={p}",
                             "http://{u}:{p}@proxy.internal:3128", "https://{p}@gateway.example/v1"]),
       json_logs=st.booleans())
def test_no_log_line_carries_a_password(password: str, user: str, form: str, json_logs: bool) -> None:
    # As the password must be written to work: percent-encoded where URL syntax would split it.
    if "?" in form:
        password = urllib.parse.quote(password, safe="")
    elif "://" in form:
        password = urllib.parse.quote(password, safe="!$&'()*+,;=")
    url = form.format(u=user, p=password)
    formatter = JsonFormatter() if json_logs else TextFormatter()
    record = logging.makeLogRecord({"name": LOGGER, "levelno": logging.INFO, "levelname": "INFO",
                                    "msg": f"opening {url}", "args": (),
                                    "fields": {"store": url, "upstream": {"anthropic": url}, "errors": [f"at {url}"]}})
    try:
        raise RuntimeError(f"cannot connect to {url}")
    except RuntimeError:
        record.exc_info = sys.exc_info()
    line = formatter.format(record)
    assert password not in line, line
    assert "***" in line
    if json_logs:
        assert json.loads(line)["store"] == redact(url)


@pytest.mark.parametrize("json_logs", [False, True])
def test_the_gateways_startup_line_hides_the_store_and_upstream_passwords(tmp_path: Path, json_logs: bool) -> None:
    store_password, upstream_password = "Pg-s3cret.pw", "Up-s3cret.pw"
    port = free_port()
    command = [sys.executable, "-m", "worksurface", "serve", "--port", str(port),
               "--store", f"postgresql://alice:{store_password}@127.0.0.1:9/ws",
               "--upstream", f"http://bob:{upstream_password}@127.0.0.1:9"]
    if json_logs:
        command.append("--json-logs")
    log = tmp_path / "log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=out,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            deadline = time.monotonic() + 60
            while b"listening" not in log.read_bytes() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            process.terminate()
            process.wait(15)
    text = log.read_text(encoding="utf-8")
    assert "listening" in text, text
    assert store_password not in text and upstream_password not in text, text
    first = text.splitlines()[0]
    if json_logs:
        line = json.loads(first)
        assert line["store"] == "postgresql://alice:***@127.0.0.1:9/ws"
        assert line["upstream"] == "http://bob:***@127.0.0.1:9"
    else:
        assert re.search(r"store=postgresql://alice:\*\*\*@127\.0\.0\.1:9/ws", first), first


# --- an upstream that breaks off --------------------------------------------------------------------------

class BreaksOff(httpx.AsyncByteStream):
    """A body that sends `head`, then the connection drops."""

    def __init__(self, head: bytes) -> None:
        self.head = head

    async def __aiter__(self) -> Any:
        yield self.head
        raise httpx.ReadError("connection reset by peer")


def breaking(head: bytes, content_type: str) -> Callable[[], httpx.Response]:
    return lambda: httpx.Response(200, headers={"content-type": content_type}, stream=BreaksOff(head))


def refused() -> httpx.Response:
    raise httpx.ConnectError("connection refused")


def test_an_upstream_that_breaks_off_ends_the_answer_without_a_traceback(gw: InProcess, upstream: Upstream,
                                                                         logs: Lines) -> None:
    head = event("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}})
    upstream.set(breaking(head, "text/event-stream"))
    r = ask(gw, "anthropic", stream=True)
    assert r.status_code == 200 and r.content == head, "the client has what came"
    upstream.set(breaking(b'{"type":"message","con', "application/json"))
    r = ask(gw, "anthropic")
    assert r.status_code == 502 and r.json()["type"] == "error"
    assert any("broke off" in line for line in logs.lines)
    assert not any("Traceback" in line for line in logs.lines)


def test_a_fetch_follow_up_that_finds_no_upstream_ends_the_answer_cleanly(fetching: InProcess, upstream: Upstream,
                                                                          logs: Lines) -> None:
    call = {"type": "message", "role": "assistant", "stop_reason": "tool_use", "usage": {"input_tokens": 5},
            "content": [{"type": "text", "text": "let me look"},
                        {"type": "tool_use", "id": "toolu_9", "name": "fetch_artifact", "input": {"id": "a1"}}]}
    upstream.set(whole(call), refused)
    r = ask(fetching, "anthropic")
    assert r.status_code == 200 and r.json()["content"] == [{"type": "text", "text": "let me look"}]
    sent = (event("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}})
            + event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": "toolu_8", "name": "fetch_artifact", "input": {}}})
            + event("content_block_stop", {"type": "content_block_stop", "index": 0})
            + event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}))
    upstream.set(stream(sent), refused)
    r = ask(fetching, "anthropic", stream=True)
    assert r.status_code == 200 and b"fetch_artifact" not in r.content
    assert sum("follow-up failed" in line for line in logs.lines) == 2
    assert not any("Traceback" in line for line in logs.lines)


CLIENT_TOOLS = {
    "anthropic": [{"name": "fetch_artifact", "description": "the client's own", "input_schema": {"type": "object"}}],
    "chat": [{"type": "function", "function": {"name": "fetch_artifact", "description": "the client's own",
                                                "parameters": {"type": "object"}}}],
    "responses": [{"type": "function", "name": "fetch_artifact", "description": "the client's own",
                   "parameters": {"type": "object"}}],
}
MODEL_CALLS = {
    "anthropic": {"type": "message", "role": "assistant", "stop_reason": "tool_use", "usage": {"input_tokens": 5},
                  "content": [{"type": "tool_use", "id": "toolu_c", "name": "fetch_artifact", "input": {"id": "x"}}]},
    "chat": {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [
        {"id": "call_c", "type": "function", "function": {"name": "fetch_artifact", "arguments": '{"id": "x"}'}}]}}]},
    "responses": {"id": "r", "output": [{"type": "function_call", "call_id": "c", "name": "fetch_artifact",
                                         "arguments": '{"id": "x"}'}]},
}


@pytest.mark.parametrize("api", list(PATHS))
def test_a_clients_own_tool_named_fetch_artifact_stays_the_clients(fetching: InProcess, upstream: Upstream,
                                                                    api: str) -> None:
    """Authority comes from who declared a tool, never from its name: the model's call to the client's
    fetch_artifact goes to the client as it came, and the gateway adds and answers nothing."""
    sent = json.dumps(MODEL_CALLS[api]).encode()
    upstream.set(whole(sent))
    before = len(fetching.seen)
    r = ask(fetching, api, tools=CLIENT_TOOLS[api])
    assert r.status_code == 200 and r.content == sent
    assert len(fetching.seen) == before + 1, "no follow-up of the gateway's own"
    assert fetching.seen[-1].json()["tools"] == CLIENT_TOOLS[api]


# --- requests of any shape --------------------------------------------------------------------------------

request_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["role", "content", "type", "text", "name", "id", "input", "tool_use_id", "edits", "trigger", "keep",
         "function", "arguments", "tool_calls", "call_id", "output"]), inner, max_size=4), max_leaves=10)
request_items = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool", "developer"]),
                                       "content": request_values}) | request_values


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from([*PATHS.values(), "/v1/messages/count_tokens"]), items=st.lists(request_items, max_size=4),
       extra=st.dictionaries(st.sampled_from(["system", "tools", "context_management", "stream", "instructions",
                                              "metadata", "prompt_cache_key"]), request_values, max_size=3))
def test_a_request_of_any_shape_gets_the_upstreams_answer_never_a_500(
        fetching: InProcess, upstream: Upstream, logs: Lines, path: str, items: list[Any], extra: dict[str, Any]) -> None:
    answer = json.dumps({"type": "message", "content": [], "usage": {"input_tokens": 1}}).encode()
    upstream.set(whole(answer))
    logs.lines.clear()
    raw = json.dumps({"model": "m", ("input" if "responses" in path else "messages"): items, **extra}).encode()
    r = fetching.client.post(path, content=raw, headers={"content-type": "application/json", **HEADERS})
    assert r.status_code == 200 and r.content == answer
    if r.headers["x-worksurface"] == "unparsed":
        assert fetching.seen[-1].body == raw, "a request the gateway cannot read goes on as it came"
    assert not any("Traceback" in line or " error " in line for line in logs.lines), logs.lines
