"""A fake Anthropic Messages API on 127.0.0.1 for driving the real Claude Code client in tests.

It answers `POST /v1/messages` (streamed as server-sent events when the request asks for `stream`,
else as one JSON body) with a short text reply, `POST /v1/messages/count_tokens` with an estimate, and
anything else with a 404 naming the path. Every request is logged (path, body, kind, headers). Reported
input usage is an estimate of the request's size, so the client's own context accounting behaves as it
would against the real API. With `cache=True` it keeps a prompt cache as the API does (prefixes
written at `cache_control` breakpoints, read back at a breakpoint or up to 20 blocks before one) and
splits the usage into cache reads, cache writes and uncached input; a `script` callable
`(body, number of model requests so far) -> Answer` makes the model call tools. The server runs on a daemon thread and stops by itself after
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


# The API looks for a cached prefix at each breakpoint and at most this many blocks before it.
CACHE_LOOKBACK_BLOCKS = 20


def cache_blocks(body: dict[str, Any]) -> list[tuple[Any, bool]]:
    """The request as the cache sees it, in order: (block without cache_control, is a breakpoint)."""
    out: list[tuple[Any, bool]] = []

    def add(block: Any) -> None:
        if isinstance(block, dict):
            out.append(({k: v for k, v in block.items() if k != "cache_control"}, block.get("cache_control") is not None))
        else:
            out.append((block, False))

    for tool in body.get("tools") or []:
        add(tool)
    system = body.get("system")
    for block in ([{"type": "text", "text": system}] if isinstance(system, str) else system or []):
        add(block)
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            out.append(({"role": message.get("role"), "text": content}, False))
            continue
        out.append(({"role": message.get("role")}, False))
        for block in content or []:
            add(block)
    if body.get("cache_control") is not None and out:     # automatic caching: the end of the prompt
        out[-1] = (out[-1][0], True)
    return out


@dataclass
class CacheUsage:
    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int


class PromptCache:
    """Prefixes by running hash; tokens by the same chars-per-token estimate as the usage."""

    def __init__(self) -> None:
        self.prefixes: set[str] = set()

    def use(self, body: dict[str, Any], total: int) -> CacheUsage:
        import hashlib
        blocks = cache_blocks(body)
        h = hashlib.blake2b(digest_size=16)
        hashes, tokens, running = [], [], 0
        for block, _ in blocks:
            text = json.dumps(block, sort_keys=True)
            h.update(text.encode())
            hashes.append(h.hexdigest())
            running += len(text) // CHARS_PER_TOKEN
            tokens.append(running)
        scale = total / running if running else 0.0     # the cache's shares of the usage estimate
        points = [i for i, (_, mark) in enumerate(blocks) if mark]
        hit = -1
        for b in points:
            for k in range(b, max(-1, b - CACHE_LOOKBACK_BLOCKS - 1), -1):
                if hashes[k] in self.prefixes:
                    hit = max(hit, k)
                    break
        last = points[-1] if points else -1
        self.prefixes.update(hashes[b] for b in points)
        read = int(tokens[hit] * scale) if hit >= 0 else 0
        written = int(tokens[last] * scale) - read if last > hit else 0
        return CacheUsage(max(0, total - read - written), read, max(0, written))


@dataclass
class Answer:
    """A scripted model answer: its content blocks and stop reason."""

    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"


def tool_use(name: str, tool_input: dict[str, Any], call_id: str) -> Answer:
    return Answer([{"type": "tool_use", "id": call_id, "name": name, "input": tool_input}], "tool_use")


class _Server(ThreadingHTTPServer):
    # Many clients at once (the gateway's load benchmark): a deeper listen queue than the default 5.
    request_queue_size = 256


@dataclass
class LoggedRequest:
    path: str
    body: dict[str, Any]
    kind: str
    input_tokens: int
    stream: bool
    headers: dict[str, str] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)


@dataclass
class FakeAnthropic:
    """The server. `start()` binds a free loopback port; `url` is the base URL for ANTHROPIC_BASE_URL."""

    reply: str = REPLY_TEXT
    lifetime: float = LIFETIME_SECONDS
    cache: bool = False
    script: Callable[[dict[str, Any], int], Answer] | None = None
    requests: list[LoggedRequest] = field(default_factory=list)
    _prompt_cache: PromptCache = field(default_factory=PromptCache)
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
                tokens = fake.measure(body)
                stream = bool(body.get("stream"))
                usage = fake.usage_for(kind, body, tokens)
                fake._log(path, body, kind, tokens, stream, dict(self.headers.items()), usage)
                if kind == "count_tokens":
                    self._send_json(200, {"input_tokens": tokens})
                    return
                answer = fake.answer_for(kind, body)
                if stream:
                    self._stream(answer, usage)
                else:
                    self._send_json(200, fake.message_body(answer, usage))

            def _send_json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, answer: Answer, usage: dict[str, int]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                start = fake.message_body(Answer([]), usage)
                start["content"], start["stop_reason"] = [], None
                start["usage"]["output_tokens"] = 1
                events: list[tuple[str, dict[str, Any]]] = [
                    ("message_start", {"type": "message_start", "message": start}), ("ping", {"type": "ping"})]
                words = 0
                for index, block in enumerate(answer.content):
                    if block["type"] == "text":
                        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                               "content_block": {"type": "text", "text": ""}}))
                        pieces = block["text"].split(" ")
                        words += len(pieces)
                        for i, word in enumerate(pieces):
                            piece = word if i == len(pieces) - 1 else word + " "
                            events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                                   "delta": {"type": "text_delta", "text": piece}}))
                    else:
                        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                               "content_block": {**block, "input": {}}}))
                        events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                            "type": "input_json_delta", "partial_json": json.dumps(block.get("input", {}))}}))
                    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
                events += [
                    ("message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": answer.stop_reason, "stop_sequence": None},
                                       "usage": {"output_tokens": max(1, words)}}),
                    ("message_stop", {"type": "message_stop"}),
                ]
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        self._server = _Server(("127.0.0.1", 0), Handler)
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

    def answer_for(self, kind: str, body: dict[str, Any]) -> Answer:
        if self.script is not None and kind == "message":
            with self._lock:
                done = sum(1 for r in self.requests if r.kind == "message") - 1
            return self.script(body, done)
        return Answer([{"type": "text", "text": self.reply_for(kind)}])

    def measure(self, body: dict[str, Any]) -> int:
        """The request's input tokens: characters / 4, or with `cache=True` (the realistic mode) the
        cl100k count of its text plus its tools, close to what a provider's tokenizer reports."""
        if not self.cache:
            return estimate_tokens(body)
        from worksurface.core.tokens import get_encoding
        encoding = get_encoding()
        text = request_text(body) + json.dumps(body.get("tools") or [])
        return max(1, len(encoding.encode_ordinary(text)) + 4 * len(body.get("messages") or []))

    def usage_for(self, kind: str, body: dict[str, Any], tokens: int) -> dict[str, int]:
        if not self.cache or kind == "count_tokens":
            return {"input_tokens": tokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        with self._lock:
            split = self._prompt_cache.use(body, tokens)
        return {"input_tokens": split.input_tokens, "cache_creation_input_tokens": split.cache_creation_input_tokens,
                "cache_read_input_tokens": split.cache_read_input_tokens}

    def message_body(self, answer: Answer | str, usage: dict[str, int] | int) -> dict[str, Any]:
        if isinstance(answer, str):
            answer = Answer([{"type": "text", "text": answer}])
        if isinstance(usage, int):
            usage = {"input_tokens": usage, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        words = sum(len(b.get("text", "").split()) for b in answer.content)
        return {"id": f"msg_fake_{len(self.requests):04d}", "type": "message", "role": "assistant",
                "model": MODEL, "content": answer.content, "stop_reason": answer.stop_reason,
                "stop_sequence": None, "usage": {**usage, "output_tokens": max(1, words)}}

    def _log(self, path: str, body: dict[str, Any], kind: str, tokens: int, stream: bool,
             headers: dict[str, str] | None = None, usage: dict[str, int] | None = None) -> None:
        with self._lock:
            self.requests.append(LoggedRequest(path, body, kind, tokens, stream, headers or {}, usage or {}))

    def messages(self) -> list[LoggedRequest]:
        """Logged Messages API calls (not token counts or stray paths), in arrival order."""
        return [r for r in self.requests if r.kind in ("message", "summarize")]


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
