"""The gateway: an ASGI app (Starlette) that runs `Session.prepare` on every request and forwards it.

Per request, the work on worker threads (workers.py), the event loop only moving bytes: parse it
and recognise its conversation from its stable prefix alone (a request that cannot be read is
forwarded unchanged, with a logged notice); pass it through untouched when its conversation lives
server-side; under the conversation's lock, read what is new in it and plan it (prepare,
context-management edits, the body); forward; stream the answer back. An upstream error is returned as the upstream gave it; the
gateway's own failure forwards the original request instead (fail open, logged): a conversation is
never broken by worksurface.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..core.artifacts import fetch as fetch_artifact
from ..core.edits import apply_edits
from ..core.errors import FormatError, SessionError
from ..core.tokens import get_encoding
from ..core.view import live_slice
from ..formats import ownmark
from ..graph.compose import load_langgraph
from ..session.writebehind import Flusher
from . import relay, sse
from .collector import Collector
from .anthropic import AnthropicMessages
from .apis import FETCH_TOOL, Api, OddAnswer, Usage, Watch, dumps
from .fetch import MAX_FETCH_ROUNDS, Answered, FetchCall, Round
from .config import TOKEN_VARIABLE, GatewayConfig, is_loopback
from .logs import event
from .metrics import Metrics
from .openai_chat import OpenAIChat
from .plan import Plan, plan_call
from .bodyparse import BodyParser
from .recognize import PrefixMemo, read_head
from .registry import Entry, Registry
from .store import valid_session_id
from .responses import OpenAIResponses
from .workers import Workers
from .upstream import Upstream, UpstreamResponse, UpstreamUnavailable, join_url, unavailable_body

STATE_HEADER = "x-worksurface"
SESSION_HEADER = "x-worksurface-session"
APPLIED_HEADER = "x-worksurface-applied-edits"
TOKEN_HEADER = "x-worksurface-token"
# Request bodies kept to parse the next one of their conversation from (each about twice its size).
RECENT_BODIES = 64
ANTHROPIC, CHAT, RESPONSES = AnthropicMessages(), OpenAIChat(), OpenAIResponses()


class Gateway:
    """The service behind the routes; `transport` replaces the network in tests."""

    def __init__(self, config: GatewayConfig, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self.session_config = config.session_config()
        self.metrics = Metrics()
        self.workers = Workers(config.worker_threads)
        self.flusher = Flusher() if config.writes_behind() else None
        self.collector = Collector(config.collect_interval)
        # Recent bodies and their stable prefixes: a request is parsed and recognised from what changed.
        recent = min(config.max_open_sessions, RECENT_BODIES)
        self.parser, self.prefixes = BodyParser(recent), PrefixMemo(recent)
        self.registry = Registry(config, self.session_config, self.workers, self.flusher)
        self.upstream = Upstream(config, transport)
        self._evicting: asyncio.Task[None] | None = None

    async def close(self) -> None:
        if self._evicting is not None:
            await self._evicting
        await self.registry.close()
        await self.upstream.close()
        self.workers.close()
        if self.flusher is not None:
            self.flusher.close()

    # --- the APIs --------------------------------------------------------------------------------

    async def handle(self, api: Api, request: Request) -> Response:
        self.collector.enter()
        try:
            response = await self._handle(api, request)
        except BaseException:
            self.collector.leave()
            raise
        if isinstance(response, StreamingResponse):     # under way until its last chunk is sent
            response.body_iterator = _finally(response.body_iterator, self.collector.leave)
        else:
            self.collector.leave()
        return response

    async def _handle(self, api: Api, request: Request) -> Response:
        started = time.perf_counter()
        raw = await request.body()
        url = join_url(self.config.upstream_for(api.NAME), request.url.path, request.url.query)
        headers = request.headers.items()
        try:
            head = await self.workers.run(read_head, api, request.headers, raw, self.parser, self.prefixes)
        except Exception as exc:    # any request worksurface cannot read goes on as it came
            return await self._unreadable(api, request, url, raw, started, exc)
        if head.passthrough is not None:
            return await self._forward(api, "passthrough", url, headers, raw, started,
                                       state=f"passthrough; reason={head.passthrough}")
        assert head.recognized is not None
        entry = self.registry.entry(head.recognized, api.NAME)
        offer_fetch = self._offers_fetch(api, head.body)
        await entry.recorded()      # the previous answer's usage is in the store before this call is sized
        try:
            async with entry.lock:
                plan = await self.workers.run(plan_call, api, self.registry, entry, head.body, self.session_config,
                                              offer_fetch)
        except FormatError as exc:
            return await self._unreadable(api, request, url, raw, started, exc, entry.id)
        except Exception as exc:
            event(logging.ERROR, "worksurface failed: the original request was forwarded", api=api.NAME,
                  session=entry.id, error=f"{type(exc).__name__}: {exc}"[:500])
            logging.getLogger("worksurface.gateway").debug("failure", exc_info=True)
            return await self._forward(api, "failed_open", url, headers, raw, started, session=entry.id)
        finally:
            self._evict_soon()
        if plan.doc == head.body:
            plan.body = raw         # nothing to edit: the client's own bytes go on
        self._account(api, entry, plan)
        rewrite = self._rewrite(api, entry, plan, url, headers, head.body, offer_fetch)
        if plan.pause and plan.compaction:
            return self._compaction_only(api, entry, plan, head.body, rewrite, started)
        return await self._forward(api, "prepared", url, headers, plan.body, started, session=entry.id,
                                   entry=entry, plan=plan, rewrite=rewrite)

    async def _unreadable(self, api: Api, request: Request, url: str, raw: bytes, started: float,
                          exc: Exception, session: str | None = None) -> Response:
        event(logging.WARNING, "request not readable: forwarded unchanged", api=api.NAME, session=session,
              path=request.url.path, bytes=len(raw), problem=str(exc)[:300])
        return await self._forward(api, "unparsed", url, request.headers.items(), raw, started, session=session)

    def _evict_soon(self) -> None:
        """Close idle sessions past the limit after this request, not in its path."""
        self.metrics.sessions_open.set(self.registry.open_count())
        if self.registry.open_count() > self.config.max_open_sessions and self._evicting is None:
            async def evict() -> None:
                try:
                    await self.registry.evict()
                finally:
                    self._evicting = None
                    self.metrics.sessions_open.set(self.registry.open_count())
            self._evicting = asyncio.get_running_loop().create_task(evict())

    async def count_tokens(self, request: Request) -> Response:
        """Anthropic `count_tokens`: the count of what the gateway would send (the session's edits
        applied to the request), never a new decision; unknown conversations are counted as sent."""
        started = time.perf_counter()
        raw = await request.body()
        url = join_url(self.config.upstream_for(ANTHROPIC.NAME), request.url.path, request.url.query)
        try:
            head = await self.workers.run(read_head, ANTHROPIC, request.headers, raw, self.parser, self.prefixes)
        except Exception:
            return await self._forward(ANTHROPIC, "unparsed", url, request.headers.items(), raw, started)
        entry = self.registry.find(head.recognized.session_id) if head.recognized is not None else None
        if entry is None or entry.session is None:
            return await self._forward(ANTHROPIC, "passthrough", url, request.headers.items(), raw, started,
                                       state="passthrough; reason=unknown-session")
        session = entry.session

        def counted_body() -> bytes:
            with ownmark.keyed(entry.mark_key):
                transcript = ANTHROPIC.read_doc(head.body)
                view = apply_edits(live_slice(transcript.messages), session.edits)
                return dumps(ANTHROPIC.build(transcript, view, head.body, self._offers_fetch(ANTHROPIC, head.body)))

        try:
            body = await self.workers.run(counted_body)
        except Exception:
            return await self._forward(ANTHROPIC, "unparsed", url, request.headers.items(), raw, started)
        return await self._forward(ANTHROPIC, "prepared", url, request.headers.items(), body, started,
                                   session=entry.id)

    # --- forwarding ------------------------------------------------------------------------------

    async def _forward(self, api: Api, outcome: str, url: str, headers: Any, body: bytes, started: float, *,
                       state: str | None = None, session: str | None = None, entry: Entry | None = None,
                       plan: Plan | None = None, rewrite: relay.Rewrite | None = None) -> Response:
        self.metrics.requests.labels(api.NAME, outcome).inc()
        self.metrics.added_latency.labels(api.NAME).observe(time.perf_counter() - started)
        extra = [(STATE_HEADER, state or outcome)]
        if session:
            extra.append((SESSION_HEADER, session))
        if plan is not None:
            extra.append(("x-worksurface-tokens", f"{plan.report.tokens_before}->{plan.report.tokens_after}"))
            if plan.applied:
                extra.append((APPLIED_HEADER, json.dumps(plan.applied, separators=(",", ":"))))
        try:
            upstream = await self.upstream.send("POST", url, headers, body)
        except UpstreamUnavailable as exc:
            return self._unavailable(api, session, exc, extra)
        self.metrics.upstream_status.labels(api.NAME, str(upstream.status)).inc()
        out_headers = [*upstream.headers, *extra]
        on_usage = self._on_usage(api, entry, session)
        if upstream.status >= 400 or not upstream.is_stream:
            try:
                data = await upstream.read()
            except UpstreamUnavailable as exc:
                return self._unavailable(api, session, exc, extra)
            finally:
                await upstream.close()
        if upstream.status >= 400:
            event(logging.INFO, "upstream error returned as given", api=api.NAME, session=session,
                  status=upstream.status)
            return _response(data, upstream.status, out_headers)
        active = rewrite if rewrite is not None and rewrite.needed else None
        self._log_call(api, outcome, session, plan, started)
        if upstream.is_stream:
            chunks = (api.rewrite_stream(upstream, active, on_usage) if active is not None
                      else relay.passthrough(api, upstream, on_usage))
            if entry is not None:
                chunks = _then(chunks, entry.recorded)
            return StreamingResponse(chunks, upstream.status, headers=_header_dict(out_headers))
        try:
            doc = json.loads(data)
        except ValueError:
            return _response(data, upstream.status, out_headers)
        on_usage.usage_of(lambda: api.usage_of(doc))
        if active is not None:
            try:
                answered = await self._answer_fetches(api, doc, active, on_usage)
                rewritten = api.rewrite_body(answered, active)
                if answered is not doc or rewritten != doc:     # else: nothing to say, its own bytes go on
                    data = dumps(rewritten)
            except (OddAnswer, AttributeError, TypeError, KeyError, ValueError) as exc:
                # An answer of a shape worksurface does not know goes to the client as it came.
                on_usage.odd(f"{type(exc).__name__}: {exc}")
        if entry is not None:
            await entry.recorded()
        return _response(data, upstream.status, out_headers)

    def _unavailable(self, api: Api, session: str | None, exc: UpstreamUnavailable,
                     extra: list[tuple[str, str]]) -> Response:
        event(logging.WARNING, "upstream unavailable", api=api.NAME, session=session, error=str(exc))
        status = 504 if exc.timeout else 502
        self.metrics.upstream_status.labels(api.NAME, str(status)).inc()
        return Response(unavailable_body(api.NAME, f"worksurface gateway: {exc}"), status,
                        headers=dict(extra), media_type="application/json")

    async def _answer_fetches(self, api: Api, doc: Any, rewrite: relay.Rewrite, on_usage: Watch) -> Any:
        """A whole response whose model called only fetch_artifact: asked again with the results."""
        kept: list[Any] = []
        for _ in range(MAX_FETCH_ROUNDS):
            found = api.fetch_round(doc) if rewrite.fetch is not None else None
            if found is None or rewrite.fetch is None:
                break
            # On Anthropic its words before the fetch stay, ahead of the answer's (once it has one).
            words = [b for b in found.turn if not (isinstance(b, dict) and b.get("type") == "tool_use"
                                                   and b.get("name") == FETCH_TOOL)] if api is ANTHROPIC else []
            try:
                response = await rewrite.fetch(found)
            except UpstreamUnavailable as exc:     # the model's last answer stands (its fetch calls hidden)
                on_usage.follow_up_failed(str(exc))
                break
            try:
                data = await response.read()
            except UpstreamUnavailable as exc:
                on_usage.follow_up_failed(str(exc))
                break
            finally:
                await response.close()
            if response.status >= 400:
                break
            kept += words
            doc = json.loads(data)
            on_usage.usage_of(lambda: api.usage_of(doc))
        if kept and isinstance(doc, dict):
            doc = {**doc, "content": kept + list(doc.get("content") or [])}
        return doc

    def _offers_fetch(self, api: Api, body: Mapping[str, Any]) -> bool:
        """fetch_artifact is offered, unless the client has a tool of that name itself (its calls are
        then the client's: known by who declared the tool, never taken over by its name)."""
        return self.config.offer_fetch and not api.declares_fetch(body)

    def _rewrite(self, api: Api, entry: Entry, plan: Plan, url: str, headers: Any,
                 body: Mapping[str, Any], offer_fetch: bool) -> relay.Rewrite:
        rewrite = relay.Rewrite()
        if api is ANTHROPIC:        # context management is Anthropic's; on the OpenAI APIs only fetch rewrites
            rewrite = relay.Rewrite(compaction=plan.compaction, applied=plan.applied,
                                    context_management=body.get("context_management") is not None)
        if offer_fetch:
            answered: Answered = []

            def answer(call: FetchCall) -> str:
                session = entry.session
                return fetch_artifact(session, call.input) if session is not None else "error: the session is closed"

            async def fetch(found: Round) -> UpstreamResponse:
                answered.append((found, [answer(c) for c in found.calls]))
                event(logging.INFO, "fetch_artifact answered", session=entry.id,
                      artifacts=[c.artifact for c in found.calls])
                return await self.upstream.send("POST", url, headers, api.follow_up(plan.doc, answered))

            rewrite.fetch = fetch
        return rewrite

    def _compaction_only(self, api: Api, entry: Entry, plan: Plan, body: Mapping[str, Any],
                         rewrite: relay.Rewrite, started: float) -> Response:
        """`pause_after_compaction`: the compaction block alone, answered by the gateway."""
        self.metrics.requests.labels(api.NAME, "local").inc()
        self.metrics.added_latency.labels(api.NAME).observe(time.perf_counter() - started)
        usage = {"input_tokens": plan.report.tokens_before, "output_tokens": 0,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        message: dict[str, Any] = {"id": f"msg_worksurface_{entry.id}_{entry.calls}", "type": "message", "role": "assistant",
                   "model": body.get("model"), "content": [], "stop_reason": "compaction", "stop_sequence": None,
                   "usage": usage}
        done = relay.anthropic_body(api, message, rewrite)
        extra = {STATE_HEADER: "local; reason=pause_after_compaction", SESSION_HEADER: entry.id}
        if not body.get("stream"):
            return Response(dumps(done), 200, headers=extra, media_type="application/json")
        start = {**message, "content": []}
        events = [sse.encode("message_start", {"type": "message_start", "message": start})]
        events += [relay._compaction_events(plan.compaction or "")]
        delta: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": "compaction", "stop_sequence": None},
                                 "usage": {"output_tokens": 0}}
        if rewrite.context_management:
            delta["context_management"] = {"applied_edits": plan.applied}
        events += [sse.encode("message_delta", delta), sse.encode("message_stop", {"type": "message_stop"})]
        return Response(b"".join(events), 200, headers=extra, media_type="text/event-stream")

    # --- bookkeeping -----------------------------------------------------------------------------

    def _account(self, api: Api, entry: Entry, plan: Plan) -> None:
        entry.calls += 1
        entry.last_report = plan.report.to_json()
        self.metrics.tokens_in.labels(api.NAME).inc(plan.report.tokens_before)
        self.metrics.tokens_forwarded.labels(api.NAME).inc(plan.report.tokens_after)
        for stage in plan.fired:
            self.metrics.stage_firings.labels(stage).inc()

    def _on_usage(self, api: Api, entry: Entry | None, session: str | None) -> Watch:
        def record(usage: Usage) -> None:
            self.metrics.usage(api.NAME, usage.input_tokens, usage.cached_tokens)
            if entry is not None:
                entry.record_usage(usage.input_tokens or None, self.workers)
                entry.input_tokens += usage.input_tokens
                entry.cached_tokens += usage.cached_tokens
        return Watch(record, api.NAME, session)

    def _log_call(self, api: Api, outcome: str, session: str | None, plan: Plan | None, started: float) -> None:
        fields: dict[str, Any] = {"api": api.NAME, "outcome": outcome, "session": session,
                                  "added_ms": round((time.perf_counter() - started) * 1000, 2)}
        if plan is not None:
            fields.update(tokens_in=plan.report.tokens_before, tokens_out=plan.report.tokens_after,
                          fired=plan.fired, bytes=len(plan.body))
            if plan.report.boundary:
                fields["compacted"] = True
            for notice in plan.notices:
                event(logging.INFO, "notice", session=session, notice=notice)
        event(logging.INFO, "forwarded", **fields)

    # --- the gateway's own endpoints ---------------------------------------------------------------

    def refusal(self, request: Request) -> Response | None:
        """Why `request` is not served (None: it is). With a token, every caller must send it (compared
        in constant time: both sides hashed first, so not even its length shows); without one, only
        loopback peers are served, the only callers a loopback-bound gateway can have."""
        token = self.config.token
        if not token:
            peer = request.client.host if request.client is not None else None
            if is_loopback(peer):
                return None
            return _error(403, "permission_error", "worksurface gateway: no token is set, so only this machine "
                          f"is served; set {TOKEN_VARIABLE} to serve others")
        given = request.headers.get(TOKEN_HEADER) or ""
        proxy = request.headers.get("proxy-authorization") or ""
        if proxy[:7].lower() == "bearer ":
            given = given or proxy[7:]
        if hmac.compare_digest(_digest(given), _digest(token)):
            return None
        return _error(401, "authentication_error", "worksurface gateway: missing or wrong gateway token")


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def _error(status: int, kind: str, message: str) -> Response:
    """The gateway's own error, shaped as the APIs shape theirs (ASCII JSON: any text can be said)."""
    body = json.dumps({"type": "error", "error": {"type": kind, "message": message}})
    return Response(body.encode(), status, media_type="application/json")


def _header_dict(headers: list[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in headers:
        out[k] = v if k not in out else f"{out[k]}, {v}"
    return out


def _response(data: bytes, status: int, headers: list[tuple[str, str]]) -> Response:
    response = Response(data, status)
    for k, v in headers:
        if k.lower() != "content-length":
            response.headers.append(k, v)
    return response


def create_app(config: GatewayConfig, transport: httpx.AsyncBaseTransport | None = None) -> Starlette:
    """The ASGI app. `app.state.gateway` is the Gateway (its metrics and sessions)."""
    gateway = Gateway(config, transport)

    def guarded(handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            refused = gateway.refusal(request)
            if refused is not None:
                return refused
            result: Response = await handler(request)
            return result
        return endpoint

    async def messages(request: Request) -> Response:
        return await gateway.handle(ANTHROPIC, request)

    async def chat(request: Request) -> Response:
        return await gateway.handle(CHAT, request)

    async def responses(request: Request) -> Response:
        return await gateway.handle(RESPONSES, request)

    async def sessions(request: Request) -> Response:
        try:
            listed = gateway.registry.list()
        except (SessionError, OSError) as exc:      # the store cannot be read: said, not raised
            event(logging.WARNING, "sessions not listed", problem=str(exc)[:300])
            return _error(503, "api_error", f"worksurface gateway: the session store cannot be read: {str(exc)[:300]}")
        return JSONResponse({"sessions": listed})

    async def session(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        if not valid_session_id(session_id):
            return _error(400, "invalid_request_error", f"worksurface gateway: {ascii(session_id[:100])} "
                          "is not a session id (letters, digits, '.', '_', '-', at most 81)")
        try:
            if request.method == "DELETE":
                deleted = await gateway.registry.delete(session_id)
                if not deleted:
                    return _error(404, "not_found_error", f"worksurface gateway: no session {session_id!r}")
                return JSONResponse({"deleted": True, "id": session_id})
            described = await gateway.registry.describe(session_id)
        except (SessionError, OSError) as exc:     # damaged or unreadable: said, not raised
            event(logging.WARNING, "session not readable", session=session_id, problem=str(exc)[:300])
            return _error(409, "invalid_request_error", f"worksurface gateway: session {session_id!r}: "
                          f"{str(exc)[:300]}")
        if described is None:
            return _error(404, "not_found_error", f"worksurface gateway: no session {session_id!r}")
        return JSONResponse(described)

    async def metrics(request: Request) -> Response:
        return Response(gateway.metrics.render(), media_type="text/plain; version=0.0.4")

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def other(request: Request) -> Response:
        """Anything else (model lists, Codex's remote compaction ...) goes through unchanged."""
        path = request.url.path
        api = ANTHROPIC if path.startswith("/v1/messages") or "anthropic-version" in request.headers else CHAT
        url = join_url(gateway.config.upstream_for(api.NAME), path, request.url.query)
        body = await request.body()
        gateway.metrics.requests.labels("other", "passthrough").inc()
        try:
            upstream = await gateway.upstream.send(request.method, url, request.headers.items(), body)
        except UpstreamUnavailable as exc:
            return Response(unavailable_body(api.NAME, f"worksurface gateway: {exc}"), 504 if exc.timeout else 502,
                            media_type="application/json")
        return StreamingResponse(_chunks(upstream), upstream.status, headers=_header_dict(upstream.headers))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gateway.workers.run(get_encoding)     # loaded once here, not in a first request's time
        await gateway.workers.run(load_langgraph)   # so is the graph a session's first compaction runs
        gateway.collector.start()                   # what is alive now is never collected again
        yield
        await gateway.collector.stop()
        await gateway.close()

    routes = [
        Route("/v1/messages", guarded(messages), methods=["POST"]),
        Route("/v1/messages/count_tokens", guarded(gateway.count_tokens), methods=["POST"]),
        Route("/v1/chat/completions", guarded(chat), methods=["POST"]),
        Route("/chat/completions", guarded(chat), methods=["POST"]),
        Route("/v1/responses", guarded(responses), methods=["POST"]),
        Route("/responses", guarded(responses), methods=["POST"]),
        Route("/sessions", guarded(sessions), methods=["GET"]),
        Route("/sessions/{session_id:path}", guarded(session), methods=["GET", "DELETE"]),
        Route("/metrics", guarded(metrics), methods=["GET"]),
        Route("/healthz", health, methods=["GET"]),
        Route("/{path:path}", guarded(other), methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
    ]
    async def http_error(request: Request, exc: Exception) -> Response:
        """A path no route takes (a newline in it, say) or a method a route does not: said in JSON."""
        status = exc.status_code if isinstance(exc, HTTPException) else 400
        return _error(status, "not_found_error" if status == 404 else "invalid_request_error",
                      f"worksurface gateway: {request.method} {ascii(request.url.path[:200])}: "
                      f"{exc.detail if isinstance(exc, HTTPException) else 'not served'}")

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_error})
    app.state.gateway = gateway
    return app


async def _then(chunks: AsyncIterator[bytes], done: Callable[[], Awaitable[None]]) -> AsyncIterator[bytes]:
    """`chunks`, the last one held back until `done()` has finished: a stream is complete only once
    what its answer reported is stored (another replica may take the conversation's next call)."""
    held: bytes | None = None
    async for chunk in chunks:
        if held is not None:
            yield held
        held = chunk
    await done()
    if held is not None:
        yield held


async def _finally(chunks: AsyncIterable[Any], done: Callable[[], None]) -> AsyncIterator[Any]:
    """`chunks`, then `done()` however the stream ends (sent, failed or dropped by the client)."""
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        done()


async def _chunks(upstream: UpstreamResponse) -> AsyncIterator[bytes]:
    try:
        async for chunk in upstream.chunks():
            yield chunk
    finally:
        await upstream.close()
