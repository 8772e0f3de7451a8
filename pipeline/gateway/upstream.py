"""The upstream client: forwards a request with the client's own headers (its provider key
included, never kept) and hands back the response as it streams in."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterable, Mapping

import httpx

from .config import GatewayConfig
from .logs import event

# Headers that describe one hop, not the request (RFC 9110 section 7.6.1), and those httpx sets itself.
HOP_HEADERS = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                         "upgrade", "host", "content-length", "accept-encoding"})
# The gateway's own credentials: checked here, never sent on.
GATEWAY_HEADERS = frozenset({"x-worksurface-token", "proxy-authorization", "x-worksurface-session"})
# Response headers that no longer hold once the body is decoded or rewritten.
_RESPONSE_DROP = frozenset({"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive"})


class UpstreamUnavailable(Exception):
    """The upstream could not be reached or did not answer in time (no response to pass on)."""

    def __init__(self, message: str, *, timeout: bool) -> None:
        super().__init__(message)
        self.timeout = timeout


@dataclass
class UpstreamResponse:
    status: int
    headers: list[tuple[str, str]]
    response: httpx.Response

    @property
    def is_stream(self) -> bool:
        return self.response.headers.get("content-type", "").startswith("text/event-stream")

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it streams in; an upstream that breaks off ends it (one log line, no traceback:
        the client has what came, as it would from the upstream itself)."""
        try:
            async for chunk in self.response.aiter_bytes():
                yield chunk
        except httpx.HTTPError as exc:
            event(logging.WARNING, "upstream stream broke off", status=self.status,
                  error=f"{type(exc).__name__}: {exc}"[:300])

    async def read(self) -> bytes:
        """The whole body (UpstreamUnavailable when the upstream breaks off before its end)."""
        try:
            return await self.response.aread()
        except httpx.HTTPError as exc:
            raise UpstreamUnavailable(f"upstream broke off its answer ({type(exc).__name__})",
                                      timeout=isinstance(exc, httpx.TimeoutException)) from None

    async def close(self) -> None:
        await self.response.aclose()


def forward_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in HOP_HEADERS and k.lower() not in GATEWAY_HEADERS]


def response_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in _RESPONSE_DROP]


def join_url(base: str, path: str, query: str = "") -> str:
    """`base` + the request's path; a base already ending in `/v1` is not given a second one."""
    base = base.rstrip("/")
    if base.endswith("/v1") and (path == "/v1" or path.startswith("/v1/")):
        path = path[3:]
    return base + path + (f"?{query}" if query else "")


class Upstream:
    """One pooled HTTP client for every upstream."""

    def __init__(self, config: GatewayConfig, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        timeout = httpx.Timeout(config.upstream_timeout, connect=config.connect_timeout)
        self.client = httpx.AsyncClient(timeout=timeout, transport=transport, follow_redirects=False,
                                        limits=httpx.Limits(max_connections=512, max_keepalive_connections=64))

    async def send(self, method: str, url: str, headers: Iterable[tuple[str, str]], body: bytes) -> UpstreamResponse:
        request = self.client.build_request(method, url, headers=forward_headers(headers), content=body)
        try:
            response = await self.client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise UpstreamUnavailable(f"upstream did not answer in time ({type(exc).__name__})", timeout=True) from None
        except httpx.HTTPError as exc:
            raise UpstreamUnavailable(f"upstream unreachable ({type(exc).__name__}: {exc})", timeout=False) from None
        return UpstreamResponse(response.status_code, response_headers(response.headers.multi_items()), response)

    async def close(self) -> None:
        await self.client.aclose()


def unavailable_body(api: str, message: str) -> bytes:
    """An error in the API's own shape, for when there is no upstream answer to pass on."""
    if api == "anthropic":
        doc: Mapping[str, Any] = {"type": "error", "error": {"type": "api_error", "message": message}}
    else:
        doc = {"error": {"message": message, "type": "upstream_unavailable", "code": None}}
    return json.dumps(doc).encode()
