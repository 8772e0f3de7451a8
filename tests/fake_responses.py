"""A fake OpenAI Responses API on 127.0.0.1 that scripts what the model answers, for driving the real
Codex CLI without a network or a key.

`FakeResponses(script)` serves `POST /v1/responses` (streamed as the SSE events Codex reads) and
`POST /v1/responses/compact` (Codex's remote compaction), records every request, and stops by itself
when its `with` block ends or after `IDLE_TIMEOUT` seconds without a request, whichever is first.

A script is a callable `(request body, recorded requests so far) -> Reply`. `Steps` is the common one:
a list of replies handed out in order, with compaction requests answered by a fixed summary.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Sequence

# No test or fixture run needs a quiet minute: a server left idle this long was forgotten, so it ends.
IDLE_TIMEOUT = 120.0
# Codex's local compaction sends its summarization prompt as the last user message; this phrase is in
# that prompt (codex-rs/core/templates/compact/prompt.md) and in no scripted user input.
COMPACT_PROMPT_MARK = "CONTEXT CHECKPOINT COMPACTION"
# What a reply reports as usage when the script does not say: small, so Codex never auto-compacts.
DEFAULT_INPUT_TOKENS = 1000
# A model in Codex's built-in catalog, so it gets that model's tools (apply_patch, update_plan) rather
# than the fallback metadata's.
DEFAULT_MODEL = "gpt-5.5"


@dataclass
class Reply:
    """One model answer: output items (Responses API shape) and the usage reported with it."""

    items: list[dict[str, Any]]
    input_tokens: int = DEFAULT_INPUT_TOKENS
    output_tokens: int = 50


@dataclass
class Recorded:
    path: str
    body: dict[str, Any]
    kind: str  # "turn", "compact" (local summarization turn) or "remote-compact"


def message(text: str, item_id: str | None = None) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "id": item_id or f"msg_{abs(hash(text)) % 10**8}",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def function_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{call_id}", "name": name,
            "arguments": json.dumps(args), "call_id": call_id}


def custom_call(name: str, text: str, call_id: str) -> dict[str, Any]:
    return {"type": "custom_tool_call", "id": f"ctc_{call_id}", "status": "completed", "call_id": call_id,
            "name": name, "input": text}


def reasoning(summary: str, item_id: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text", "text": summary}],
            "content": None, "encrypted_content": None}


def is_compaction_request(body: dict[str, Any]) -> bool:
    """True for Codex's local compaction turn: its last user input is the summarization prompt."""
    for item in reversed(body.get("input") or []):
        if item.get("type") == "message" and item.get("role") == "user":
            return any(COMPACT_PROMPT_MARK in (part.get("text") or "") for part in item.get("content") or [])
    return False


@dataclass
class Steps:
    """Replies in order, one per model turn; compaction requests get `summary` instead.
    Past the end it answers "done." so an extra turn never hangs the client."""

    replies: Sequence[Reply]
    summary: str = "Summary of the session so far."
    compactions: int = 0
    _next: int = 0

    def __call__(self, body: dict[str, Any], seen: list[Recorded]) -> Reply:
        if is_compaction_request(body):
            self.compactions += 1
            return Reply([message(self.summary, f"msg_summary_{self.compactions}")], input_tokens=500)
        if self._next < len(self.replies):
            self._next += 1
            return self.replies[self._next - 1]
        return Reply([message("done.", f"msg_extra_{self._next}_{len(seen)}")])


Script = Callable[[dict[str, Any], list[Recorded]], Reply]


def _usage(reply: Reply, cached_tokens: int) -> dict[str, Any]:
    return {"input_tokens": reply.input_tokens, "input_tokens_details": {"cached_tokens": cached_tokens},
            "output_tokens": reply.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.input_tokens + reply.output_tokens}


