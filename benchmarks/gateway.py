"""Section: the gateway under load (`python -m benchmarks --sections gateway`).

Real sessions (the field transcripts, ../shared/transcripts/field) replayed as N concurrent
conversations, each a transcript's calls from a point in it on (its first request carries the whole
history before: a new conversation for the gateway; the next ones add a call each), every call sent
through `worksurface serve` (a subprocess) and directly to the same fake Messages API, the two in
random order, interleaved in one run. The fake (its own subprocess, asyncio, no JSON decoding) answers
a short stream whose reported usage grows with the request (bytes / 4 x 1.1 + 3,000) and keeps a digest
of every body the gateway forwarded: the digests over the replays show whether forwarding changed.
Measured first alone, so its own CPU per request is known. Reported per N: added p50/p95/p99 ms (the
gateway's percentile less the direct one, over all calls and over the calls after a conversation's
first), throughput, the gateway's CPU per request and its resident memory per conversation.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from worksurface.formats import dumps, read_transcript

from .plan import Plan
from .report import table

NAME = "gateway"
CONCURRENCY = (1, 10, 50)
CALLS_PER_CONVERSATION = 6
FROM_CALL = 20              # where a conversation joins its transcript (from the start when shorter)
MAX_REQUEST_BYTES = 1_500_000
# The paced runs: the fake answers after this long (a model's time, waited without CPU), so the gateway
# sees the request rate real conversations make instead of a closed loop that saturates it.
MODEL_MS = 1000.0
HERE = Path(__file__).resolve().parent
ROUTE_HEADER = "x-bench-route"
CALL_HEADER = "x-bench-call"
_VARYING = re.compile(rb'generated-at=\\"[^"\\]*\\"|tag=[0-9a-f]{8,}')


# --- the fake upstream -------------------------------------------------------------------------------

def _answer(body_len: int) -> bytes:
    tokens = int(body_len / 4 * 1.1) + 3_000
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-bench", "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": tokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                      "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 2}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    data = b"".join(f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in events)
    return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: " + str(len(data)).encode()
            + b"\r\nconnection: keep-alive\r\n\r\n" + data)


async def _serve_fake(port: int, model_ms: float) -> None:
    digests: dict[str, str] = {}

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:] if l)}
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                if lines[0].startswith("GET /digests"):
                    data = json.dumps(digests).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                                 + str(len(data)).encode() + b"\r\n\r\n" + data)
                elif lines[0].startswith("GET"):
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
                else:
                    if headers.get(ROUTE_HEADER) == "gateway":
                        # The status bar's clock and the session's random mark key masked: what is left is
                        # what forwarding decided, the same in every run.
                        stable = _VARYING.sub(b"", body)
                        digests[headers.get(CALL_HEADER, "?")] = hashlib.blake2b(stable, digest_size=16).hexdigest()
                    if model_ms:        # the model's time: waited, not computed (no CPU)
                        await asyncio.sleep(model_ms / 1000)
                    writer.write(_answer(len(body)))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", port, backlog=512)
    async with server:
        await server.serve_forever()


class Fake:
    """The fake upstream in its own process (so its CPU is its own)."""

    def __init__(self, model_ms: float = 0.0) -> None:
        self.port = _free_port()
        self.process = subprocess.Popen([sys.executable, "-m", "benchmarks.gateway", "--fake", str(self.port),
                                         str(model_ms)], cwd=HERE.parent)
        _wait_for(f"http://127.0.0.1:{self.port}/healthz")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def digests(self) -> dict[str, str]:
        import httpx
        result: dict[str, str] = httpx.get(f"{self.url}/digests", timeout=30).json()
        return result

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


# --- the conversations ---------------------------------------------------------------------------------

def _conversations(plan: Plan, count: int) -> list[list[bytes]]:
    """Per conversation, its request bodies (streamed Messages requests, bytes as a client sends them)."""
    sources = plan.field_sources or [s for s in plan.sources if s.path.suffix == ".jsonl"]
    docs: dict[Path, Any] = {}
    out = []
    for n in range(count):
        path = sources[n % len(sources)].path
        if path not in docs:
            docs[path] = json.loads(dumps(read_transcript(path), format="anthropic"))
        doc = docs[path]
        messages = doc["messages"]
        ends = [i + 1 for i, m in enumerate(messages) if m["role"] == "user" and i > 0]
        start = FROM_CALL + n // len(sources) if len(ends) >= FROM_CALL + n // len(sources) + CALLS_PER_CONVERSATION else 0
        first = messages[0]
        tag = {"type": "text", "text": f"[conversation {n}]"}     # each conversation its own
        first = {**first, "content": [tag, *(first["content"] if isinstance(first["content"], list)
                                             else [{"type": "text", "text": first["content"]}])]}
        bodies = []
        for end in ends[start:start + CALLS_PER_CONVERSATION]:
            body = json.dumps({"model": "claude-bench", "max_tokens": 64, "stream": True,
                               "system": doc.get("system") or "agent", "messages": [first, *messages[1:end]]}).encode()
            if len(body) > MAX_REQUEST_BYTES:
                break
            bodies.append(body)
        out.append(bodies)
    return out


# --- the driver -------------------------------------------------------------------------------------

async def _drive(direct: str, gateway: str | list[str] | None, conversations: list[list[bytes]],
                 seed: int = 1) -> dict[str, Any]:
    """Every conversation's calls in turn, each sent directly and through the gateway (several: a
    conversation's call k goes to replica (n + k) mod their number) in random order."""
    gateways = [gateway] if isinstance(gateway, str) else list(gateway or [])
    import httpx

    rnd = random.Random(seed)
    timings: dict[str, list[float]] = {"direct": [], "gateway": [], "direct_next": [], "gateway_next": []}
    # Idle connections dropped before uvicorn's 5 s keep-alive does (a request on a connection the
    # server is closing fails with ReadError; a saturated run waits seconds between a conversation's calls).
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=400, keepalive_expiry=2.0)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        async def call(route: str, base: str, body: bytes, key: str, later: bool) -> None:
            headers = {"content-type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": "sk-bench",
                       ROUTE_HEADER: route, CALL_HEADER: key}
            started = time.perf_counter()
            async with client.stream("POST", f"{base}/v1/messages", content=body, headers=headers) as r:
                async for _ in r.aiter_raw():
                    pass
                if r.status_code != 200:
                    raise RuntimeError(f"{route} answered {r.status_code}")
            took = time.perf_counter() - started
            timings[route].append(took)
            if later:
                timings[f"{route}_next"].append(took)

        async def one(n: int, bodies: list[bytes]) -> None:
            for k, body in enumerate(bodies):
                routes = [("direct", direct)] + ([("gateway", gateways[(n + k) % len(gateways)])] if gateways else [])
                rnd.shuffle(routes)
                for route, base in routes:
                    await call(route, base, body, f"{n}/{k}", k > 0)

        started = time.perf_counter()
        await asyncio.gather(*(one(n, c) for n, c in enumerate(conversations)))
        wall = time.perf_counter() - started
    return {**timings, "wall": wall}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(url: str, timeout: float = 90.0) -> None:
    import httpx
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer")


