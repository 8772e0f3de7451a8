"""Section: the ledger's per-call time against the transcript's size (it should stay flat).

`Ledger.update` reads a call's new messages (its followers, the status bar, derive from them); the fold
waits for a reader (`settle`) and reads only the messages new since the last fold plus the few whose
tool calls still wait for a result. A generated session is replayed call by call twice: through
`update` and `settle` on every call (a reader on every call: the fold's per-call cost), and through
`update` alone (what a call on which no stage fires pays). The times are grouped by how large the
transcript is at that call: flat rows mean per-call work does not grow with the session.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from worksurface.formats import read_transcript
from worksurface.ledger import Ledger
from worksurface.offline.replay import call_points
from worksurface.core.tokens import TokenCounter

from .plan import SCALE_SEED, Plan
from .report import table
from .stats import median, percentile, slope

NAME = "ledger"
# Transcript sizes are grouped into bins this wide for the table (tokens).
BIN_TOKENS = 50_000
# The generated session's size: several bins, so growth would show.
SESSION_TOKENS = {"quick": 250_000, "full": 1_000_000}


def run(plan: Plan) -> dict[str, Any]:
    from fixturegen import write_session  # the synthetic-session generator

    size = SESSION_TOKENS["full" if plan.mode == "full" else "quick"]
    with tempfile.TemporaryDirectory(prefix="ws-ledger-") as tmp:
        path = write_session(Path(tmp) / "session.jsonl", size, SCALE_SEED)
        messages = read_transcript(path).messages
    counter = TokenCounter()
    running, sizes = 0, []
    for m in messages:
        running += counter.message(m)
        sizes.append(running)
    points = call_points(messages)
    ledger = Ledger()
    samples: list[tuple[int, float]] = []
    for n in points:
        started = time.perf_counter()
        ledger.update(messages[:n])
        ledger.settle()
        samples.append((sizes[n - 1], (time.perf_counter() - started) * 1000))
    reading = Ledger()
    read_ms: list[float] = []
    for n in points:
        started = time.perf_counter()
        reading.update(messages[:n])
        read_ms.append((time.perf_counter() - started) * 1000)
    bins: dict[int, list[tuple[float, float]]] = {}
    for (tokens, ms), read in zip(samples, read_ms):
        bins.setdefault(tokens // BIN_TOKENS, []).append((ms, read))
    rows: list[dict[str, Any]] = [{"from_tokens": b * BIN_TOKENS, "to_tokens": (b + 1) * BIN_TOKENS, "calls": len(v),
             "median_ms": round(median([f for f, _ in v]), 3), "p95_ms": round(percentile([f for f, _ in v], 95), 3),
             "read_median_ms": round(median([r for _, r in v]), 3)}
            for b, v in sorted(bins.items())]
    # Over the bins' medians: a few heavy calls (a huge output, a long error window) are not growth.
    growth = slope([(r["from_tokens"] + BIN_TOKENS / 2) / 100_000 for r in rows], [r["median_ms"] for r in rows])
    return {"messages": len(messages), "tokens": sizes[-1] if sizes else 0, "calls": len(samples),
            "rows": rows, "slope_ms_per_100k": round(growth, 4),
            "records": ledger.entry_counts()}


def render(result: dict[str, Any], caption: str) -> str:
    rows = [[f"{r['from_tokens'] // 1000}k-{r['to_tokens'] // 1000}k", r["calls"], r["median_ms"], r["p95_ms"],
             r.get("read_median_ms", "n/a")] for r in result["rows"]]
    return "\n\n".join([
        "## Ledger update per call",
        caption,
        f"A generated session of {result['tokens']:,} tokens ({result['messages']} messages) replayed call by "
        f"call through `Ledger.update` and `settle` on every call ({result['calls']} calls), and again through "
        f"`update` alone (a call no reader follows: the fold waits). Least-squares growth of the bins' median "
        f"fold time: {result['slope_ms_per_100k']} ms per 100k tokens of transcript.",
        table(["transcript size at the call", "calls", "update + fold median ms", "update + fold p95 ms",
               "update alone median ms"], rows),
    ])
