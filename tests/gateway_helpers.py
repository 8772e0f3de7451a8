"""Running the gateway for tests: in this process on a loopback port (uvicorn on a thread), or as a
`worksurface serve` subprocess (for the tests that kill it)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import httpx
import uvicorn

from worksurface.gateway import Gateway, GatewayConfig, create_app

# Generous: a loaded 2-core machine takes a while to import and start a subprocess.
START_TIMEOUT = 60.0


@dataclass
class Running:
    url: str
    gateway: Gateway | None = None
    process: subprocess.Popen[bytes] | None = None

    def sessions(self) -> list[dict[str, Any]]:
        return httpx.get(f"{self.url}/sessions", timeout=10).json()["sessions"]


@contextmanager
def running_gateway(store: Path, upstream: str, **settings: Any) -> Iterator[Running]:
    config = GatewayConfig(store=str(store), upstream=upstream, port=0, **settings)
    app = create_app(config)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True, name="gateway")
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the gateway did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Running(f"http://127.0.0.1:{port}", app.state.gateway)
    finally:
        server.should_exit = True
        thread.join(15)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def gateway_process(store: Path, upstream: str, *args: str, port: int | None = None) -> Iterator[Running]:
    """`worksurface serve` in a subprocess; stopped (SIGTERM, then SIGKILL) when the block ends. Its
    logs go to a file (a pipe nobody reads would stop the gateway once a long run filled it)."""
    port = port or free_port()
    command = [sys.executable, "-m", "worksurface", "serve", "--port", str(port), "--store", str(store),
               "--upstream", upstream, *args]
    with tempfile.TemporaryFile() as logs:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=logs,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while True:
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    if process.poll() is None:      # too slow: stop it
                        process.kill()
                        process.wait(5)
                    logs.seek(0)
                    raise RuntimeError(f"worksurface serve did not start: {logs.read().decode()[-2000:]}")
                time.sleep(0.05)
            yield Running(url, process=process)
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)


@dataclass
class Upstreamed:
    """What an in-process gateway forwarded: each request's path, headers and exact body bytes."""

    path: str
    headers: httpx.Headers
    body: bytes

    def json(self) -> Any:
        import json
        return json.loads(self.body)


@dataclass
class InProcess:
    """A gateway app driven in this process (no sockets): `client` speaks to it as the peer `peer`;
    `answer(request)` makes the upstream's response; `seen` lists what reached the upstream."""

    client: Any
    gateway: Gateway
    seen: list[Upstreamed]


@contextmanager
def inprocess_gateway(store: Path, answer: Any, *, peer: str = "127.0.0.1", **settings: Any) -> Iterator[InProcess]:
    """The gateway app with an httpx MockTransport as its upstream and Starlette's TestClient as its
    client: a test of what the gateway does with bytes runs in milliseconds."""
    from starlette.testclient import TestClient

    seen: list[Upstreamed] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(Upstreamed(request.url.path, request.headers, request.read()))
        response: httpx.Response = answer(request)
        return response

    config = GatewayConfig(store=str(store), upstream="http://upstream.test", port=0, **settings)
    app = create_app(config, transport=httpx.MockTransport(handler))
    with TestClient(app, client=(peer, 50000), raise_server_exceptions=False) as client:
        yield InProcess(client, app.state.gateway, seen)
