"""A fake OpenAI Chat Completions API on 127.0.0.1 (for the gateway's tests and benchmark).

`POST /v1/chat/completions` answers with a scripted reply (a text, or a tool call), streamed as chunks
when the request asks for `stream` (with a usage chunk under `stream_options.include_usage`). Usage
reports `prompt_tokens` (characters / 4) and, as OpenAI's automatic prompt caching does,
`cached_tokens`: the part of the prompt that repeats the start of an earlier prompt, in 128-token
steps from 1024 tokens. Every request is recorded.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

CHARS_PER_TOKEN = 4
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128


def prompt_text(body: dict[str, Any]) -> str:
    return json.dumps(body.get("tools") or []) + json.dumps(body.get("messages") or body.get("input") or [])


def cached_tokens(seen: list[str], text: str) -> int:
    """Tokens of `text` that start as an earlier prompt did (the longest common prefix)."""
    best = max((_common_prefix(old, text) for old in seen), default=0)
    tokens = best // CHARS_PER_TOKEN
    return 0 if tokens < CACHE_MIN_TOKENS else tokens - tokens % CACHE_STEP_TOKENS


def _common_prefix(a: str, b: str) -> int:
    """Length of the common start of `a` and `b`: a binary search over slice comparisons (done in C;
    a character loop made the fakes slower than the gateway they measure)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class ChatReply:
    text: str | None = None
    tool: tuple[str, dict[str, Any], str] | None = None   # (name, arguments, call id)


@dataclass
class FakeChat:
    script: Callable[[dict[str, Any], int], ChatReply] = lambda body, n: ChatReply("ok")
    requests: list[dict[str, Any]] = field(default_factory=list)
    usages: list[dict[str, int]] = field(default_factory=list)
    _seen: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "FakeChat":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                text = prompt_text(body)
                with fake._lock:
                    n = len(fake.requests)
                    fake.requests.append(body)
                    usage = {"prompt_tokens": len(text) // CHARS_PER_TOKEN, "completion_tokens": 5,
                             "prompt_tokens_details": {"cached_tokens": cached_tokens(fake._seen, text)}}
                    usage["total_tokens"] = usage["prompt_tokens"] + 5
                    fake.usages.append({"prompt": usage["prompt_tokens"],
                                        "cached": usage["prompt_tokens_details"]["cached_tokens"]})
                    fake._seen.append(text)
                reply = fake.script(body, n)
                message: dict[str, Any] = {"role": "assistant", "content": reply.text}
                if reply.tool is not None:
                    name, args, call_id = reply.tool
                    message["tool_calls"] = [{"id": call_id, "type": "function",
                                              "function": {"name": name, "arguments": json.dumps(args)}}]
                finish = "tool_calls" if reply.tool else "stop"
                if body.get("stream"):
                    self._stream(body, message, finish, usage)
                    return
                doc = {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": body.get("model"),
                       "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}
                data = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], message: dict[str, Any], finish: str, usage: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}
                delta: dict[str, Any] = {"role": "assistant", "content": message["content"] or ""}
                chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}]
                for k, call in enumerate(message.get("tool_calls") or []):
                    chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [{**call, "index": k}]},
                                                        "finish_reason": None}]})
                chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
                if (body.get("stream_options") or {}).get("include_usage"):
                    chunks.append({**base, "choices": [], "usage": usage})
                for chunk in chunks:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