def _gateway(store: str, upstream: str, *args: str) -> subprocess.Popen[bytes]:
    """`worksurface serve` (WS_BENCH_GATEWAY_PYTHONPATH: another tree's, for a before/after run)."""
    port = _free_port()
    env = dict(os.environ)
    if os.environ.get("WS_BENCH_GATEWAY_PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["WS_BENCH_GATEWAY_PYTHONPATH"]
    process = subprocess.Popen([sys.executable, "-m", "worksurface", "serve", "--port", str(port), "--store", store,
                                "--upstream", upstream, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=env)
    process.url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    _wait_for(f"{process.url}/healthz")  # type: ignore[attr-defined]
    return process


def fake_alone(conversations: list[list[bytes]]) -> dict[str, Any]:
    """The fake's own CPU per request, with nothing else sending to it."""
    fake = Fake()
    try:
        before = _cpu_seconds(fake.process.pid)
        result = asyncio.run(_drive(fake.url, None, conversations))
        cpu = _cpu_seconds(fake.process.pid) - before
    finally:
        fake.close()
    requests = len(result["direct"])
    return {"requests": requests, "fake_cpu_ms_per_request": round(cpu / requests * 1000, 3),
            "direct_p50_ms": round(_pct(result["direct"], 0.5), 2)}


def load_run(conversations: list[list[bytes]], label: str, model_ms: float = 0.0) -> dict[str, Any]:
    fake = Fake(model_ms)
    # One path in every run (emptied first): the forwarded bodies name it (an artifact's file), and the
    # digests must compare across runs.
    store = os.path.join(tempfile.gettempdir(), "ws-bench-gateway-store")
    shutil.rmtree(store, ignore_errors=True)
    gateway = _gateway(store, fake.url)
    try:
        idle = _rss_kb(gateway.pid)
        cpu_before = _cpu_seconds(gateway.pid)
        load = os.getloadavg()[0]
        result = asyncio.run(_drive(fake.url, gateway.url, conversations))  # type: ignore[attr-defined]
        cpu = _cpu_seconds(gateway.pid) - cpu_before
        loaded = _rss_kb(gateway.pid)
        digests = fake.digests()
    finally:
        gateway.terminate()
        gateway.wait(15)
        fake.close()
    return _row(label, model_ms, conversations, result, cpu, idle, loaded, load, digests)


def _row(label: str, model_ms: float, conversations: list[list[bytes]], result: dict[str, Any], cpu: float,
         idle: int, loaded: int, load: float, digests: dict[str, str]) -> dict[str, Any]:
    n = len(conversations)
    requests = len(result["gateway"])
    row: dict[str, Any] = {"run": label, "model_ms": model_ms, "conversations": n, "requests": requests,
                           "load_1m": round((load + os.getloadavg()[0]) / 2, 1)}
    for q, name in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
        row[f"added_{name}_ms"] = round(_pct(result["gateway"], q) - _pct(result["direct"], q), 1)
        row[f"added_next_{name}_ms"] = round(_pct(result["gateway_next"], q) - _pct(result["direct_next"], q), 1)
        row[f"gateway_{name}_ms"] = round(_pct(result["gateway"], q), 1)
        row[f"direct_{name}_ms"] = round(_pct(result["direct"], q), 1)
    row.update(gateway_rps=round(requests / result["wall"], 1),
               cpu_ms_per_request=round(cpu / requests * 1000, 1),
               rss_idle_mb=round(idle / 1024, 1), rss_per_conversation_mb=round((loaded - idle) / 1024 / n, 2),
               forwarded_digest=hashlib.blake2b("".join(f"{k}={digests[k]};" for k in sorted(digests)).encode(),
                                                digest_size=12).hexdigest(),
               forwarded=len(digests), digests=digests)
    return row


def replicas_run(conversations: list[list[bytes]], label: str, replicas: int = 2) -> dict[str, Any]:
    """The same replay through `replicas` gateways on one PostgreSQL database (WORKSURFACE_TEST_POSTGRES,
    else a throwaway cluster), a conversation's calls taking the replicas in turn."""
    import psycopg

    from pgcluster import Cluster

    server = os.environ.get("WORKSURFACE_TEST_POSTGRES")
    cluster = None if server else Cluster.start()
    server = server or cluster.url  # type: ignore[union-attr]
    name = f"ws_bench_{os.getpid()}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    store = f"{server.rsplit('/', 1)[0]}/{name}"
    fake = Fake()
    gateways = [_gateway(store, fake.url) for _ in range(replicas)]
    try:
        idle = sum(_rss_kb(g.pid) for g in gateways)
        cpu_before = sum(_cpu_seconds(g.pid) for g in gateways)
        load = os.getloadavg()[0]
        result = asyncio.run(_drive(fake.url, [g.url for g in gateways], conversations))  # type: ignore[attr-defined]
        cpu = sum(_cpu_seconds(g.pid) for g in gateways) - cpu_before
        loaded = sum(_rss_kb(g.pid) for g in gateways)
        digests = fake.digests()
    finally:
        for g in gateways:
            g.terminate()
            g.wait(15)
        fake.close()
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if cluster is not None:
            cluster.stop()
    return _row(label, 0.0, conversations, result, cpu, idle, loaded, load, digests)


def run(plan: Plan) -> dict[str, Any]:
    counts = [int(c) for c in os.environ.get("WS_BENCH_GATEWAY_N", ",".join(map(str, CONCURRENCY))).split(",")]
    biggest = _conversations(plan, max(counts))
    alone = fake_alone(biggest[:10])
    rows = [load_run(biggest[:n], f"N={n}") for n in counts]
    rows += [load_run(biggest[:n], f"N={n}", MODEL_MS) for n in counts if n > 1]
    if os.environ.get("WS_BENCH_GATEWAY_REPLICAS", "1") != "0":
        rows += [replicas_run(biggest[:max(counts)], f"N={max(counts)}, {r} on PostgreSQL", r) for r in (1, 2)]
    sizes = sorted(len(b) for c in biggest for b in c)
    with open("/proc/loadavg") as f:
        loadavg = f.read().split()[:3]
    return {"rows": rows, "fake": alone, "median_request_bytes": sizes[len(sizes) // 2],
            "max_request_bytes": sizes[-1], "uptime_load": loadavg,
            "bench_cpu_s": round(resource.getrusage(resource.RUSAGE_SELF).ru_utime, 1)}


def render(result: dict[str, Any], caption: str) -> str:
    columns = ["run", "model_ms", "requests", "load_1m", "added_p50_ms", "added_p95_ms", "added_p99_ms", "added_next_p50_ms",
               "added_next_p95_ms", "added_next_p99_ms", "gateway_rps", "cpu_ms_per_request", "rss_per_conversation_mb",
               "direct_p50_ms", "gateway_p50_ms", "gateway_p99_ms", "forwarded_digest"]
    fake = result["fake"]
    return (f"## gateway\n\n{caption}\n\nField sessions as N concurrent conversations, {CALLS_PER_CONVERSATION} "
            f"streamed calls each, from call {FROM_CALL} of their transcript on (median request "
            f"{result['median_request_bytes'] // 1024} KiB, largest {result['max_request_bytes'] // 1024} KiB); every "
            "call through `worksurface serve` and directly to the same fake, interleaved. `added_*`: the gateway's "
            "percentile less the direct one (all calls); `added_next_*`: the calls after a conversation's first "
            f"(whose request is new to the gateway). The fake alone: {fake['fake_cpu_ms_per_request']} ms of its own "
            f"CPU per request over {fake['requests']} requests. Load average at the end: "
            f"{' '.join(result['uptime_load'])} (2 cores, other work shares them). `forwarded_digest`: over the "
            "bodies the gateway forwarded in the run (equal digests: byte-identical forwarding).\n\n"
            + table(columns, [[r[c] for c in columns] for r in result["rows"]]))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--fake":
        asyncio.run(_serve_fake(int(sys.argv[2]), float(sys.argv[3])))