def whole_response(reply: Reply, response_id: str, cached_tokens: int = 0) -> dict[str, Any]:
    """A non-streamed response body."""
    return {"id": response_id, "object": "response", "created_at": 0, "status": "completed", "model": DEFAULT_MODEL,
            "output": reply.items, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": _usage(reply, cached_tokens)}


def sse_events(reply: Reply, response_id: str, cached_tokens: int = 0) -> bytes:
    """The streamed events Codex reads for one response."""
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": {"id": response_id}})]
    for index, item in enumerate(reply.items):
        events.append(("response.output_item.added",
                       {"type": "response.output_item.added", "output_index": index, "item": item}))
        if item.get("type") == "message":
            for part in item.get("content", []):
                events.append(("response.output_text.delta", {
                    "type": "response.output_text.delta", "output_index": index, "content_index": 0,
                    "item_id": item.get("id"), "delta": part.get("text", "")}))
        events.append(("response.output_item.done",
                       {"type": "response.output_item.done", "output_index": index, "item": item}))
    usage = _usage(reply, cached_tokens)
    events.append(("response.completed", {"type": "response.completed",
                                          "response": {"id": response_id, "usage": usage}}))
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


class FakeResponses:
    """The server; use as a context manager. `base_url` goes into Codex's provider config."""

    def __init__(self, script: Script, *, idle_timeout: float = IDLE_TIMEOUT, measure: bool = False) -> None:
        self.script = script
        # measure: report the request's own size as its input tokens (characters / 4), and the part
        # that repeats an earlier request's start as cached (OpenAI's automatic prompt caching).
        self.measure = measure
        self.cached: list[int] = []
        self._prompts: list[str] = []
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._idle_timeout = idle_timeout
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._threads: list[threading.Thread] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> "FakeResponses":
        serve = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        watch = threading.Thread(target=self._watchdog, daemon=True)
        self._threads = [serve, watch]
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._idle_timeout = 0.0
        self._server.shutdown()
        self._server.server_close()

    def _watchdog(self) -> None:
        while True:
            time.sleep(0.5)
            if self._idle_timeout <= 0:
                return
            if time.monotonic() - self._last > self._idle_timeout:
                self._server.shutdown()
                return

    def kinds(self) -> list[str]:
        return [r.kind for r in self.requests]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # /v1/models and similar: an empty list is a valid answer
                owner._last = time.monotonic()
                self._send(200, "application/json", json.dumps({"object": "list", "data": [],
                                                                "models": []}).encode())

            def do_POST(self) -> None:
                owner._last = time.monotonic()
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._send(400, "application/json", b'{"error": {"message": "bad json"}}')
                    return
                path = self.path.split("?")[0]
                with owner._lock:
                    if path.endswith("/responses/compact"):
                        kind = "remote-compact"
                    elif path.endswith("/responses"):
                        kind = "compact" if is_compaction_request(body) else "turn"
                    else:
                        self._send(404, "application/json", b'{"error": {"message": "not found"}}')
                        return
                    owner.requests.append(Recorded(path, body, kind))
                    reply = owner.script(body, owner.requests[:-1])
                    number = len(owner.requests)
                cached = 0
                if owner.measure:
                    from fake_chat import CHARS_PER_TOKEN, cached_tokens, prompt_text
                    text = json.dumps(body.get("instructions")) + prompt_text(body)
                    with owner._lock:
                        cached = cached_tokens(owner._prompts, text)
                        owner._prompts.append(text)
                        owner.cached.append(cached)
                    reply = Reply(reply.items, len(text) // CHARS_PER_TOKEN, reply.output_tokens)
                if kind == "remote-compact":
                    self._send(200, "application/json", json.dumps({"output": reply.items}).encode())
                elif not body.get("stream"):     # a whole response (SDKs' create without stream)
                    self._send(200, "application/json", json.dumps(whole_response(reply, f"resp_{number}", cached)).encode())
                else:
                    self._send(200, "text/event-stream", sse_events(reply, f"resp_{number}", cached))

            def _send(self, status: int, ctype: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def write_codex_config(home: Path, base_url: str, *, extra: str = "", tables: str = "",
                       model: str = DEFAULT_MODEL) -> Path:
    """`$HOME/.codex/config.toml` pointing Codex at the fake server (a custom provider: Codex ignores
    OPENAI_BASE_URL alone). `extra` adds top-level settings (e.g. a small auto_compact_token_limit),
    `tables` whole TOML tables (`[features]` ...)."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    config = codex_home / "config.toml"
    config.write_text(
        f'{extra}\nmodel = "{model}"\nmodel_provider = "fake"\n\n'
        f'[model_providers.fake]\nname = "fake"\nbase_url = "{base_url}"\nenv_key = "OPENAI_API_KEY"\n'
        f'wire_api = "responses"\nsupports_websockets = false\nrequest_max_retries = 0\n'
        f'stream_max_retries = 0\n\n{tables}\n', encoding="utf-8")
    return config


def codex_env(home: Path, base_env: dict[str, str]) -> dict[str, str]:
    """Environment for a Codex run: HOME and CODEX_HOME in the temporary folder, a dummy key."""
    env = {k: v for k, v in base_env.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"), OPENAI_API_KEY="sk-fake-loopback",
               NO_COLOR="1", RUST_LOG="error")
    return env


def find_codex() -> str | None:
    """The Codex binary: WORKSURFACE_CODEX_BIN, else where .ci/install-codex.sh puts it, else PATH."""
    explicit = os.environ.get("WORKSURFACE_CODEX_BIN")
    if explicit:
        return explicit if Path(explicit).exists() else None
    clients = Path(os.environ.get("WORKSURFACE_CLIENTS", Path.home() / ".cache" / "worksurface" / "clients"))
    installed = clients / "codex" / "node_modules" / ".bin" / "codex"
    if installed.exists():
        return str(installed)
    return shutil.which("codex")


def rollouts(home: Path) -> list[Path]:
    """Rollout files Codex wrote under this HOME, oldest first."""
    return sorted((home / ".codex" / "sessions").rglob("rollout-*.jsonl"), key=lambda p: p.stat().st_mtime)


__all__ = ["COMPACT_PROMPT_MARK", "FakeResponses", "Recorded", "Reply", "Steps", "codex_env", "custom_call",
           "find_codex",
           "function_call", "is_compaction_request", "message", "reasoning", "rollouts", "sse_events",
           "write_codex_config"]
