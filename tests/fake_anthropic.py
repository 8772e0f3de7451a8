"""A fake Anthropic Messages API on 127.0.0.1 for driving the real Claude Code client in tests.

It answers `POST /v1/messages` (streamed as server-sent events when the request asks for `stream`,
else as one JSON body) with a short text reply, `POST /v1/messages/count_tokens` with an estimate, and
anything else with a 404 naming the path. A `script` may answer a request with content blocks of its
own (a `tool_use`, so the client runs a tool and sends its result back). Every request is logged (path, body, kind). Reported input
usage is an estimate of the request's size, so the client's own context accounting behaves as it
would against the real API. The server runs on a daemon thread and stops by itself after
`LIFETIME_SECONDS` even if a test forgets to stop it.

Run standalone to poke at a client by hand: `python tests/fake_anthropic.py --log /tmp/requests.jsonl`.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

# A test that forgets `stop()` (or dies) still leaves no server behind past this.
LIFETIME_SECONDS = 300.0
# Characters per token for the usage estimate: the usual rough figure for English text and code; what
# matters is that the reported usage grows with the request, as the real API's does.
CHARS_PER_TOKEN = 4
REPLY_TEXT = "Acknowledged: resumed from the saved session."
MODEL = "claude-fake-1"
# What Claude Code's own compaction request says (its summarization prompt); any one marks a request
# as a summarization request rather than the user's turn.
SUMMARY_MARKERS = ("create a detailed summary of the conversation", "Your task is to create a detailed summary",
                   "Respond with plain text only", "summarize the conversation")


def request_text(body: dict[str, Any]) -> str:
    """All the text a request carries (system prompt and every message), for searching."""
    parts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for key in ("text", "content", "input", "thinking"):
                if key in value:
                    walk(value[key] if key != "input" else json.dumps(value[key]))

    walk(body.get("system"))
    walk(body.get("messages"))
    return "\n".join(parts)


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the request's final user message (where a prompt or a summarization ask sits)."""
    messages = body.get("messages") or []
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return request_text({"messages": [message]})
    return ""


def classify(path: str, body: dict[str, Any]) -> str:
    """'count_tokens', 'summarize' (the client compacting on its own), or 'message'."""
    if path.endswith("/count_tokens"):
        return "count_tokens"
    last = last_user_text(body).lower()
    if any(m.lower() in last for m in SUMMARY_MARKERS):
        return "summarize"
    return "message"


