"""Section: the gateway under load (`python -m benchmarks --sections gateway`).

50 concurrent conversations replay real transcripts from ../shared/transcripts (each conversation
a transcript's first calls, its first user message tagged so every conversation is its own), then 20
join their transcripts at call 60 (a first request with the whole history before it, then one call
more each: what per-call work proportional to what is new is measured on), through
`worksurface serve` (a subprocess) to the fake Messages API, streaming, with the official async
`anthropic` SDK; the same requests go directly to the same fake for the baseline. Reported: latency
per request (p50/p99) through the gateway and direct, time to first byte of the streams, requests
per second, and the gateway's resident memory per session.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from worksurface.formats import anthropic_messages, dumps, read_transcript

from .plan import Plan
from .report import table

NAME = "gateway"
SESSIONS = 50
CALLS_PER_SESSION = 6
# The deep run: fewer conversations, each joining its transcript this many calls in (its first request
# carries that whole history; the next ones add a call each), where per-call work must follow what is new.
DEEP_SESSIONS = 20
DEEP_FROM_CALL = 60
HERE = Path(__file__).resolve().parent


def _requests(plan: Plan, sessions: int = SESSIONS, from_call: int = 0) -> list[list[dict[str, Any]]]:
    """Per conversation, its requests (Anthropic Messages bodies), from the plan's transcripts: the
    calls from `from_call` on (from the start when the transcript is shorter)."""
    sources = [s for s in plan.sources if s.path.suffix == ".jsonl"] or plan.sources
    docs: dict[Path, Any] = {}
    conversations = []
    for n in range(sessions):
        path = sources[n % len(sources)].path
        if path not in docs:
            docs[path] = json.loads(dumps(read_transcript(path), format="anthropic"))
        doc = docs[path]
        messages = doc["messages"]
        ends = [i + 1 for i, m in enumerate(messages) if m["role"] == "user" and i > 0]
        start = from_call if len(ends) >= from_call + CALLS_PER_SESSION else 0
        ends = ends[start:start + CALLS_PER_SESSION]
        first = messages[0]
        tag = {"type": "text", "text": f"[conversation {n}]"}
        first = {**first, "content": [tag, *(first["content"] if isinstance(first["content"], list)
                                             else [{"type": "text", "text": first["content"]}])]}
        conversations.append([{"model": "claude-bench", "max_tokens": 64, "system": doc.get("system", "agent"),
                               "messages": [first, *messages[1:end]]} for end in ends])
    return conversations


async def _drive(base_url: str, conversations: list[list[dict[str, Any]]]) -> dict[str, Any]:
    import anthropic

    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="sk-bench", max_retries=0, timeout=120)
    latencies: list[float] = []
    ttfb: list[float] = []

    async def one(calls: list[dict[str, Any]]) -> None:
        for body in calls:
            started = time.perf_counter()
            first = None
            async with client.messages.stream(**body) as stream:
                async for _ in stream:
                    if first is None:
                        first = time.perf_counter() - started
            latencies.append(time.perf_counter() - started)
            ttfb.append(first or 0.0)

    started = time.perf_counter()
    await asyncio.gather(*(one(c) for c in conversations))
    wall = time.perf_counter() - started
    await client.close()
    return {"latencies": latencies, "ttfb": ttfb, "wall": wall, "requests": len(latencies)}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def run(plan: Plan) -> dict[str, Any]:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from fake_anthropic import FakeAnthropic
    from gateway_helpers import gateway_process

    rows = [_load_run(_requests(plan), "first calls", SESSIONS, FakeAnthropic, gateway_process),
            _load_run(_requests(plan, DEEP_SESSIONS, DEEP_FROM_CALL), f"from call {DEEP_FROM_CALL}",
                      DEEP_SESSIONS, FakeAnthropic, gateway_process)]
    return {"rows": rows, "median_request_tokens": statistics.median(
        len(json.dumps(b)) // 4 for c in _requests(plan) for b in c)}


def _load_run(conversations: list[list[dict[str, Any]]], calls: str, sessions: int, fake_api: Any,
              gateway_process: Any) -> dict[str, Any]:
    with fake_api(lifetime=3600) as fake, tempfile.TemporaryDirectory() as store:
        load_before = os.getloadavg()[0]
        direct = asyncio.run(_drive(fake.url, conversations))
        with gateway_process(Path(store), fake.url) as gw:
            assert gw.process is not None
            idle = _rss_kb(gw.process.pid)
            through = asyncio.run(_drive(gw.url, conversations))
            loaded = _rss_kb(gw.process.pid)
    row = {
        "calls": calls, "sessions": sessions, "requests": through["requests"],
        "load_1m": round((load_before + os.getloadavg()[0]) / 2, 1),
        "gateway_p50_ms": round(_pct(through["latencies"], 0.5), 1), "gateway_p99_ms": round(_pct(through["latencies"], 0.99), 1),
        "direct_p50_ms": round(_pct(direct["latencies"], 0.5), 1), "direct_p99_ms": round(_pct(direct["latencies"], 0.99), 1),
        "ttfb_gateway_p50_ms": round(_pct(through["ttfb"], 0.5), 1), "ttfb_direct_p50_ms": round(_pct(direct["ttfb"], 0.5), 1),
        "gateway_rps": round(through["requests"] / through["wall"], 1), "direct_rps": round(direct["requests"] / direct["wall"], 1),
        "rss_idle_mb": round(idle / 1024, 1), "rss_loaded_mb": round(loaded / 1024, 1),
        "rss_per_session_mb": round((loaded - idle) / 1024 / sessions, 2),
        "cores": os.cpu_count(),
    }
    row["added_p50_ms"] = round(row["gateway_p50_ms"] - row["direct_p50_ms"], 1)
    row["added_p99_ms"] = round(row["gateway_p99_ms"] - row["direct_p99_ms"], 1)
    row["added_ttfb_p50_ms"] = round(row["ttfb_gateway_p50_ms"] - row["ttfb_direct_p50_ms"], 1)
    return row


def render(result: dict[str, Any], caption: str) -> str:
    columns = ["calls", "sessions", "requests", "load_1m", "added_p50_ms", "added_p99_ms", "added_ttfb_p50_ms", "gateway_rps",
               "direct_rps", "rss_per_session_mb", "gateway_p50_ms", "direct_p50_ms", "gateway_p99_ms", "direct_p99_ms"]
    return (f"## gateway\n\n{caption}\n\nConcurrent conversations, {CALLS_PER_SESSION} streamed calls each: a "
            f"transcript's first calls (median request about {result['median_request_tokens']} tokens), and calls "
            f"from its call {DEEP_FROM_CALL} on (the first carries the whole history before it); async anthropic SDK, "
            "through `worksurface serve` and directly to the same fake Messages API. `load_1m`: the machine's "
            "1-minute load average during the run (2 cores; other work shares them).\n\n"
            + table(columns, [[r[c] for c in columns] for r in result["rows"]]))
