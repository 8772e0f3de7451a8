"""The gateway when things go wrong: an upstream that is slow, rate-limited, failing or overloaded; a
client that hangs up mid-stream; the gateway killed mid-request; two requests of one conversation
at once; worksurface itself failing (the original request goes through)."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from fake_anthropic import FakeAnthropic
from gateway_helpers import gateway_process, running_gateway
from worksurface.gateway import plan as plan_module

HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}


def body(turns: int = 1, stream: bool = False, first: str = "hello") -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
    for k in range(turns - 1):
        messages += [{"role": "assistant", "content": f"answer {k}"}, {"role": "user", "content": f"again {k}"}]
    return {"model": "m", "max_tokens": 20, "system": "sys", "messages": messages, "stream": stream}


class Scripted:
    """An upstream whose answers the test sets: a status and body, a delay, or a stream that stalls."""

    def __init__(self) -> None:
        self.status = 200
        self.payload: bytes = json.dumps({"type": "message", "content": [], "usage": {"input_tokens": 1}}).encode()
        self.headers: dict[str, str] = {"content-type": "application/json"}
        self.delay = 0.0
        self.stream_events = 0          # >0: answer as a stream of this many pings, one per 50 ms
        self.closed_early = threading.Event()
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.requests.append(json.loads(raw or b"{}"))
                time.sleep(owner.delay)
                if owner.stream_events:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    try:
                        for _ in range(owner.stream_events):
                            self.wfile.write(b'event: ping\ndata: {"type": "ping"}\n\n')
                            self.wfile.flush()
                            time.sleep(0.05)
                    except (BrokenPipeError, ConnectionResetError):
                        owner.closed_early.set()
                    return
                self.send_response(owner.status)
                for k, v in owner.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(owner.payload)))
                self.end_headers()
                self.wfile.write(owner.payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def upstream() -> Iterator[Scripted]:
    server = Scripted()
    yield server
    server.close()


def test_upstream_timeout_is_answered_in_the_api_shape(tmp_path: Path, upstream: Scripted) -> None:
    upstream.delay = 2.0
    with running_gateway(tmp_path, upstream.url, upstream_timeout=0.5) as gw:
        r = httpx.post(f"{gw.url}/v1/messages", json=body(), headers=HEADERS, timeout=30)
        assert r.status_code == 504 and r.json()["type"] == "error"
        assert "did not answer in time" in r.json()["error"]["message"]
        upstream.delay = 0.0
        assert httpx.post(f"{gw.url}/v1/messages", json=body(2), headers=HEADERS, timeout=30).status_code == 200


@pytest.mark.parametrize("status,payload,extra", [
    (429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}, {"retry-after": "7"}),
    (500, {"type": "error", "error": {"type": "api_error", "message": "boom"}}, {}),
    (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, {}),
])
def test_upstream_errors_are_returned_as_given(tmp_path: Path, upstream: Scripted, status: int,
                                               payload: dict[str, Any], extra: dict[str, str]) -> None:
    upstream.status, upstream.payload = status, json.dumps(payload).encode()
    upstream.headers = {"content-type": "application/json", **extra}
    with running_gateway(tmp_path, upstream.url) as gw:
        r = httpx.post(f"{gw.url}/v1/messages", json=body(), headers=HEADERS, timeout=30)
        assert r.status_code == status and r.json() == payload
        for k, v in extra.items():
            assert r.headers[k] == v
        # The retry of the same request is the same view (nothing fired twice), and then succeeds.
        upstream.status = 200
        upstream.payload = json.dumps({"type": "message", "content": [], "usage": {"input_tokens": 1}}).encode()
        again = httpx.post(f"{gw.url}/v1/messages", json=body(), headers=HEADERS, timeout=30)
        assert again.status_code == 200 and again.headers["x-worksurface"] == "prepared"
    assert upstream.requests[0] == upstream.requests[1]


def test_client_disconnect_mid_stream_leaves_the_gateway_working(tmp_path: Path, upstream: Scripted) -> None:
    upstream.stream_events = 100
    with running_gateway(tmp_path, upstream.url) as gw:
        with httpx.stream("POST", f"{gw.url}/v1/messages", json=body(stream=True), headers=HEADERS, timeout=30) as r:
            for _ in r.iter_bytes():
                break                   # hang up after the first bytes
        assert upstream.closed_early.wait(10), "the gateway closed its upstream stream when the client left"
        upstream.stream_events = 0
        r = httpx.post(f"{gw.url}/v1/messages", json=body(2), headers=HEADERS, timeout=30)
        assert r.status_code == 200 and r.headers["x-worksurface"] == "prepared"


def test_two_requests_of_one_conversation_at_once_are_prepared_one_after_the_other(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    active, overlap = [0], [False]
    original = plan_module.plan_call

    def slow_plan(*args: Any, **kwargs: Any) -> Any:
        active[0] += 1
        overlap[0] |= active[0] > 1
        time.sleep(0.3)
        try:
            return original(*args, **kwargs)
        finally:
            active[0] -= 1

    monkeypatch.setattr("worksurface.gateway.app.plan_call", slow_plan)
    with FakeAnthropic() as fake, running_gateway(tmp_path, fake.url) as gw:
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(httpx.post, f"{gw.url}/v1/messages", json=body(n), headers=HEADERS, timeout=30)
                       for n in (3, 4)]
            answers = [f.result() for f in futures]
        assert [a.status_code for a in answers] == [200, 200]
        assert len({a.headers["x-worksurface-session"] for a in answers}) == 1
        assert not overlap[0], "the second request waited for the first"
        assert gw.sessions()[0]["calls"] == 2
        assert httpx.post(f"{gw.url}/v1/messages", json=body(5), headers=HEADERS, timeout=30).status_code == 200


def test_worksurface_failure_forwards_the_original_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in worksurface")

    monkeypatch.setattr("worksurface.gateway.app.plan_call", broken)
    with FakeAnthropic() as fake, running_gateway(tmp_path, fake.url) as gw:
        sent = body(3)
        r = httpx.post(f"{gw.url}/v1/messages", json=sent, headers=HEADERS, timeout=30)
        assert r.status_code == 200 and r.headers["x-worksurface"] == "failed_open"
        assert fake.requests[-1].body == sent
        metrics = httpx.get(f"{gw.url}/metrics", timeout=10).text
        assert 'outcome="failed_open"} 1.0' in metrics


@pytest.mark.slow
def test_gateway_killed_mid_request_then_the_conversation_goes_on(tmp_path: Path, upstream: Scripted) -> None:
    store = tmp_path / "store"
    with gateway_process(store, upstream.url) as gw:
        first = httpx.post(f"{gw.url}/v1/messages", json=body(2), headers=HEADERS, timeout=30)
        assert first.status_code == 200
        session = first.headers["x-worksurface-session"]
        upstream.delay = 6.0
        worker = threading.Thread(target=lambda: _ignore(lambda: httpx.post(
            f"{gw.url}/v1/messages", json=body(3), headers=HEADERS, timeout=60)), daemon=True)
        worker.start()
        deadline = time.monotonic() + 10
        while len(upstream.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gw.process is not None
        gw.process.kill()               # SIGKILL while the request is in flight
        gw.process.wait(10)
    upstream.delay = 0.0
    with gateway_process(store, upstream.url) as again:
        r = httpx.post(f"{again.url}/v1/messages", json=body(4), headers=HEADERS, timeout=30)
        assert r.status_code == 200 and r.headers["x-worksurface"] == "prepared"
        assert r.headers["x-worksurface-session"] == session
        detail = httpx.get(f"{again.url}/sessions/{session}", timeout=10).json()
        assert detail["view_messages"] >= 7


def _ignore(call: Any) -> None:
    try:
        call()
    except httpx.HTTPError:
        pass


def test_a_slow_conversation_does_not_hold_up_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A conversation whose preparation takes long (a compaction) holds one worker thread: other
    conversations are prepared and answered meanwhile, and the event loop stays free."""
    original = plan_module.plan_call
    release = threading.Event()

    def plan(api: Any, registry: Any, entry: Any, body: Any, *args: Any) -> Any:
        if "slow" in json.dumps(body["messages"][0]):
            release.wait(20)
        return original(api, registry, entry, body, *args)

    monkeypatch.setattr("worksurface.gateway.app.plan_call", plan)
    slow = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "the slow one"}]}
    with FakeAnthropic() as fake, running_gateway(tmp_path, fake.url) as gw:
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(httpx.post, f"{gw.url}/v1/messages", json=slow, headers=HEADERS, timeout=30)
            time.sleep(0.3)
            others = [httpx.post(f"{gw.url}/v1/messages", json=body(n), headers=HEADERS, timeout=10) for n in (3, 4, 5)]
            health = httpx.get(f"{gw.url}/healthz", timeout=5)
            assert not pending.done(), "the slow conversation was still being prepared"
            release.set()
            assert pending.result().status_code == 200
    assert [r.status_code for r in others] == [200, 200, 200] and health.status_code == 200
    assert all(r.headers["x-worksurface"] == "prepared" for r in others)


def test_a_conversations_next_request_reads_only_what_is_new(tmp_path: Path) -> None:
    """The first request of a conversation is read whole; the next ones reuse the messages they
    repeat (the same objects the session saw), so reading follows what is new."""
    with FakeAnthropic() as fake, running_gateway(tmp_path, fake.url) as gw:
        assert gw.gateway is not None
        history: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
        read: list[int] = []
        firsts: list[Any] = []
        for n in range(6):
            r = httpx.post(f"{gw.url}/v1/messages", json={"model": "m", "max_tokens": 10, "messages": history},
                           headers=HEADERS, timeout=30)
            assert r.status_code == 200
            entry = gw.gateway.registry.find(r.headers["x-worksurface-session"])
            assert entry is not None and entry.session is not None
            read.append(entry.reuse.read_count)
            firsts.append(entry.session._log[0])
            history += [{"role": "assistant", "content": f"answer {n}"}, {"role": "user", "content": f"more {n}"}]
    assert read == [1, 2, 2, 2, 2, 2], read     # the first whole (one message); then the two new ones
    assert all(m is firsts[0] for m in firsts), "the session sees the message objects it saw before"
