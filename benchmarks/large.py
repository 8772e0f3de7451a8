"""Section: large inputs beside their parse floor (issue 28).

Two generated Claude Code sessions (fixturegen.large, seeded, written to a temp dir): many small
messages, and a short one with a single huge tool result. For each: the file's size, the parse floor
(`json.loads` of every line), the tokenizer floor (tiktoken over the text of every message), and
`worksurface inspect` and offline `worksurface compact` each run in its own process (wall time and
peak RSS), with their ratio to the parse floor. Target: each within a few times the parse floor.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from worksurface.core.tokens import get_encoding

from .plan import SCALE_SEED, Plan
from .report import table

NAME = "large"
# The sessions: (label, generator, size argument): the sizes issue 28 names, in --quick and --full alike.
CASES = (("100k small messages", "many", 100_000), ("one 200 MB tool result", "huge", 200))


def _generate(kind: str, size: int, path: Path) -> None:
    from fixturegen.large import write_huge_result, write_many_messages  # the synthetic-session generator

    (write_many_messages if kind == "many" else write_huge_result)(path, size, SCALE_SEED)


def _records(path: Path) -> Iterator[Any]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _texts(value: Any) -> Iterator[str]:
    """Every string a record's message holds (text, thinking, tool input and output)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _texts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _texts(v)


def _timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def parse_floor(path: Path) -> float:
    """Seconds to json.loads every line of the file."""
    return _timed(lambda: sum(1 for _ in _records(path)))


def tokenizer_floor(path: Path) -> float:
    """Seconds to encode the text of every message record with tiktoken (parsing excluded)."""
    enc = get_encoding()
    total = 0.0
    for record in _records(path):
        body = record.get("message") if isinstance(record, dict) else None
        if isinstance(body, dict):
            texts = list(_texts(body.get("content")))
            total += _timed(lambda: [enc.encode_ordinary(t) for t in texts])
    return total


def _run_cli(args: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of `python -m worksurface ARGS` in its own process
    (CPU time too: on a shared machine the wall time also counts what others ran)."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "worksurface", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    assert proc.stderr is not None
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    err = proc.stderr.read().decode(errors="replace")
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"worksurface {' '.join(args[:1])} failed ({proc.returncode}): {err[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure(path: Path, out_dir: Path) -> dict[str, Any]:
    floor = parse_floor(path)
    inspect_s, inspect_cpu, inspect_mb = _run_cli(["inspect", str(path), "--json"])
    compact_s, compact_cpu, compact_mb = _run_cli(["compact", str(path), "-o", str(out_dir / "compacted.jsonl"),
                                                   "--no-session"])
    return {"bytes": path.stat().st_size, "parse_floor_s": round(floor, 2),
            "tokenizer_floor_s": round(tokenizer_floor(path), 2),
            "inspect_s": round(inspect_s, 2), "inspect_cpu_s": round(inspect_cpu, 2),
            "inspect_peak_mb": round(inspect_mb),
            "compact_s": round(compact_s, 2), "compact_cpu_s": round(compact_cpu, 2),
            "compact_peak_mb": round(compact_mb),
            "inspect_over_floor": round(inspect_s / floor, 1), "compact_over_floor": round(compact_s / floor, 1)}


def run(plan: Plan) -> dict[str, Any]:
    rows = []
    for label, kind, size in CASES:
        with tempfile.TemporaryDirectory(prefix="ws-large-") as tmp:
            path = Path(tmp) / f"{kind}.jsonl"
            _generate(kind, size, path)
            rows.append({"session": label, **measure(path, Path(tmp))})
    return {"rows": rows}


def render(result: dict[str, Any], caption: str) -> str:
    rows = [[r["session"], round(r["bytes"] / 1e6, 1), r["parse_floor_s"], r["tokenizer_floor_s"], r["inspect_s"],
             r.get("inspect_cpu_s"), r["inspect_peak_mb"], r["compact_s"], r.get("compact_cpu_s"), r["compact_peak_mb"],
             r["inspect_over_floor"], r["compact_over_floor"]] for r in result["rows"]]
    return "\n\n".join([
        "## Large inputs beside their parse floor",
        caption,
        "Generated Claude Code sessions (`fixturegen.large`, seed 7, in a temp dir). Parse floor: `json.loads` of "
        "every line; tokenizer floor: tiktoken over the text of every message (parsing excluded). `inspect --json` "
        "and `compact --no-session` each run in their own process: wall and CPU time, and peak RSS of that process; "
        "the ratios are wall time over the parse floor.",
        table(["session", "file MB", "parse floor s", "tokenizer floor s", "inspect s", "inspect CPU s",
               "inspect peak MB", "compact s", "compact CPU s", "compact peak MB", "inspect / floor",
               "compact / floor"], rows),
    ])