def estimate_tokens(body: dict[str, Any]) -> int:
    text = request_text(body) + json.dumps(body.get("tools") or [])
    return max(1, len(text) // CHARS_PER_TOKEN)


@dataclass
class LoggedRequest:
    path: str
    body: dict[str, Any]
    kind: str
    input_tokens: int
    stream: bool


@dataclass
class FakeAnthropic:
    """The server. `start()` binds a free loopback port; `url` is the base URL for ANTHROPIC_BASE_URL."""

    reply: str = REPLY_TEXT
    lifetime: float = LIFETIME_SECONDS
    # (request body) -> content blocks to answer a Messages request with; None for the default text.
    script: Callable[[dict[str, Any]], list[dict[str, Any]] | None] | None = None
    requests: list[LoggedRequest] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def start(self) -> "FakeAnthropic":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet: the request log is the record
                pass

            def do_HEAD(self) -> None:
                self._send_json(200, {})

            def do_GET(self) -> None:
                fake._log(self.path, {}, "get", 0, False)
                self._send_json(404, {"type": "error", "error": {"type": "not_found_error",
                                                                  "message": f"fake API: no GET {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                path = self.path.split("?", 1)[0]
                if not path.startswith("/v1/messages"):
                    fake._log(path, body, "other", 0, False)
                    self._send_json(404, {"type": "error", "error": {"type": "not_found_error",
                                                                      "message": f"fake API: no POST {path}"}})
                    return
                kind = classify(path, body)
                tokens = estimate_tokens(body)
                stream = bool(body.get("stream"))
                fake._log(path, body, kind, tokens, stream)
                if kind == "count_tokens":
                    self._send_json(200, {"input_tokens": tokens})
                elif stream:
                    self._stream(fake.blocks_for(body, kind), tokens)
                else:
                    self._send_json(200, fake.message_body(fake.blocks_for(body, kind), tokens))

            def _send_json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, blocks: list[dict[str, Any]], tokens: int) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                start = fake.message_body([], tokens)
                start["stop_reason"] = None
                start["usage"]["output_tokens"] = 1
                events: list[tuple[str, dict[str, Any]]] = [
                    ("message_start", {"type": "message_start", "message": start}), ("ping", {"type": "ping"})]
                for index, block in enumerate(blocks):
                    events += _block_events(index, block)
                events += [
                    ("message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": _stop_reason(blocks), "stop_sequence": None},
                                       "usage": {"output_tokens": _output_tokens(blocks)}}),
                    ("message_stop", {"type": "message_stop"}),
                ]
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True, name="fake-anthropic").start()
        timer = threading.Timer(self.lifetime, self.stop)
        timer.daemon = True
        timer.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> "FakeAnthropic":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reply_for(self, kind: str) -> str:
        # A summarization request gets something summary-shaped, so a client that compacts on its own
        # still completes and the test can report what it did instead of hanging.
        return f"<summary>fake summary</summary>" if kind == "summarize" else self.reply

    def blocks_for(self, body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
        scripted = self.script(body) if self.script is not None and kind == "message" else None
        return scripted if scripted is not None else [{"type": "text", "text": self.reply_for(kind)}]

    def message_body(self, blocks: list[dict[str, Any]], input_tokens: int) -> dict[str, Any]:
        return {"id": f"msg_fake_{len(self.requests):04d}", "type": "message", "role": "assistant",
                "model": MODEL, "content": blocks, "stop_reason": _stop_reason(blocks), "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": _output_tokens(blocks),
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}

    def _log(self, path: str, body: dict[str, Any], kind: str, tokens: int, stream: bool) -> None:
        with self._lock:
            self.requests.append(LoggedRequest(path, body, kind, tokens, stream))

    def messages(self) -> list[LoggedRequest]:
        """Logged Messages API calls (not token counts or stray paths), in arrival order."""
        return [r for r in self.requests if r.kind in ("message", "summarize")]


def _block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The stream events of one content block: a text in word deltas, a tool_use as its input's JSON."""
    if block["type"] == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
    else:
        start = {"type": "text", "text": ""}
        words = block["text"].split(" ")
        deltas = [{"type": "text_delta", "text": w if i == len(words) - 1 else w + " "} for i, w in enumerate(words)]
    return ([("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})]
            + [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
            + [("content_block_stop", {"type": "content_block_stop", "index": index})])


def _stop_reason(blocks: list[dict[str, Any]]) -> str:
    return "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"


def _output_tokens(blocks: list[dict[str, Any]]) -> int:
    return max(1, sum(len(b.get("text", "").split()) or 10 for b in blocks))


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", help="append each request as a JSON line to this file")
    parser.add_argument("--seconds", type=float, default=LIFETIME_SECONDS, help="stop after this long")
    args = parser.parse_args()
    fake = FakeAnthropic(lifetime=args.seconds).start()
    print(f"ANTHROPIC_BASE_URL={fake.url}", flush=True)
    seen = 0
    deadline = time.time() + args.seconds
    while time.time() < deadline and fake._server is not None:
        time.sleep(0.2)
        while seen < len(fake.requests):
            r = fake.requests[seen]
            seen += 1
            line = json.dumps({"path": r.path, "kind": r.kind, "input_tokens": r.input_tokens, "body": r.body})
            if args.log:
                with open(args.log, "a", encoding="utf-8") as fh:
                    fh.write(line + "\n")
            print(r.path, r.kind, r.input_tokens, flush=True)


if __name__ == "__main__":
    main()
