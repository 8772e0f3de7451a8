"""Section: large inputs beside their parse floor (issue 28).

Generated Claude Code sessions (fixturegen.large, written to a temp dir): many small messages, a short
one with a single huge tool result (both synthetic, seeded), and real content at length: four shared
long sessions repeated as one live chain (when the shared folder is there). For each: the file's size,
the parse floor (`json.loads` of every line), the tokenizer floor (tiktoken over the text of every
message), and `worksurface inspect` and offline `worksurface compact` each run in its own process (wall
time and peak RSS), with their ratio to the parse floor and to both floors together (what any
compaction that counts tokens must at least do). Target: each within a few times the floor.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

from worksurface.core.tokens import get_encoding

from . import replay
from .plan import SCALE_SEED, Plan
from .report import table

NAME = "large"
# The sessions: (label, generator, size argument): the sizes issue 28 names, in --quick and --full alike,
# and real content repeated to a length like theirs.
CASES = (("100k small messages", "many", 100_000), ("one 200 MB tool result", "huge", 200),
         ("4 real sessions x8, one chain", "repeated", 8))
# The real sessions repeated: the two long shared ones and two field ones of other users (Claude Code).
REPEATED_SOURCES = (replay.CLAUDE_CODE_DIR / "258c7280-ae70-4798-800f-63464d01a85d.jsonl",
                    replay.CLAUDE_CODE_DIR / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
                    replay.FIELD_DIR / "M-Claude" / "de73bc86-61f0-4c55-98af-c43cf612e3f6.jsonl",
                    replay.FIELD_DIR / "FSM1-cipher-box" / "af" / "1dd25ebb3e" / "8" / "full.jsonl")


def _generate(kind: str, size: int, path: Path) -> None:
    from fixturegen.large import write_huge_result, write_many_messages, write_repeated_sessions

    if kind == "repeated":
        write_repeated_sessions(path, REPEATED_SOURCES, size)
    else:
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


def _generated_with_floors(kind: str, size: int, path: Path) -> tuple[float, float]:
    _generate(kind, size, path)
    return parse_floor(path), tokenizer_floor(path)


def _prepare(kind: str, size: int, path: Path) -> tuple[float, float]:
    """Write the session to `path`; its (parse floor, tokenizer floor). Done in a process of its own:
    Linux starts a child's peak RSS from its parent's at the fork, and making and reading a huge file
    would raise this one's (the parent of the measured runs) by gigabytes."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_generated_with_floors, kind, size, path).result()


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


def measure(path: Path, out_dir: Path, floors: tuple[float, float]) -> dict[str, Any]:
    floor, tokens_floor = floors
    inspect_s, inspect_cpu, inspect_mb = _run_cli(["inspect", str(path), "--json"])
    compact_s, compact_cpu, compact_mb = _run_cli(["compact", str(path), "-o", str(out_dir / "compacted.jsonl"),
                                                   "--no-session"])
    return {"bytes": path.stat().st_size, "parse_floor_s": round(floor, 2),
            "tokenizer_floor_s": round(tokens_floor, 2),
            "inspect_s": round(inspect_s, 2), "inspect_cpu_s": round(inspect_cpu, 2),
            "inspect_peak_mb": round(inspect_mb),
            "compact_s": round(compact_s, 2), "compact_cpu_s": round(compact_cpu, 2),
            "compact_peak_mb": round(compact_mb),
            "inspect_over_floor": round(inspect_s / floor, 1), "compact_over_floor": round(compact_s / floor, 1),
            "compact_over_both_floors": round(compact_s / (floor + tokens_floor), 1)}


def run(plan: Plan) -> dict[str, Any]:
    rows, notes = [], []
    for label, kind, size in CASES:
        if kind == "repeated" and not all(p.is_file() for p in REPEATED_SOURCES):
            notes.append(f"{label}: skipped, its sessions are not all in {replay.SHARED}")
            continue
        with tempfile.TemporaryDirectory(prefix="ws-large-") as tmp:
            path = Path(tmp) / f"{kind}.jsonl"
            rows.append({"session": label, **measure(path, Path(tmp), _prepare(kind, size, path))})
    return {"rows": rows, "notes": notes}


def render(result: dict[str, Any], caption: str) -> str:
    rows = [[r["session"], round(r["bytes"] / 1e6, 1), r["parse_floor_s"], r["tokenizer_floor_s"], r["inspect_s"],
             r.get("inspect_cpu_s"), r["inspect_peak_mb"], r["compact_s"], r.get("compact_cpu_s"), r["compact_peak_mb"],
             r["inspect_over_floor"], r["compact_over_floor"], r.get("compact_over_both_floors")]
            for r in result["rows"]]
    return "\n\n".join([
        "## Large inputs beside their parse floor",
        caption,
        "Generated Claude Code sessions (`fixturegen.large`, in a temp dir): two synthetic (seed 7), and four shared "
        "long sessions (258c7280, 8463c716, field de73bc86 and af1dd25e:8) repeated 8 times as one live chain "
        "(`write_repeated_sessions`: boundaries, summaries and sub-agent records left out, ids renamed per copy). "
        "Parse floor: `json.loads` of every line; tokenizer floor: tiktoken over the text of every message (parsing "
        "excluded). `inspect --json` and `compact --no-session` each run in their own process: wall and CPU time, "
        "and peak RSS of that process; the ratios are wall time over the parse floor, and over both floors together.",
        table(["session", "file MB", "parse floor s", "tokenizer floor s", "inspect s", "inspect CPU s",
               "inspect peak MB", "compact s", "compact CPU s", "compact peak MB", "inspect / floor",
               "compact / floor", "compact / (parse + tokenizer)"], rows),
        *result.get("notes", []),
    ])
